//! Pure validation of tensor metadata: shapes, strides, spans and contiguity.
//!
//! Nothing here dereferences a pointer; every function takes plain values and slices, so it can
//! be fuzzed and tested directly. [`validate`] applies every DLPack rule to a [`RawFields`] and
//! returns a [`Layout`] summary, or the first [`Error`] found.

use core::fmt;

use crate::abi::{DLPackVersion, FLAG_IS_SUBBYTE_TYPE_PADDED, KNOWN_FLAGS};
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{AddressRange, Error, LayoutError};

/// The largest `ndim` accepted (NumPy 2 and PyTorch both stop at 64).
pub const MAX_NDIM: usize = 64;

/// How the elements of a tensor sit in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Contiguity {
    /// Both row-major and column-major contiguous (0-d, 1-d compact, size-0, or only one axis of
    /// extent > 1).
    Both,
    /// Row-major (C) contiguous.
    RowMajor,
    /// Column-major (Fortran) contiguous.
    ColumnMajor,
    /// Dense and positive, but in another axis order (a permutation of a compact layout, what
    /// JAX accepts).
    Permuted,
    /// Anything else: gaps, negative or zero (broadcast) strides, overlap.
    Strided,
}

impl Contiguity {
    /// Row-major contiguous (including [`Both`](Self::Both)).
    pub const fn is_row_major(self) -> bool {
        matches!(self, Self::Both | Self::RowMajor)
    }

    /// Column-major contiguous (including [`Both`](Self::Both)).
    pub const fn is_column_major(self) -> bool {
        matches!(self, Self::Both | Self::ColumnMajor)
    }

    /// Dense: the elements tile their span exactly, in some axis order.
    pub const fn is_dense(self) -> bool {
        !matches!(self, Self::Strided)
    }
}

impl fmt::Display for Contiguity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Both => "contiguous (C and F)",
            Self::RowMajor => "row-major (C) contiguous",
            Self::ColumnMajor => "column-major (F) contiguous",
            Self::Permuted => "dense with permuted axes",
            Self::Strided => "strided (not dense)",
        })
    }
}

/// The bytes a tensor touches, `[lo, hi)`, relative to `data + byte_offset`.
///
/// `lo` is ≤ 0 (negative strides reach below the first element); an empty tensor has `[0, 0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ByteSpan {
    /// The lowest byte touched.
    pub lo: i64,
    /// One past the highest byte touched.
    pub hi: i64,
}

impl ByteSpan {
    /// `hi - lo`.
    pub const fn len(self) -> u64 {
        self.hi.abs_diff(self.lo)
    }

    /// Whether no byte is touched.
    pub const fn is_empty(self) -> bool {
        self.hi == self.lo
    }
}

/// What validation learned about a tensor, computed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Number of elements (product of the extents; 1 for a 0-d tensor).
    pub numel: u64,
    /// Bytes touched, relative to `data + byte_offset`.
    pub span: ByteSpan,
    /// C / F / permuted / strided.
    pub contiguity: Contiguity,
    /// Bits one element occupies (`DataType::storage_bits`).
    pub element_bits: u32,
}

/// The raw fields of a tensor, as plain values: the input of [`validate`].
#[derive(Clone, Copy, Debug)]
pub struct RawFields<'a> {
    /// `data` as an address or handle value.
    pub data: usize,
    /// `device`.
    pub device: Device,
    /// `dtype`.
    pub dtype: DataType,
    /// The `ndim` extents.
    pub shape: &'a [i64],
    /// The strides, or `None` when `strides` was NULL.
    pub strides: Option<&'a [i64]>,
    /// `byte_offset`.
    pub byte_offset: u64,
    /// The DLPack version, or `None` for a legacy `DLManagedTensor`.
    pub version: Option<DLPackVersion>,
    /// `flags` (0 for legacy tensors).
    pub flags: u64,
}

/// Checks the version rule: major must be 1.
pub const fn check_version(version: DLPackVersion) -> Result<(), Error> {
    if version.major != crate::abi::DLPACK_MAJOR_VERSION {
        return Err(Error::Layout(LayoutError::UnsupportedVersion { version }));
    }
    Ok(())
}

/// Checks `ndim` before any array is read.
pub const fn check_ndim(ndim: i64) -> Result<usize, Error> {
    if ndim < 0 || ndim > MAX_NDIM as i64 {
        return Err(Error::Layout(LayoutError::NdimOutOfRange { ndim }));
    }
    Ok(ndim as usize)
}

/// Applies every DLPack rule to `fields` and summarises the layout.
///
/// Checks, in order: the major version, unknown flag bits, `ndim`, the data type (code, bits,
/// lanes), the extents (negative, element-count overflow), the NULL-strides rule of the version,
/// the stride count, the span (checked arithmetic on every product), NULL data, and, for
/// host-accessible memory, that `data + byte_offset + [lo, hi)` stays inside the address space.
///
/// ```
/// use dlport_core::layout::{validate, Contiguity, RawFields};
/// use dlport_core::{DataType, Device};
///
/// let shape = [2, 3];
/// let strides = [1, 2]; // column-major
/// let layout = validate(&RawFields {
///     data: 0x1000, device: Device::cpu(), dtype: DataType::FLOAT32,
///     shape: &shape, strides: Some(&strides), byte_offset: 0,
///     version: Some(dlport_core::abi::DLPackVersion::CURRENT), flags: 0,
/// }).unwrap();
/// assert_eq!(layout.contiguity, Contiguity::ColumnMajor);
/// assert_eq!((layout.span.lo, layout.span.hi), (0, 24));
/// ```
#[inline]
pub fn validate(fields: &RawFields<'_>) -> Result<Layout, Error> {
    let layout = validate_metadata(
        fields.dtype,
        fields.shape,
        fields.strides,
        fields.version,
        fields.flags,
    )?;
    if layout.numel != 0 && fields.data == 0 {
        return Err(Error::Layout(LayoutError::NullData {
            numel: layout.numel,
        }));
    }
    if layout.numel != 0 && fields.device.is_host_accessible() {
        check_address(fields.data, fields.byte_offset, layout.span)?;
    }
    Ok(layout)
}

/// Every rule of [`validate`] that does not look at `data`, `device` or `byte_offset`.
#[inline]
pub fn validate_metadata(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    version: Option<DLPackVersion>,
    flags: u64,
) -> Result<Layout, Error> {
    match fast_path(dtype, shape, strides, version, flags) {
        Some(layout) => Ok(layout),
        None => validate_metadata_slow(dtype, shape, strides, version, flags),
    }
}

/// The common case in one pass: version 1.x, known flags, a valid dtype, explicit strides of the
/// right length, positive extents, no overflow. Anything else returns `None` and goes through
/// [`validate_metadata_slow`], which finds the exact error (or accepts the rarer shapes: zero
/// extents, NULL strides).
#[inline]
fn fast_path(
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

/// Every rule of [`validate_metadata`], checked one by one to report the exact error.
#[cold]
#[inline(never)]
fn validate_metadata_slow(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    version: Option<DLPackVersion>,
    flags: u64,
) -> Result<Layout, Error> {
    if let Some(version) = version {
        check_version(version)?;
    }
    if flags & !KNOWN_FLAGS != 0 {
        return Err(Error::Layout(LayoutError::UnknownFlags { flags }));
    }
    let ndim = check_ndim(shape.len() as i64)?;
    dtype.validate()?;
    let element_bits = dtype.storage_bits(flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0);

    let numel = element_count(shape)?;
    let strides = match strides {
        Some(strides) if strides.len() != ndim => {
            return Err(Error::Layout(LayoutError::StridesLength {
                strides: strides.len(),
                ndim,
            }));
        }
        Some(strides) => Some(strides),
        None => match version {
            Some(version) if ndim > 0 && version.minor >= 2 => {
                return Err(Error::Layout(LayoutError::NullStrides {
                    ndim: ndim as i32,
                    version,
                }));
            }
            _ => None,
        },
    };

    if numel == 0 {
        return Ok(Layout {
            numel,
            span: ByteSpan::default(),
            contiguity: Contiguity::Both,
            element_bits,
        });
    }
    // Only NULL strides (legacy, < 1.2) need the compact strides computed; the buffer is not
    // initialised otherwise (this is the hot path of every import).
    let implicit: [i64; MAX_NDIM];
    let strides = match strides {
        Some(s) => s,
        None => {
            let mut buf = [0i64; MAX_NDIM];
            compact_row_major(shape, &mut buf[..ndim])?;
            implicit = buf;
            &implicit[..ndim]
        }
    };
    let (span, contiguity) = span_and_contiguity(shape, strides, element_bits)?;
    Ok(Layout {
        numel,
        span,
        contiguity,
        element_bits,
    })
}

/// The product of the extents, refusing negative extents and overflow.
pub fn element_count(shape: &[i64]) -> Result<u64, Error> {
    let mut numel: u64 = 1;
    let mut overflow_at = None;
    let mut has_zero = false;
    for (axis, &extent) in shape.iter().enumerate() {
        if extent < 0 {
            return Err(Error::Layout(LayoutError::NegativeExtent {
                axis: axis as u32,
                extent,
            }));
        }
        has_zero |= extent == 0;
        match numel.checked_mul(extent as u64) {
            Some(n) => numel = n,
            None => {
                // Keep scanning: a later zero extent makes the tensor empty, and a later
                // negative extent is the more basic error.
                overflow_at.get_or_insert((axis, extent));
                numel = u64::MAX;
            }
        }
    }
    if has_zero {
        return Ok(0);
    }
    match overflow_at {
        Some((axis, extent)) => Err(Error::Layout(LayoutError::ElementCountOverflow {
            axis: axis as u32,
            extent,
        })),
        // The count must also be an i64 so that element offsets never wrap.
        None if numel > i64::MAX as u64 => {
            let axis = shape.len().saturating_sub(1);
            Err(Error::Layout(LayoutError::ElementCountOverflow {
                axis: axis as u32,
                extent: shape[axis],
            }))
        }
        None => Ok(numel),
    }
}

/// Writes the compact row-major strides of `shape` into `out` (same length). A tensor with a
/// zero extent holds no element, so its strides never matter and never overflow: they
/// saturate (an empty `[i64::MAX, i64::MAX, 0]` is as valid to copy as to import).
pub fn compact_row_major(shape: &[i64], out: &mut [i64]) -> Result<(), Error> {
    let empty = shape.contains(&0);
    let mut acc: i64 = 1;
    for axis in (0..shape.len()).rev() {
        out[axis] = acc;
        let extent = shape[axis];
        acc = match acc.checked_mul(extent.max(1)) {
            Some(v) => v,
            None if empty => i64::MAX,
            None => {
                return Err(Error::Layout(LayoutError::ElementCountOverflow {
                    axis: axis as u32,
                    extent,
                }));
            }
        };
    }
    Ok(())
}

/// The span and the layout class of a non-empty tensor in one reverse pass over the axes (the
/// import hot path): checked reaches, and the row-major test on the way; the column-major and
/// permuted tests run only when the tensor is not row-major.
#[inline]
fn span_and_contiguity(
    shape: &[i64],
    strides: &[i64],
    element_bits: u32,
) -> Result<(ByteSpan, Contiguity), Error> {
    let (mut lo, mut hi) = (0i64, 0i64);
    let mut c = true;
    let mut expected: i64 = 1;
    let mut nonunit = 0usize;
    // The axis that reaches farthest: the culprit when the span overflows in bytes.
    let (mut culprit, mut farthest) = (shape.len().saturating_sub(1), 0u64);
    for axis in (0..shape.len()).rev() {
        let (extent, stride) = (shape[axis], strides[axis]);
        if extent > 1 {
            nonunit += 1;
            if c && stride != expected {
                c = false;
            }
            // Cannot overflow: the product of all extents fits in i64 (element_count).
            expected = expected.wrapping_mul(extent);
            let Some(reach) = (extent - 1).checked_mul(stride) else {
                return Err(span_overflow(axis, extent, stride));
            };
            if reach.unsigned_abs() >= farthest {
                (culprit, farthest) = (axis, reach.unsigned_abs());
            }
            let sum = if reach < 0 {
                lo.checked_add(reach)
            } else {
                hi.checked_add(reach)
            };
            match sum {
                Some(v) if reach < 0 => lo = v,
                Some(v) => hi = v,
                None => return Err(span_overflow(axis, extent, stride)),
            }
        }
    }
    // Row-major with at most one non-unit axis is column-major too.
    let contiguity = match (c, nonunit) {
        (true, 0 | 1) => Contiguity::Both,
        (true, _) => Contiguity::RowMajor,
        (false, _) => contiguity(shape, strides),
    };
    Ok((
        bytes_of(lo, hi, element_bits, shape, strides, culprit)?,
        contiguity,
    ))
}

#[cold]
fn span_overflow(axis: usize, extent: i64, stride: i64) -> Error {
    Error::Layout(LayoutError::SpanOverflow {
        axis: axis as u32,
        extent,
        stride,
    })
}

/// Element offsets `[lo, hi]` → the byte span (floor for `lo`, ceil for the end). An
/// overflow is blamed on `culprit`, the axis that reaches farthest.
#[inline]
fn bytes_of(
    lo: i64,
    hi: i64,
    element_bits: u32,
    shape: &[i64],
    strides: &[i64],
    culprit: usize,
) -> Result<ByteSpan, Error> {
    let bits = i64::from(element_bits);
    let overflow = || {
        span_overflow(
            culprit,
            shape.get(culprit).copied().unwrap_or(1),
            strides.get(culprit).copied().unwrap_or(1),
        )
    };
    let lo_bits = lo.checked_mul(bits).ok_or_else(overflow)?;
    let end_bits = hi
        .checked_add(1)
        .and_then(|e| e.checked_mul(bits))
        .ok_or_else(overflow)?;
    Ok(ByteSpan {
        lo: lo_bits.div_euclid(8),
        hi: end_bits.div_euclid(8) + i64::from(end_bits.rem_euclid(8) != 0),
    })
}

/// The byte span of a non-empty tensor, relative to its first element.
pub fn element_span(shape: &[i64], strides: &[i64], element_bits: u32) -> Result<ByteSpan, Error> {
    let (mut lo, mut hi) = (0i64, 0i64);
    let (mut culprit, mut farthest) = (shape.len().saturating_sub(1), 0u64);
    for (axis, (&extent, &stride)) in shape.iter().zip(strides).enumerate() {
        // extent ≥ 1 here (the tensor is not empty); an extent-1 axis contributes nothing,
        // whatever its stride.
        let reach = (extent - 1)
            .checked_mul(stride)
            .ok_or_else(|| span_overflow(axis, extent, stride))?;
        if reach.unsigned_abs() > farthest {
            (culprit, farthest) = (axis, reach.unsigned_abs());
        }
        let sum = if reach < 0 {
            lo.checked_add(reach).map(|v| lo = v)
        } else {
            hi.checked_add(reach).map(|v| hi = v)
        };
        sum.ok_or_else(|| span_overflow(axis, extent, stride))?;
    }
    bytes_of(lo, hi, element_bits, shape, strides, culprit)
}

/// Classifies the layout of a non-empty tensor.
pub fn contiguity(shape: &[i64], strides: &[i64]) -> Contiguity {
    // The products cannot overflow: the product of all extents fits in i64 (element_count).
    let mut c = true;
    let mut expected: i64 = 1;
    for (&extent, &stride) in shape.iter().zip(strides).rev() {
        if extent > 1 {
            if stride != expected {
                c = false;
                break;
            }
            expected = expected.saturating_mul(extent);
        }
    }
    let mut f = true;
    expected = 1;
    for (&extent, &stride) in shape.iter().zip(strides) {
        if extent > 1 {
            if stride != expected {
                f = false;
                break;
            }
            expected = expected.saturating_mul(extent);
        }
    }
    match (c, f) {
        (true, true) => return Contiguity::Both,
        (true, false) => return Contiguity::RowMajor,
        (false, true) => return Contiguity::ColumnMajor,
        (false, false) => {}
    }
    // Permuted: sort the axes of extent > 1 by stride and check they chain densely.
    let mut axes = [(0i64, 0i64); MAX_NDIM];
    let mut n = 0;
    for (&extent, &stride) in shape.iter().zip(strides) {
        if extent > 1 {
            if stride <= 0 {
                return Contiguity::Strided;
            }
            axes[n] = (stride, extent);
            n += 1;
        }
    }
    let axes = &mut axes[..n];
    axes.sort_unstable();
    let mut expected: i64 = 1;
    for &(stride, extent) in axes.iter() {
        if stride != expected {
            return Contiguity::Strided;
        }
        expected = expected.saturating_mul(extent);
    }
    Contiguity::Permuted
}

/// One past the highest user-space address of this platform: the first and last byte of a
/// host tensor must lie below it (and above 0). The platform conditions are named once, here:
/// x86_64 and riscv64 Linux reach 2^56 with 5-level paging (Sv57); aarch64 reaches 2^52 (LVA),
/// with the top byte ignored (TBI, used by tagged heap pointers); other 64-bit targets keep the
/// `isize::MAX` rule; 32-bit targets use their whole (wrapping-free) address range.
pub const USER_ADDRESS_END: u64 = {
    cfg_if::cfg_if! {
        if #[cfg(any(target_arch = "x86_64", target_arch = "riscv64"))] {
            1 << 56
        } else if #[cfg(target_arch = "aarch64")] {
            1 << 52
        } else if #[cfg(target_pointer_width = "64")] {
            1 << 63
        } else {
            1 << 32
        }
    }
};

/// Bits of an address that carry a tag rather than a location (aarch64's top byte).
const ADDRESS_TAG_MASK: u64 = if cfg!(target_arch = "aarch64") {
    0xff << 56
} else {
    0
};

/// Checks that `data + byte_offset + [lo, hi)` is user-space memory: the first byte above 0,
/// the last below [`USER_ADDRESS_END`], and the whole range at most `isize::MAX` bytes (Rust's
/// rule for any object). A tensor that passes can be read without leaving the address space;
/// `byte_offset = 2^63` over a valid buffer cannot.
#[inline]
pub fn check_address(data: usize, byte_offset: u64, span: ByteSpan) -> Result<(), Error> {
    let fail = || {
        Error::Layout(LayoutError::AddressOverflow {
            range: AddressRange::new(data, byte_offset, span),
        })
    };
    let untagged = data as u64 & !ADDRESS_TAG_MASK;
    let first = i128::from(untagged) + i128::from(byte_offset);
    let start = first + i128::from(span.lo);
    let end = first + i128::from(span.hi);
    let fits = start > 0
        && end <= i128::from(USER_ADDRESS_END)
        && end - start <= isize::MAX as i128
        && start <= end;
    if fits { Ok(()) } else { Err(fail()) }
}

/// The largest power of two dividing `address` (capped at 4096; `address` 0 counts as 4096).
pub const fn address_alignment(address: usize) -> usize {
    const CAP: usize = 4096;
    if address == 0 {
        return CAP;
    }
    let a = 1usize << address.trailing_zeros();
    if a > CAP { CAP } else { a }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use crate::abi::FLAG_READ_ONLY;

    /// The export fast path agrees with the full validation wherever it answers, and computes
    /// the same strides.
    #[test]
    fn compact_fast_agrees_with_validate_metadata() {
        let dtypes = [
            DataType::FLOAT32,
            DataType::UINT8,
            DataType::FLOAT16,
            DataType::COMPLEX128,
            DataType::BOOL,
            "float4_e2m1fn".parse().unwrap(),
            "int4".parse().unwrap(),
        ];
        let extents = [0i64, 1, 2, 3, 7, 1 << 20, i64::MAX / 3, -1];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut answered = 0;
        for _ in 0..if cfg!(miri) { 200 } else { 20_000 } {
            let ndim = next(6);
            let shape: alloc::vec::Vec<i64> =
                (0..ndim).map(|_| extents[next(extents.len())]).collect();
            let dtype = dtypes[next(dtypes.len())];
            let flags = [0, FLAG_READ_ONLY, FLAG_IS_SUBBYTE_TYPE_PADDED][next(3)];
            let mut fast = alloc::vec![0i64; ndim];
            let Some(layout) = compact_fast(dtype, &shape, &mut fast, flags) else {
                continue;
            };
            answered += 1;
            let mut slow = alloc::vec![0i64; ndim];
            compact_row_major(&shape, &mut slow).unwrap();
            assert_eq!(fast, slow, "{shape:?}");
            let full = validate_metadata(
                dtype,
                &shape,
                Some(&slow),
                Some(DLPackVersion::CURRENT),
                flags,
            );
            assert_eq!(full, Ok(layout), "{dtype} {shape:?} flags {flags}");
        }
        assert!(
            answered > 1000 || cfg!(miri),
            "the fast path answered only {answered} times"
        );
    }
}
