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
pub use table::SlotStorage;

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
    table: Mutex<Table>,
    pipelines: Mutex<Pipelines>,
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

// The device's parts are defined here, with the device, and worked on by the rooms below
// (`table.rs`, `kernel.rs`: private items of this module are theirs too), so that the device
// names none of the rooms that name it.

/// The pipelines made so far, by kernel label.
type Pipelines = std::collections::HashMap<&'static str, wgpu::ComputePipeline>;

/// What an adopted buffer's owner wants done when dlport's last reference to it goes: its
/// release callback (ORT's `dispose()`, TF.js's `tensorRef.dispose()`, a Rust closure). It runs
/// exactly once, outside the table's lock, and dlport never destroys an adopted buffer itself.
#[cfg(not(target_arch = "wasm32"))]
pub type OnRelease = Box<dyn FnOnce() + Send>;
/// What an adopted buffer's owner wants done when dlport's last reference to it goes (wasm: a JS
/// callback, which is not `Send`).
#[cfg(target_arch = "wasm32")]
pub type OnRelease = Box<dyn FnOnce()>;

/// One buffer of the table.
struct Slot {
    /// wgpu's handle; `None` for a foreign JS `GPUBuffer`, which wgpu cannot wrap.
    buffer: Option<Arc<wgpu::Buffer>>,
    /// The JS buffer of a foreign slot.
    #[cfg(target_arch = "wasm32")]
    js: Option<wgpu::webgpu::GpuBuffer>,
    /// The buffer's size in bytes.
    size: u64,
    /// Set for adopted buffers: called instead of `destroy()`.
    on_release: Option<OnRelease>,
}

/// The slots, the free list and the count of live slots.
#[derive(Default)]
struct Table {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    live: usize,
}

/// Where a kernel or copy reads from.
enum Source {
    /// A buffer wgpu made or adopted.
    Wgpu(Arc<wgpu::Buffer>),
    /// A foreign JS `GPUBuffer` (wasm).
    #[cfg(target_arch = "wasm32")]
    Js(wgpu::webgpu::GpuBuffer),
}
