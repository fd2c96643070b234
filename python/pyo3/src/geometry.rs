//! The numbers a tensor reports as bytes: `Tensor.nbytes` and the buffer protocol's (PEP 3118)
//! format, `len`, `itemsize`, shape and byte strides, as plain Rust over dlport-core's one exact
//! byte count ([`compact_byte_count`]).
//!
//! A tensor's element count fits in `i64`, its byte count need not: a stride-0 axis keeps the
//! memory it reaches at one element whatever its extent, so float64 of shape `(2**61 + 1,)` and
//! strides `(0,)` is a valid 8-byte view of 2^64 + 8 compact bytes. `nbytes` says that number
//! exactly (Python's `int` holds it), and the buffer protocol, whose `len` is a `Py_ssize_t`
//! that consumers copy that many bytes by, refuses such a tensor, as NumPy refuses an array of
//! that size ("array is too big"). An extent of 0 makes the count 0 whatever the other extents.
//!
//! This file needs dlport-core only (no pyo3): the fuzz target `buffer_bytes` compiles it as it
//! is and drives it with any dtype, shape and strides.

use std::ffi::CStr;

use dlport_core::layout::compact_byte_count;
use dlport_core::{DataType, Error};

/// `Tensor.nbytes`: bytes of the elements in compact form (sub-byte elements packed), exactly.
pub fn nbytes(dtype: DataType, shape: &[i64]) -> Result<u128, Error> {
    compact_byte_count(dtype, shape)
}

/// What the buffer protocol's view says of a tensor, every number checked to fit `Py_ssize_t`.
#[derive(Debug)]
pub struct BufferGeometry {
    /// The struct-module format of the dtype.
    pub format: &'static CStr,
    /// Bytes of one element.
    pub itemsize: isize,
    /// Bytes of all the elements (the extents' product times `itemsize`): at most `isize::MAX`.
    pub len: isize,
    /// The extents, then the strides in bytes (`2 × ndim` values).
    pub dims: Vec<isize>,
}

/// The buffer protocol's numbers for a tensor of `dtype`, `shape` and `strides` (in elements,
/// as many as the extents). Refuses, with a message that names the values: a dtype without a
/// struct-module format, a byte count past `isize::MAX`, a stride whose bytes overflow `isize`.
pub fn buffer(dtype: DataType, shape: &[i64], strides: &[i64]) -> Result<BufferGeometry, String> {
    let format = format(dtype).ok_or_else(|| {
        format!(
            "dtype {dtype} has no buffer-protocol format, and NumPy has no {dtype} dtype \
             (numpy.from_dlpack(t) refuses it too): dlport.to_numpy(t) gives an ml_dtypes \
             array (pip install ml_dtypes), without a copy where the elements are whole bytes"
        )
    })?;
    if strides.len() != shape.len() {
        return Err(format!(
            "the tensor has {} strides for {} extents",
            strides.len(),
            shape.len()
        ));
    }
    // Every dtype with a format occupies whole bytes, so its compact bytes are
    // `numel × itemsize`, the buffer's `len`.
    let itemsize = dtype.size_bytes() as isize;
    let too_big = |bytes: &dyn std::fmt::Display| {
        format!(
            "the tensor's byte count, {bytes} (shape {shape:?} × itemsize {itemsize}), does not \
             fit a buffer, which holds at most {} bytes (NumPy refuses such an array too: \"array \
             is too big\"); a consumer of strided DLPack tensors views it (torch.from_dlpack(t))",
            isize::MAX
        )
    };
    let bytes = compact_byte_count(dtype, shape)
        .map_err(|e| format!("the tensor's shape {shape:?} has no byte count: {e}"))?;
    let len = isize::try_from(bytes).map_err(|_| too_big(&bytes))?;
    let mut dims: Vec<isize> = Vec::with_capacity(2 * shape.len());
    for &n in shape {
        dims.push(isize::try_from(n).map_err(|_| too_big(&bytes))?);
    }
    for (axis, &s) in strides.iter().enumerate() {
        let byte_stride = isize::try_from(s)
            .ok()
            .and_then(|s| s.checked_mul(itemsize))
            .ok_or_else(|| {
                format!(
                    "the tensor's stride {s} (elements) on axis {axis} overflows isize in bytes \
                     (itemsize {itemsize}): t.compact() gives a row-major copy"
                )
            })?;
        dims.push(byte_stride);
    }
    Ok(BufferGeometry {
        format,
        itemsize,
        len,
        dims,
    })
}

/// The struct-module format of a dtype, if it has one (sub-byte, 8-bit floats, bfloat16 and
/// vector types have none).
fn format(dtype: DataType) -> Option<&'static CStr> {
    Some(match dtype {
        DataType::BOOL => c"?",
        DataType::INT8 => c"b",
        DataType::INT16 => c"h",
        DataType::INT32 => c"i",
        DataType::INT64 => c"q",
        DataType::UINT8 => c"B",
        DataType::UINT16 => c"H",
        DataType::UINT32 => c"I",
        DataType::UINT64 => c"Q",
        DataType::FLOAT16 => c"e",
        DataType::FLOAT32 => c"f",
        DataType::FLOAT64 => c"d",
        DataType::COMPLEX64 => c"Zf",
        DataType::COMPLEX128 => c"Zd",
        _ => return None,
    })
}
