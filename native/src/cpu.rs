//! The native CPU backend: 64-byte-aligned host allocations and the fast strided copies of
//! [`crate::copy`]. It reads every host-accessible memory class without a copy; managed memory
//! is synchronised first when a CUDA driver is present.

use dlport_core::Tensor;
use dlport_core::backend::{AlignedBuffer, Backend, Buffer, CPU_ALIGN, compact_bytes};
use dlport_core::{DataType, Device, DeviceType, Error, ManagedTensor, MemoryClass, TensorRef};

use crate::copy::copy_to_compact;

/// The native CPU backend (`"cpu"`).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// The backend's name.
    pub const NAME: &'static str = "cpu";

    /// Allocates a zeroed, compact, 64-byte-aligned host tensor.
    pub fn zeros(dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        Self::zeros_aligned(dtype, shape, CPU_ALIGN)
    }

    /// Allocates a zeroed, compact host tensor with a chosen alignment (at least 64).
    pub fn zeros_aligned(dtype: DataType, shape: &[i64], align: usize) -> Result<Tensor, Error> {
        let bytes = compact_bytes(dtype, shape)?;
        let buf = AlignedBuffer::zeroed(bytes, align.max(CPU_ALIGN))?;
        Tensor::new(
            Buffer::new(Box::new(buf)),
            Self::NAME,
            dtype,
            shape,
            None,
            0,
            0,
        )
    }

    /// Copies any host-accessible tensor into a new compact, 64-byte-aligned one (sub-byte
    /// elements packed, whether the source was packed or padded).
    pub fn compact(src: &TensorRef<'_>) -> Result<Tensor, Error> {
        let t = Self::zeros(src.dtype(), src.shape())?;
        let len = compact_bytes(src.dtype(), src.shape())?;
        if len != 0 {
            // SAFETY: `t` is a fresh allocation of exactly `len` bytes that nothing else can
            // reach yet; its pointer carries the allocation's provenance.
            let dst = unsafe { std::slice::from_raw_parts_mut(t.buffer().ptr().cast::<u8>(), len) };
            copy_to_compact(src, dst)?;
        }
        Ok(t.with_copied(true))
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

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        if memory.memory_class() == MemoryClass::Managed {
            // Unified memory is host-readable once the device is done with it.
            crate::sync_managed()?;
        }
        dlport_core::backend::CpuBackend.view_external(tensor, memory)
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        if device.device_type != DeviceType::CPU {
            return Err(Error::Unsupported {
                backend: Self::NAME,
                operation: "allocation on a device other than cpu",
            });
        }
        Self::zeros(dtype, shape)
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        if target.device_type != DeviceType::CPU || !src.device().is_host_accessible() {
            return Ok(None);
        }
        Self::compact(src).map(Some)
    }
}
