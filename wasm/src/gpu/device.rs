//! Opening the device: the first adapter wgpu finds, with its own limits.

use std::sync::{Arc, Mutex};

use dlport_core::Error;

use super::{GpuDevice, error};

/// Why no adapter came, and what to do: in the browser, what to enable; natively, what to
/// install.
#[cfg(target_arch = "wasm32")]
const NO_ADAPTER: &str = "no WebGPU adapter: this browser offers no WebGPU (it needs a secure context, https:// or http://localhost, and a browser with WebGPU on: Chrome or Edge 113+ on Windows, macOS and ChromeOS; on Linux and Android enable chrome://flags/#enable-unsafe-webgpu (and #enable-vulkan); Firefox: dom.webgpu.enabled in about:config; Safari 26+, or Develop > Feature Flags > WebGPU)";
#[cfg(not(target_arch = "wasm32"))]
const NO_ADAPTER: &str =
    "no WebGPU adapter: no GPU and no software driver (install mesa-vulkan-drivers for lavapipe)";

impl GpuDevice {
    /// Opens the first adapter wgpu finds (backends from `WGPU_BACKEND`, else all compiled in).
    pub async fn open(id: i32) -> Result<Arc<Self>, Error> {
        let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions::default())
            .await
            .map_err(|_| error::backend("requestAdapter", NO_ADAPTER))?;
        // The adapter's own limits, so large tensors fit (WebGPU's defaults stop at 128 MiB).
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("dlport"),
                required_features: wgpu::Features::empty(),
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|_| {
                error::backend(
                    "requestDevice",
                    "the adapter refused a device with its own limits",
                )
            })?;
        Ok(Arc::new(Self {
            info: adapter.get_info(),
            device,
            queue,
            id,
            table: Mutex::default(),
            pipelines: Mutex::default(),
        }))
    }

    /// The adapter's name and backend, e.g. "llvmpipe (LLVM 15.0.6, 256 bits) on Vulkan".
    pub fn describe(&self) -> String {
        format!("{} on {:?}", self.info.name, self.info.backend)
    }

    /// The wgpu device (for JS interop: `as_webgpu()` on wasm).
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The wgpu queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
}
