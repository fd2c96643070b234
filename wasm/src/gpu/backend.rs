//! The core `Backend` for `kDLWebGPU`: allocation, copies to and from the device (through the
//! `transfer` and `compact` modules). Imports of DLPack tensors that live on the device go
//! through the core's `view_external` (the trait's default), like every backend's.

use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Backend, Buffer, compact_bytes};
use dlport_core::{DataType, Device, Error, Tensor, TensorRef};

use super::{GpuDevice, NAME, error};

/// The WebGPU backend (`"webgpu"`, `kDLWebGPU`): one device per id (id 0 today).
#[derive(Debug, Clone)]
pub struct WebGpuBackend {
    gpu: Arc<GpuDevice>,
}

impl WebGpuBackend {
    /// Opens device 0. Fails with a clear error where there is no adapter at all.
    pub async fn new() -> Result<Self, Error> {
        Ok(Self {
            gpu: GpuDevice::open(0).await?,
        })
    }

    /// [`new`](Self::new), blocking (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking() -> Result<Self, Error> {
        pollster::block_on(Self::new())
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<GpuDevice> {
        &self.gpu
    }

    /// Downloads a WebGPU tensor into a compact host tensor (kDLCPU), blocking (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn download_blocking(&self, t: &TensorRef<'_>) -> Result<Vec<u8>, Error> {
        pollster::block_on(self.gpu.download(t))
    }
}

impl Backend for WebGpuBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::WEBGPU]
    }

    fn can_access(&self, memory: Device) -> bool {
        memory == Device::webgpu(self.gpu.id)
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        if !self.can_access(device) {
            return Err(error::invalid_device_id(device.device_id));
        }
        let bytes = compact_bytes(dtype, shape)? as u64;
        let storage = self.gpu.alloc(bytes)?;
        Tensor::builder(Buffer::new(Box::new(storage)), NAME, dtype, shape).build()
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        let from_gpu = src.device() == Device::webgpu(self.gpu.id);
        if target == Device::webgpu(self.gpu.id) {
            if src.device().is_host_accessible() {
                return self.gpu.upload(src, 0).map(|t| Some(t.with_copied(true)));
            }
            if from_gpu {
                return self.gpu.compact_on_gpu(src).map(Some);
            }
            return Ok(None);
        }
        if from_gpu && target.device_type == DeviceType::CPU {
            #[cfg(not(target_arch = "wasm32"))]
            {
                let bytes = self.download_blocking(src)?;
                let exported = dlport_core::ExportBuilder::new(bytes, src.dtype(), src.shape())
                    .copied(true)
                    .build()?;
                let cpu = dlport_core::backend::CpuBackend;
                return cpu
                    .view_external(exported, Device::cpu())
                    .map(|t| Some(t.with_copied(true)));
            }
            #[cfg(target_arch = "wasm32")]
            return Err(error::unsupported(
                "synchronous readback in the browser (await download)",
            ));
        }
        Ok(None)
    }
}
