//! [`TensorBuilder`]: a [`Tensor`] over a buffer, the required fields positional, the rest
//! set by name, checked once by [`build`](TensorBuilder::build).

use crate::buffer::SharedBuffer;
use crate::dtype::DataType;
use crate::error::Error;
use crate::export;

use super::Tensor;

impl Tensor {
    /// A tensor over `buffer` with `dtype` and `shape`, built by
    /// [`build`](TensorBuilder::build), which checks it against the buffer's size
    /// (`byte_offset + span` must lie inside it). The strides (default compact row-major), the
    /// byte offset (default 0) and the flags (default none) are set by name on the way. The
    /// tensor's device is the buffer's; a backend with device ids of its own renumbers it with
    /// [`with_device`](Self::with_device).
    ///
    /// ```
    /// use dlport_core::backend::Buffer;
    /// use dlport_core::{DataType, Tensor};
    ///
    /// // A 2×3 float32 tensor over 24 bytes of a backend's memory, column-major.
    /// let buffer = Buffer::new(Box::new(vec![0u8; 24]));
    /// let t = Tensor::builder(buffer, "cpu", DataType::FLOAT32, &[2, 3])
    ///     .strides(&[1, 2])
    ///     .build()?;
    /// assert_eq!((t.shape(), t.strides()), (&[2, 3][..], &[1, 2][..]));
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn builder<'a>(
        buffer: SharedBuffer,
        backend: &'static str,
        dtype: DataType,
        shape: &'a [i64],
    ) -> TensorBuilder<'a> {
        TensorBuilder {
            buffer,
            backend,
            dtype,
            shape,
            strides: None,
            byte_offset: 0,
            flags: 0,
        }
    }
}

/// What [`Tensor::builder`] returns: a tensor over a buffer, its strides, byte offset and flags
/// set by name, checked by [`build`](Self::build).
#[must_use = "a builder makes nothing until `build` is called"]
pub struct TensorBuilder<'a> {
    buffer: SharedBuffer,
    backend: &'static str,
    dtype: DataType,
    shape: &'a [i64],
    strides: Option<&'a [i64]>,
    byte_offset: u64,
    flags: u64,
}

impl<'a> TensorBuilder<'a> {
    /// Sets the strides in elements (default: compact row-major).
    pub fn strides(mut self, strides: &'a [i64]) -> Self {
        self.strides = Some(strides);
        self
    }

    /// Sets the bytes from the buffer's start to the first element (default 0).
    pub fn byte_offset(mut self, byte_offset: u64) -> Self {
        self.byte_offset = byte_offset;
        self
    }

    /// Sets the flags (READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED; default none).
    pub fn flags(mut self, flags: u64) -> Self {
        self.flags = flags;
        self
    }

    /// The tensor, validated as a DLPack 1.3 tensor with these fields and checked against the
    /// buffer's size: `byte_offset + span` must lie inside it. The dimensions are checked in
    /// the list the tensor keeps, which moves into it.
    pub fn build(self) -> Result<Tensor, Error> {
        let Self {
            buffer,
            backend,
            dtype,
            shape,
            strides,
            byte_offset,
            flags,
        } = self;
        let (dims, layout) = export::checked_dims(
            dtype,
            shape,
            strides,
            byte_offset,
            flags,
            buffer.len() as u64,
        )?;
        let device = buffer.device();
        Ok(Tensor {
            buffer,
            backend,
            dtype,
            dims,
            byte_offset,
            flags,
            layout,
            device,
        })
    }
}

impl core::fmt::Debug for TensorBuilder<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TensorBuilder")
            .field("backend", &self.backend)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("byte_offset", &self.byte_offset)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use alloc::boxed::Box;
    use alloc::vec;
    use alloc::vec::Vec;

    use crate::abi::FLAG_READ_ONLY;
    use crate::buffer::Buffer;
    use crate::error::{Error, LayoutError};
    use crate::{DataType, Tensor};

    fn bytes(n: usize) -> crate::buffer::SharedBuffer {
        Buffer::new(Box::new(vec![0u8; n]))
    }

    #[test]
    fn the_optional_fields_default_and_are_set_by_name() {
        let t = Tensor::builder(bytes(6), "cpu", DataType::UINT8, &[2, 3])
            .build()
            .unwrap();
        assert_eq!(
            (t.strides(), t.byte_offset(), t.flags()),
            (&[3, 1][..], 0, 0)
        );
        let t = Tensor::builder(bytes(8), "cpu", DataType::UINT8, &[2, 3])
            .strides(&[1, 2])
            .byte_offset(2)
            .flags(FLAG_READ_ONLY)
            .build()
            .unwrap();
        assert_eq!((t.strides(), t.byte_offset()), (&[1, 2][..], 2));
        assert!(t.is_read_only());
        assert_eq!(t.view().unwrap().tensor_ref().layout(), t.layout());
    }

    #[test]
    fn build_checks_the_fields_against_the_buffer() {
        let e = Tensor::builder(bytes(6), "cpu", DataType::UINT8, &[2, 3])
            .byte_offset(1)
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            Error::Layout(LayoutError::StorageTooSmall {
                needed: 7,
                available: 6
            })
        );
        let e = Tensor::builder(bytes(6), "cpu", DataType::UINT8, &[2, 3])
            .strides(&[1])
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            Error::Layout(LayoutError::StridesLength {
                strides: 1,
                ndim: 2
            })
        );
    }

    #[test]
    fn many_axes_are_kept_and_shared_by_clones() {
        let shape: Vec<i64> = vec![1; crate::dims::Dims::INLINE + 2];
        let t = Tensor::builder(bytes(1), "cpu", DataType::UINT8, &shape)
            .build()
            .unwrap();
        let same = t.clone();
        assert_eq!((same.shape(), same.strides()), (t.shape(), t.strides()));
        assert_eq!(t.shape(), &shape[..]);
        assert_eq!(t.view().unwrap().tensor_ref().layout(), t.layout());
    }
}
