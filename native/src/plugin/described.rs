//! [`Described`]: the `DLTensor` dlport hands a plugin's callback, with the shape and strides
//! it points to, alive as long as the value; and [`byte_len_of`], the bytes a view reaches.

use std::ffi::c_void;

use dlport_core::abi::DLTensor;
use dlport_core::{DataType, Device, TensorRef};

/// A `DLTensor` describing a view, with the shape and strides it points to.
pub(super) struct Described {
    /// The tensor a callback is given; valid while this value lives.
    pub(super) tensor: DLTensor,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
}

impl Described {
    /// The tensor of `view`, on its device type with the plugin's `device_id`.
    pub(super) fn of(view: &TensorRef<'_>, device_id: i32) -> Self {
        let mut shape = view.shape().to_vec();
        let mut strides: Vec<i64> = view.strides().collect();
        let tensor = DLTensor {
            data: view.data(),
            device: Device::new(view.device().device_type, device_id),
            ndim: shape.len() as i32,
            dtype: view.dtype(),
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: view.byte_offset(),
        };
        Self {
            tensor,
            _shape: shape,
            _strides: strides,
        }
    }

    /// A compact tensor over `data` (a device handle) on `device`.
    pub(super) fn compact(
        data: *mut c_void,
        device: Device,
        dtype: DataType,
        shape: &[i64],
    ) -> Self {
        let mut shape = shape.to_vec();
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].wrapping_mul(shape[i + 1].max(1));
        }
        let tensor = DLTensor {
            data,
            device,
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        };
        Self {
            tensor,
            _shape: shape,
            _strides: strides,
        }
    }
}

/// The bytes from `data` that a view reaches: its byte offset and its span.
pub(super) fn byte_len_of(view: &TensorRef<'_>) -> usize {
    let end = i128::from(view.byte_offset()) + i128::from(view.byte_span().hi);
    usize::try_from(end.max(0)).unwrap_or(usize::MAX)
}
