//! The fast path of validation: the common shapes (compact, few axes, byte-sized
//! elements) decided with a few comparisons, falling back to the full rules otherwise.

use crate::abi::{DLPackVersion, FLAG_IS_SUBBYTE_TYPE_PADDED, KNOWN_FLAGS};
use crate::dtype::DataType;

use super::address::address_fits;
use super::rules::contiguity;
use super::summary::{ByteSpan, Contiguity, Layout, MAX_NDIM, RawFields};
use crate::device::Device;

/// Every rule of [`validate`] for the common case, in one pass and without building a
/// `Result`: DLPack 1.x (or legacy), known flags, a valid scalar dtype of 1, 2, 4, 8 or 16
/// bytes, `ndim ≤ 64`, positive extents, explicit strides (or NULL strides where the version
/// allows them), no overflow, a device id the rule of device ids allows, non-NULL `data` and,
/// for host memory, an address range inside user space. It answers `Some` only where [`validate`] returns `Ok` with the same layout
/// (checked on random fields by `validate_fast_agrees_with_validate`); anything else
/// (an error, an empty tensor, a sub-byte or vector dtype) is `None`, and the full rules
/// decide.
#[inline(always)]
pub(crate) fn validate_fast(fields: &RawFields<'_>) -> Option<Layout> {
    let layout = metadata_fast(
        fields.dtype,
        fields.shape,
        fields.strides,
        fields.version,
        fields.flags,
    )?;
    placement_fast(fields.data, fields.device, fields.byte_offset, layout)
}

/// The rules of [`validate_fast`] that do not look at `data`, `device` or `byte_offset`
/// (split so that a caller reading a `DLTensor` loads those three only after the loop).
#[inline(always)]
pub(crate) fn metadata_fast(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    version: Option<DLPackVersion>,
    flags: u64,
) -> Option<Layout> {
    if flags & !KNOWN_FLAGS != 0 || shape.len() > MAX_NDIM {
        return None;
    }
    if let Some(v) = version {
        if v.major != crate::abi::DLPACK_MAJOR_VERSION {
            return None;
        }
    }
    // Whole bytes, so IS_SUBBYTE_TYPE_PADDED changes nothing and the element is `bits` wide.
    let log2 = dtype.whole_byte_log2()?;
    // Element offsets [lo, hi] of the first and last element touched, relative to the first.
    let (numel, lo, hi, contiguity) = match strides {
        Some(strides) => {
            if strides.len() != shape.len() {
                return None;
            }
            match row_major_numel(shape, strides) {
                Some((numel, both)) => (numel, 0, numel - 1, row_major(both)),
                None => strided(shape, strides)?,
            }
        }
        None => {
            // NULL strides: compact row-major, allowed before 1.2 (and for legacy tensors).
            if version.is_some_and(|v| v.minor >= 2) && !shape.is_empty() {
                return None;
            }
            let (mut numel, mut nonunit) = (1i64, 0u32);
            for &extent in shape {
                if extent <= 0 {
                    return None;
                }
                numel = numel.checked_mul(extent)?;
                nonunit += u32::from(extent != 1);
            }
            (numel, 0, numel - 1, row_major(nonunit <= 1))
        }
    };
    let bits = 8i64 << log2;
    // In bits first, as the full rules compute it (an overflow there is an error there too).
    let lo_bytes = lo.checked_mul(bits)? >> 3;
    let hi_bytes = hi.checked_add(1)?.checked_mul(bits)? >> 3;
    Some(Layout {
        numel: numel as u64,
        span: ByteSpan {
            lo: lo_bytes,
            hi: hi_bytes,
        },
        contiguity,
        element_bits: 8 << log2,
    })
}

/// The rest of [`validate_fast`] for a non-empty `layout` from [`metadata_fast`]: the rule of
/// device ids ([`Device::has_valid_id`]), non-NULL `data` and, for host memory, the address
/// range.
#[inline(always)]
pub(crate) fn placement_fast(
    data: usize,
    device: Device,
    byte_offset: u64,
    layout: Layout,
) -> Option<Layout> {
    if data == 0
        || !device.has_valid_id()
        || (device.is_host_accessible() && !address_fits(data, byte_offset, layout.span))
    {
        return None;
    }
    Some(layout)
}

#[inline(always)]
const fn row_major(both: bool) -> Contiguity {
    if both {
        Contiguity::Both
    } else {
        Contiguity::RowMajor
    }
}

/// The element count of a row-major contiguous tensor with positive extents, and whether at
/// most one axis has an extent above 1 (then it is column-major too); `None` otherwise (not
/// row-major, an extent ≤ 0, an overflow). Row-major strides reach exactly `[0, numel - 1]`,
/// which cannot overflow once `numel` does not.
#[inline(always)]
fn row_major_numel(shape: &[i64], strides: &[i64]) -> Option<(i64, bool)> {
    let (mut numel, mut nonunit) = (1i64, 0u32);
    for (&extent, &stride) in shape.iter().zip(strides).rev() {
        if extent != 1 {
            if extent <= 0 || stride != numel {
                return None;
            }
            numel = numel.checked_mul(extent)?;
            nonunit += 1;
        }
    }
    Some((numel, nonunit <= 1))
}

/// The element count, the reach `[lo, hi]` in elements and the layout class of a tensor that is
/// not row-major, with positive extents and no overflow; `None` otherwise.
#[inline(never)]
fn strided(shape: &[i64], strides: &[i64]) -> Option<(i64, i64, i64, Contiguity)> {
    let (mut numel, mut lo, mut hi) = (1i64, 0i64, 0i64);
    for (&extent, &stride) in shape.iter().zip(strides) {
        if extent <= 0 {
            return None;
        }
        if extent != 1 {
            numel = numel.checked_mul(extent)?;
            let reach = (extent - 1).checked_mul(stride)?;
            if reach < 0 {
                lo = lo.checked_add(reach)?;
            } else {
                hi = hi.checked_add(reach)?;
            }
        }
    }
    Some((numel, lo, hi, contiguity(shape, strides)))
}

/// The common case in one pass: version 1.x, known flags, a valid dtype, explicit strides of the
/// right length, positive extents, no overflow. Anything else returns `None` and goes through
/// [`validate_metadata_slow`], which finds the exact error (or accepts the rarer shapes: zero
/// extents, NULL strides).
#[inline]
pub(super) fn fast_path(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    version: Option<DLPackVersion>,
    flags: u64,
) -> Option<Layout> {
    if version.is_some_and(|v| v.major != crate::abi::DLPACK_MAJOR_VERSION)
        || flags & !KNOWN_FLAGS != 0
        || shape.len() > MAX_NDIM
        || !dtype.is_valid()
    {
        return None;
    }
    let strides = strides?;
    if strides.len() != shape.len() {
        return None;
    }
    let element_bits = dtype.storage_bits(flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0);
    let (mut numel, mut lo, mut hi) = (1i64, 0i64, 0i64);
    let (mut c, mut expected, mut nonunit) = (true, 1i64, 0usize);
    for (&extent, &stride) in shape.iter().zip(strides).rev() {
        if extent <= 0 {
            return None;
        }
        numel = numel.checked_mul(extent)?;
        if extent > 1 {
            nonunit += 1;
            c &= stride == expected;
            expected = numel;
            let reach = (extent - 1).checked_mul(stride)?;
            if reach < 0 {
                lo = lo.checked_add(reach)?;
            } else {
                hi = hi.checked_add(reach)?;
            }
        }
    }
    let bits = i64::from(element_bits);
    let lo_bits = lo.checked_mul(bits)?;
    let end_bits = hi.checked_add(1)?.checked_mul(bits)?;
    let span = ByteSpan {
        lo: lo_bits.div_euclid(8),
        hi: end_bits.div_euclid(8) + i64::from(end_bits.rem_euclid(8) != 0),
    };
    let contiguity = match (c, nonunit) {
        (true, 0 | 1) => Contiguity::Both,
        (true, _) => Contiguity::RowMajor,
        (false, _) => contiguity(shape, strides),
    };
    Some(Layout {
        numel: numel as u64,
        span,
        contiguity,
        element_bits,
    })
}

/// Fills `strides` with the compact row-major strides of `shape` and returns the layout that
/// [`validate_metadata`] would compute for them (DLPack 1.x, `flags`), in one reverse pass: the
/// export fast path, where the strides are valid by construction. Every stride is written when
/// it returns `Some`. Anything unusual (unknown flags or dtype, a negative extent, an
/// overflow) returns `None`, with some strides perhaps unwritten, and the caller goes through
/// the full validation, which names the exact error.
#[cfg(feature = "alloc")]
#[inline]
pub(crate) fn compact_fast(
    dtype: DataType,
    shape: &[i64],
    strides: &mut [core::mem::MaybeUninit<i64>],
    flags: u64,
) -> Option<Layout> {
    if flags & !KNOWN_FLAGS != 0 || shape.len() > MAX_NDIM || strides.len() != shape.len() {
        return None;
    }
    let element_bits = match dtype.whole_byte_log2() {
        Some(log2) => 8 << log2,
        None if dtype.is_valid() => dtype.storage_bits(flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0),
        None => return None,
    };
    let (mut acc, mut numel, mut nonunit) = (1i64, 1i64, 0usize);
    for (extent, stride) in shape.iter().zip(strides.iter_mut()).rev() {
        let extent = *extent;
        if extent < 0 {
            return None;
        }
        stride.write(acc);
        acc = acc.checked_mul(extent.max(1))?;
        numel *= extent; // |numel| ≤ acc: no overflow
        nonunit += usize::from(extent > 1);
    }
    if numel == 0 {
        return Some(Layout {
            numel: 0,
            span: ByteSpan::default(),
            contiguity: Contiguity::Both,
            element_bits,
        });
    }
    let end_bits = numel.checked_mul(i64::from(element_bits))?;
    Some(Layout {
        numel: numel as u64,
        span: ByteSpan {
            lo: 0,
            hi: end_bits.div_euclid(8) + i64::from(end_bits.rem_euclid(8) != 0),
        },
        contiguity: if nonunit <= 1 {
            Contiguity::Both
        } else {
            Contiguity::RowMajor
        },
        element_bits,
    })
}
