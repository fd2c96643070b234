//! The buffer table: a WebGPU tensor's `data` is a handle `h` (≥ 1) naming slot `h − 1`. A slot
//! holds wgpu's buffer (made here or adopted) or, in the browser, a foreign JS `GPUBuffer`,
//! plus the owner's release callback. [`SlotStorage`] is the `TensorStorage` of a core
//! `Buffer` over one slot, so the core's counted references decide when the slot goes.

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::TensorStorage;
use dlport_core::{Device, Error, TensorRef};

use super::{BUFFER_PADDING, GpuDevice, OnRelease, Slot, Source, Table, error, round_up};

impl Table {
    /// The live slot behind `handle`, if any.
    fn get(&self, handle: usize) -> Option<&Slot> {
        self.slots.get(handle.checked_sub(1)?)?.as_ref()
    }
}

impl GpuDevice {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Slots in use: buffers alive in the table.
    pub fn live_buffers(&self) -> usize {
        self.table().live
    }

    fn insert(&self, slot: Slot) -> u32 {
        let mut t = self.table();
        t.live += 1;
        match t.free.pop() {
            Some(i) => {
                t.slots[i as usize] = Some(slot);
                i + 1
            }
            None => {
                t.slots.push(Some(slot));
                t.slots.len() as u32
            }
        }
    }

    // On single-threaded wasm a buffer is !Send; the Arc only shares it within that thread.
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    fn owned_slot(buffer: wgpu::Buffer, on_release: Option<OnRelease>) -> Slot {
        Slot {
            size: buffer.size(),
            buffer: Some(Arc::new(buffer)),
            #[cfg(target_arch = "wasm32")]
            js: None,
            on_release,
        }
    }

    fn release(&self, handle: u32) {
        let slot = {
            let mut t = self.table();
            let Some(slot) = t
                .slots
                .get_mut((handle as usize).wrapping_sub(1))
                .and_then(Option::take)
            else {
                return;
            };
            t.live -= 1;
            t.free.push(handle - 1);
            slot
        };
        // Outside the lock: a release callback may drop other dlport tensors.
        match slot.on_release {
            Some(callback) => callback(),
            None => {
                if let Some(buffer) = slot.buffer {
                    buffer.destroy();
                }
            }
        }
    }

    /// The wgpu buffer behind a handle, if it is live and wgpu made it (not a foreign JS buffer).
    pub fn lookup(&self, handle: usize) -> Option<Arc<wgpu::Buffer>> {
        self.table().get(handle)?.buffer.clone()
    }

    /// The size in bytes of the buffer behind a live handle.
    pub fn buffer_size(&self, handle: usize) -> Option<u64> {
        Some(self.table().get(handle)?.size)
    }

    /// The JS `GPUBuffer` behind a live handle: a foreign buffer itself, or wgpu's own.
    #[cfg(target_arch = "wasm32")]
    pub fn js_buffer(&self, handle: usize) -> Option<wgpu::webgpu::GpuBuffer> {
        let t = self.table();
        let slot = t.get(handle)?;
        match (&slot.js, &slot.buffer) {
            (Some(js), _) => Some(js.clone()),
            (None, Some(b)) => b.as_webgpu().cloned(),
            (None, None) => None,
        }
    }

    /// Adopts a buffer made on this device by someone else, without a copy: the returned
    /// storage (wrap it with [`Tensor::builder`](dlport_core::Tensor::builder)) keeps it in the
    /// table until dlport's last reference goes, and then `on_release` runs, exactly once.
    /// dlport never destroys an adopted buffer; with no callback it is simply dropped. The
    /// buffer needs `STORAGE | COPY_SRC` usage (kernels read it, downloads copy from it).
    pub fn adopt(
        self: &Arc<Self>,
        buffer: wgpu::Buffer,
        on_release: Option<OnRelease>,
    ) -> Result<SlotStorage, Error> {
        let need = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
        if !buffer.usage().contains(need) {
            if let Some(callback) = on_release {
                callback();
            }
            return Err(error::backend(
                "adopt",
                "the buffer lacks STORAGE | COPY_SRC usage, which dlport needs to read it; create it with both",
            ));
        }
        let len = usize::try_from(buffer.size()).unwrap_or(usize::MAX);
        let handle = self.insert(Self::owned_slot(buffer, on_release));
        Ok(SlotStorage {
            gpu: Arc::clone(self),
            handle,
            len,
        })
    }

    /// Adopts a foreign JS `GPUBuffer` of `size` bytes (wasm), as [`adopt`](Self::adopt) does:
    /// `on_release` runs exactly once when dlport's last reference goes. The caller has checked
    /// the buffer's usage and that it belongs to this device.
    #[cfg(target_arch = "wasm32")]
    pub fn adopt_webgpu(
        self: &Arc<Self>,
        buffer: wgpu::webgpu::GpuBuffer,
        size: u64,
        on_release: Option<OnRelease>,
    ) -> SlotStorage {
        let handle = self.insert(Slot {
            buffer: None,
            js: Some(buffer),
            size,
            on_release,
        });
        SlotStorage {
            gpu: Arc::clone(self),
            handle,
            len: usize::try_from(size).unwrap_or(usize::MAX),
        }
    }

    /// A new zeroed storage buffer of at least `bytes`, padded to 16; returns its slot storage.
    pub fn alloc(self: &Arc<Self>, bytes: u64) -> Result<SlotStorage, Error> {
        let size = round_up(bytes.max(1), BUFFER_PADDING);
        if size > self.device.limits().max_buffer_size {
            return Err(error::allocation_failed(bytes));
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dlport tensor"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let handle = self.insert(Self::owned_slot(buffer, None));
        Ok(SlotStorage {
            gpu: Arc::clone(self),
            handle,
            len: bytes as usize,
        })
    }

    /// The buffer a WebGPU tensor's handle names: wgpu's own, or (wasm) a foreign JS buffer.
    pub(super) fn source_of(&self, view: &TensorRef<'_>) -> Result<(Source, u64), Error> {
        if view.device().device_type != DeviceType::WEBGPU {
            return Err(error::unsupported("GPU operations on a non-WebGPU tensor"));
        }
        let dead = || {
            error::backend(
                "lookup",
                "the handle is not a live buffer of this WebGPU device",
            )
        };
        let t = self.table();
        let slot = t.get(view.data() as usize).ok_or_else(dead)?;
        #[cfg(target_arch = "wasm32")]
        if let Some(js) = &slot.js {
            return Ok((Source::Js(js.clone()), slot.size));
        }
        let buffer = slot.buffer.clone().ok_or_else(dead)?;
        Ok((Source::Wgpu(buffer), slot.size))
    }
}

/// The storage of a WebGPU tensor: a slot of the buffer table, released (and the buffer
/// destroyed) when dropped — by the last tensor handle or the last DLPack reference.
pub struct SlotStorage {
    gpu: Arc<GpuDevice>,
    handle: u32,
    len: usize,
}

impl SlotStorage {
    /// wgpu's buffer behind a slot this module just made (never a foreign one).
    pub(super) fn wgpu_buffer(&self) -> Arc<wgpu::Buffer> {
        self.gpu
            .lookup(self.handle as usize)
            .expect("a slot made by alloc holds wgpu's buffer until its storage drops")
    }
}

impl Drop for SlotStorage {
    fn drop(&mut self) {
        self.gpu.release(self.handle);
    }
}

// SAFETY: `data_ptr` is an opaque handle (never dereferenced on the host, provenance-free);
// `len` bytes of the slot's buffer belong to this storage alone until it drops.
unsafe impl TensorStorage for SlotStorage {
    fn data_ptr(&mut self) -> *mut c_void {
        std::ptr::without_provenance_mut(self.handle as usize)
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        Device::webgpu(self.gpu.id)
    }
}
