//! WebGPU as a DLPack extension device (`kDLWebGPU` = 15), on wgpu: natively on Vulkan or GL
//! (Mesa's lavapipe in CI), in the browser on the WebGPU API.
//!
//! A WebGPU tensor's `data` is an opaque handle — an index into this backend's buffer table,
//! never a pointer — and `byte_offset` is kept apart and honoured by every operation. Buffers
//! are created `STORAGE | COPY_SRC | COPY_DST` and padded to 16 bytes (onnxruntime-web reads in
//! 16-byte steps). WebGPU copies move whole 4-byte words: a tensor whose byte range is not
//! 4-aligned is copied with the range widened to 4-byte boundaries inside the padded buffer, and
//! the extra bytes are never exposed (a *padded copy*, not an error).
//!
//! The modules, by responsibility:
//! - `device`: opening the adapter and device ([`GpuDevice::open`]);
//! - `table`: the buffer table, adoption of foreign buffers, [`SlotStorage`];
//! - `transfer`: host ↔ device copies ([`GpuDevice::upload`], [`GpuDevice::download`]);
//! - `kernel`: the compute kernels (WGSL in `*.wgsl` files) and their dispatch;
//! - `compact`: strided → compact on the GPU ([`GpuDevice::compact_on_gpu`]);
//! - `normalize`: the normalization kernel ([`GpuDevice::normalize`]);
//! - `error`: [`KernelError`] and the constructors of core errors;
//! - `backend`: [`WebGpuBackend`], the core `Backend`.

use std::sync::{Arc, Mutex};

mod backend;
mod compact;
mod device;
pub(crate) mod error;
pub(crate) mod kernel;
mod normalize;
mod table;
mod transfer;

pub use backend::WebGpuBackend;
pub use error::KernelError;
pub use normalize::Normalize;
pub use table::{OnRelease, SlotStorage};

/// The backend's name.
pub const NAME: &str = "webgpu";

/// Bytes every WebGPU buffer is padded to.
pub const BUFFER_PADDING: u64 = 16;

/// Channels [`GpuDevice::normalize`] takes per-channel values for.
pub const MAX_CHANNELS: usize = 64;

/// Axes the GPU compaction shader handles.
pub const MAX_GPU_NDIM: usize = 8;

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// One WebGPU device with its queue and buffer table.
pub struct GpuDevice {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    id: i32,
    table: Mutex<table::Table>,
    pipelines: Mutex<kernel::Pipelines>,
}

// On wasm32 without the `atomics` target feature there is exactly one thread, so wgpu's
// JS-backed objects (which are !Send there) can never be observed from another thread; the core
// traits' Send/Sync bounds are then vacuous.
// SAFETY: see above; the cfg makes this hold only on single-threaded wasm.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Send for GpuDevice {}
// SAFETY: as above.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Sync for GpuDevice {}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDevice")
            .field("adapter", &self.info.name)
            .field("id", &self.id)
            .finish()
    }
}

/// Where a kernel or copy reads from.
enum Source {
    /// A buffer wgpu made or adopted.
    Wgpu(Arc<wgpu::Buffer>),
    /// A foreign JS `GPUBuffer` (wasm).
    #[cfg(target_arch = "wasm32")]
    Js(wgpu::webgpu::GpuBuffer),
}
