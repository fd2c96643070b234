//! The full rules: element counts, byte spans in checked arithmetic (bits for sub-byte
//! types), and contiguity.

use crate::abi::{DLPackVersion, FLAG_IS_SUBBYTE_TYPE_PADDED, KNOWN_FLAGS};
use crate::dtype::DataType;
use crate::error::{Error, LayoutError};

use super::summary::{ByteSpan, Contiguity, Layout, MAX_NDIM};

/// Every rule of [`validate_metadata`], checked one by one to report the exact error.
#[cold]
#[inline(never)]
pub(super) fn validate_metadata_slow(
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

/// Bytes of the elements of `shape` in `dtype`, compact (sub-byte elements packed, the last byte
/// rounded up), exactly: at most `i64::MAX` elements of at most 2^24 bits each, a product that
/// 128 bits hold, so it never wraps. An extent of 0 makes it 0 whatever the others are. Refuses
/// an invalid dtype, a negative extent and an element count past `i64::MAX`. Where the bytes
/// must fit memory, the caller bounds the count (`compact_bytes`: `isize::MAX`).
///
/// ```
/// use dlport_core::{DataType, layout::compact_byte_count};
/// // float64, 2^61 + 1 elements: 2^64 + 8 bytes, counted exactly.
/// let huge = compact_byte_count(DataType::FLOAT64, &[(1 << 61) + 1]).unwrap();
/// assert_eq!(huge, (1u128 << 64) + 8);
/// // An empty tensor holds no byte, whatever its other extents.
/// assert_eq!(compact_byte_count(DataType::FLOAT64, &[1 << 33, 1 << 33, 0]).unwrap(), 0);
/// ```
pub fn compact_byte_count(dtype: DataType, shape: &[i64]) -> Result<u128, Error> {
    dtype.validate()?;
    let numel = element_count(shape)?;
    Ok((u128::from(numel) * u128::from(dtype.storage_bits(false))).div_ceil(8))
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
pub(super) fn span_and_contiguity(
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
pub(super) fn span_overflow(axis: usize, extent: i64, stride: i64) -> Error {
    Error::Layout(LayoutError::SpanOverflow {
        axis: axis as u32,
        extent,
        stride,
    })
}

/// Element offsets `[lo, hi]` → the byte span (floor for `lo`, ceil for the end). An
/// overflow is blamed on `culprit`, the axis that reaches farthest.
#[inline]
pub(super) fn bytes_of(
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
