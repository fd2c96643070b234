//! The CPU backend: aligned host allocations, zero-copy views of every host-accessible memory
//! class, and strided → compact copies through the copy room (the SIMD kernels of every
//! target).

use alloc::boxed::Box;

use super::api::Backend;
use crate::abi::{DeviceType, FLAG_IS_COPIED};
use crate::buffer::Buffer;
use crate::copy::{AlignedBuffer, CPU_ALIGN, allocation_bytes, compact_copy};
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{BackendError, Error};
use crate::tensor::Tensor;
use crate::view::TensorRef;

/// The CPU backend: serves `kDLCPU` and reads every host-accessible memory class (pinned,
/// managed) without a copy, so a `kDLCUDAHost` tensor imported here is a view of the same
/// address.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// The backend's name.
    pub const NAME: &'static str = "cpu";
}

impl CpuBackend {
    /// Allocates a zeroed, compact, 64-byte-aligned host tensor, after checking its size against
    /// the process's allocation limit ([`allocation_bytes`]).
    pub fn zeros(dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        Self::zeros_aligned(dtype, shape, CPU_ALIGN)
    }

    /// Allocates a zeroed, compact host tensor with a chosen power-of-two alignment (at least
    /// [`CPU_ALIGN`]), after checking its size, alignment counted, against the process's
    /// allocation limit ([`allocation_bytes`]).
    pub fn zeros_aligned(dtype: DataType, shape: &[i64], align: usize) -> Result<Tensor, Error> {
        let align = align.max(CPU_ALIGN);
        let bytes = allocation_bytes(dtype, shape, align)?;
        let buf = AlignedBuffer::zeroed(bytes, align)?;
        Tensor::builder(Buffer::new(Box::new(buf)), Self::NAME, dtype, shape).build()
    }

    /// Copies any host-accessible tensor into a new compact, 64-byte-aligned one marked
    /// IS_COPIED (sub-byte elements packed, whether the source was packed or padded): what
    /// [`Backend::copy`] gives for a `cpu` target.
    ///
    /// Not checked against an allocation limit (the registry checks the limit in force before
    /// it asks a backend for a copy).
    pub(crate) fn compact(src: &TensorRef<'_>) -> Result<Tensor, Error> {
        let buf = compact_copy(src, Some(u64::MAX))?;
        Tensor::builder(
            Buffer::new(Box::new(buf)),
            Self::NAME,
            src.dtype(),
            src.shape(),
        )
        .flags(FLAG_IS_COPIED)
        .build()
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::CPU]
    }

    fn can_access(&self, memory: Device) -> bool {
        memory.is_host_accessible()
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        if device.device_type != DeviceType::CPU {
            return Err(Error::Backend(BackendError::unsupported(
                Self::NAME,
                "allocation on a device other than cpu",
            )));
        }
        Self::zeros(dtype, shape)
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        if target.device_type != DeviceType::CPU {
            return Ok(None);
        }
        if !src.device().is_host_accessible() {
            // The source's backend has to bring it to the host.
            return Ok(None);
        }
        // The registry checked the size against the caller's limit before asking for the copy.
        Self::compact(src).map(Some)
    }
}
