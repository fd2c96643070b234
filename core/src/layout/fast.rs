//! The fast path of validation: the common shapes (compact, few axes, byte-sized
//! elements) decided with a few comparisons, falling back to the full rules otherwise.

use crate::abi::{DLPackVersion, FLAG_IS_SUBBYTE_TYPE_PADDED, KNOWN_FLAGS};
use crate::dtype::DataType;

use super::*;

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
        || dtype.validate().is_err()
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
/// export fast path, where the strides are valid by construction. Anything unusual (unknown
/// flags or dtype, a negative extent, an overflow) returns `None`, and the caller goes through
/// the full validation, which names the exact error.
#[cfg(feature = "alloc")]
#[inline]
pub(crate) fn compact_fast(
    dtype: DataType,
    shape: &[i64],
    strides: &mut [i64],
    flags: u64,
) -> Option<Layout> {
    if flags & !KNOWN_FLAGS != 0 || shape.len() > MAX_NDIM || dtype.validate().is_err() {
        return None;
    }
    let element_bits = dtype.storage_bits(flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0);
    let (mut acc, mut numel, mut nonunit) = (1i64, 1i64, 0usize);
    for (extent, stride) in shape.iter().zip(strides.iter_mut()).rev() {
        let extent = *extent;
        if extent < 0 {
            return None;
        }
        *stride = acc;
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
