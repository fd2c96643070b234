//! WebGPU as a DLPack extension device (`kDLWebGPU` = 15), on wgpu: natively on Vulkan or GL
//! (Mesa's lavapipe in CI), in the browser on the WebGPU API.
//!
//! A WebGPU tensor's `data` is an opaque handle — an index into this backend's buffer table,
//! never a pointer — and `byte_offset` is kept apart and honoured by every operation. Buffers
//! are created `STORAGE | COPY_SRC | COPY_DST` and padded to 16 bytes (onnxruntime-web reads in
//! 16-byte steps). WebGPU copies move whole 4-byte words: a tensor whose byte range is not
//! 4-aligned is copied with the range widened to 4-byte boundaries inside the padded buffer, and
//! the extra bytes are never exposed (a *padded copy*, not an error).

use std::borrow::Cow;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use dlport_core::Tensor;
use dlport_core::backend::{Backend, Buffer, compact_bytes, copy_to_compact};
use dlport_core::{DataType, Device, DeviceType, Error, ManagedTensor, TensorRef, TensorStorage};

/// The backend's name.
pub const NAME: &str = "webgpu";

/// Bytes every WebGPU buffer is padded to.
pub const BUFFER_PADDING: u64 = 16;

/// Axes the GPU compaction shader handles.
pub const MAX_GPU_NDIM: usize = 8;

fn backend_error(operation: &'static str, detail: &'static str) -> Error {
    Error::Backend {
        backend: NAME,
        operation,
        code: 0,
        detail,
    }
}

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
    pipelines: Mutex<std::collections::HashMap<&'static str, wgpu::ComputePipeline>>,
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

/// The buffer table: handle `h` (≥ 1) is slot `h − 1`.
/// Why no adapter came, and what to do: in the browser, what to enable; natively, what to
/// install.
#[cfg(target_arch = "wasm32")]
const NO_ADAPTER: &str = "no WebGPU adapter: this browser offers no WebGPU (it needs a secure context, https:// or http://localhost, and a browser with WebGPU on: Chrome or Edge 113+ on Windows, macOS and ChromeOS; on Linux and Android enable chrome://flags/#enable-unsafe-webgpu (and #enable-vulkan); Firefox: dom.webgpu.enabled in about:config; Safari 26+, or Develop > Feature Flags > WebGPU)";
#[cfg(not(target_arch = "wasm32"))]
const NO_ADAPTER: &str =
    "no WebGPU adapter: no GPU and no software driver (install mesa-vulkan-drivers for lavapipe)";

#[derive(Default)]
struct Table {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    live: usize,
}

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
            .map_err(|_| backend_error("requestAdapter", NO_ADAPTER))?;
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
                backend_error(
                    "requestDevice",
                    "the adapter refused a device with its own limits",
                )
            })?;
        Ok(Arc::new(Self {
            info: adapter.get_info(),
            device,
            queue,
            id,
            table: Mutex::new(Table::default()),
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

    /// Slots in use: buffers alive in the table.
    pub fn live_buffers(&self) -> usize {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).live
    }

    fn insert(&self, slot: Slot) -> u32 {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
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
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
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
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.slots
            .get(handle.checked_sub(1)?)?
            .as_ref()?
            .buffer
            .clone()
    }

    /// The size in bytes of the buffer behind a live handle.
    pub fn buffer_size(&self, handle: usize) -> Option<u64> {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        Some(t.slots.get(handle.checked_sub(1)?)?.as_ref()?.size)
    }

    /// The JS `GPUBuffer` behind a live handle: a foreign buffer itself, or wgpu's own.
    #[cfg(target_arch = "wasm32")]
    pub fn js_buffer(&self, handle: usize) -> Option<wgpu::webgpu::GpuBuffer> {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let slot = t.slots.get(handle.checked_sub(1)?)?.as_ref()?;
        match (&slot.js, &slot.buffer) {
            (Some(js), _) => Some(js.clone()),
            (None, Some(b)) => b.as_webgpu().cloned(),
            (None, None) => None,
        }
    }

    /// Adopts a buffer made on this device by someone else, without a copy: the returned
    /// storage (wrap it with [`Tensor::new`]) keeps it in the table until dlport's last
    /// reference goes, and then `on_release` runs, exactly once. dlport never destroys an
    /// adopted buffer; with no callback it is simply dropped. The buffer needs
    /// `STORAGE | COPY_SRC` usage (kernels read it, downloads copy from it).
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
            return Err(backend_error(
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
            return Err(Error::AllocationFailed {
                bytes,
                align: BUFFER_PADDING as usize,
            });
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
    fn source_of(&self, view: &TensorRef<'_>) -> Result<(Source, u64), Error> {
        if view.device().device_type != DeviceType::WEBGPU {
            return Err(Error::Unsupported {
                backend: NAME,
                operation: "GPU operations on a non-WebGPU tensor",
            });
        }
        let dead = || {
            backend_error(
                "lookup",
                "the handle is not a live buffer of this WebGPU device",
            )
        };
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let slot = (view.data() as usize)
            .checked_sub(1)
            .and_then(|i| t.slots.get(i))
            .and_then(Option::as_ref)
            .ok_or_else(dead)?;
        #[cfg(target_arch = "wasm32")]
        if let Some(js) = &slot.js {
            return Ok((Source::Js(js.clone()), slot.size));
        }
        let buffer = slot.buffer.clone().ok_or_else(dead)?;
        Ok((Source::Wgpu(buffer), slot.size))
    }

    /// Copies `size` bytes (a multiple of 4) from `src` at `from` to `dst` at `to`, on the GPU.
    fn copy_range(
        &self,
        src: &Source,
        from: u64,
        dst: &wgpu::Buffer,
        to: u64,
        size: u64,
    ) -> Result<(), Error> {
        match src {
            Source::Wgpu(buffer) => {
                let mut enc = self.device.create_command_encoder(&Default::default());
                enc.copy_buffer_to_buffer(buffer, from, dst, to, size);
                self.queue.submit([enc.finish()]);
                Ok(())
            }
            #[cfg(target_arch = "wasm32")]
            Source::Js(buffer) => crate::raw::copy(&self.device, buffer, from, dst, to, size),
        }
    }

    /// Runs a one-source, one-destination compute kernel over `invocations` threads
    /// (workgroups of 64), with `params` in a uniform buffer written at creation (no
    /// `writeBuffer`). The source is bound as its first `src_size` bytes, rounded down to words.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &self,
        kernel: &Kernel,
        src: &Source,
        src_size: u64,
        dst: &wgpu::Buffer,
        params: &[u8],
        invocations: u64,
    ) -> Result<(), Error> {
        let groups = invocations.div_ceil(64);
        let (x, y) = (groups.min(65535) as u32, groups.div_ceil(65535));
        let bind_size = src_size / 4 * 4;
        if y > 65535 || bind_size == 0 {
            return Err(backend_error(
                "dispatch",
                "the tensor is empty or larger than one dispatch covers (2^38 elements)",
            ));
        }
        let y = y as u32;
        match src {
            Source::Wgpu(from) => {
                let pipeline = self.pipeline(kernel);
                let uniform = self
                    .device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some(kernel.label),
                        contents: params,
                        usage: wgpu::BufferUsages::UNIFORM,
                    });
                let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(kernel.label),
                    layout: &pipeline.get_bind_group_layout(0),
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: from,
                                offset: 0,
                                size: std::num::NonZeroU64::new(bind_size),
                            }),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: dst.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: uniform.as_entire_binding(),
                        },
                    ],
                });
                let mut enc = self.device.create_command_encoder(&Default::default());
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    pass.set_pipeline(&pipeline);
                    pass.set_bind_group(0, &bind, &[]);
                    pass.dispatch_workgroups(x, y, 1);
                }
                self.queue.submit([enc.finish()]);
                Ok(())
            }
            #[cfg(target_arch = "wasm32")]
            Source::Js(from) => {
                crate::raw::dispatch(&self.device, kernel, from, bind_size, dst, params, x, y)
            }
        }
    }

    fn pipeline(&self, kernel: &Kernel) -> wgpu::ComputePipeline {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(kernel.label)
            .or_insert_with(|| {
                let module = self
                    .device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(kernel.label),
                        source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(kernel.wgsl)),
                    });
                self.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(kernel.label),
                        layout: None,
                        module: &module,
                        entry_point: Some("main"),
                        compilation_options: Default::default(),
                        cache: None,
                    })
            })
            .clone()
    }

    /// Host tensor (any host-accessible memory, any layout) → a compact WebGPU tensor whose
    /// first element sits at `byte_offset` in its buffer.
    pub fn upload(
        self: &Arc<Self>,
        src: &TensorRef<'_>,
        byte_offset: u64,
    ) -> Result<Tensor, Error> {
        if !src.device().is_host_accessible() {
            return Err(Error::NotHostAccessible {
                device: src.device(),
            });
        }
        let len = compact_bytes(src.dtype(), src.shape())?;
        // A compact source at a word-aligned place goes straight to the queue, with no staging.
        if src.contiguity().is_row_major()
            && byte_offset.is_multiple_of(4)
            && (len as u64).is_multiple_of(4)
            && len > 0
        {
            let storage = self.alloc(byte_offset + len as u64)?;
            let buffer = self.lookup(storage.handle as usize).expect("just inserted");
            self.queue
                .write_buffer(&buffer, byte_offset, src.as_bytes()?);
            self.queue.submit(std::iter::empty());
            return Tensor::new(
                Buffer::new(Box::new(storage)),
                NAME,
                src.dtype(),
                src.shape(),
                None,
                byte_offset,
                0,
            );
        }
        // Stage [round_down4(offset), round_up4(offset + len)) so that the write is whole words.
        let start = byte_offset / 4 * 4;
        let end = round_up(byte_offset + len as u64, 4);
        let mut staged = vec![0u8; (end - start) as usize];
        let lead = (byte_offset - start) as usize;
        copy_to_compact(src, &mut staged[lead..lead + len])?;
        let storage = self.alloc(end)?;
        let buffer = self.lookup(storage.handle as usize).expect("just inserted");
        if !staged.is_empty() {
            self.queue.write_buffer(&buffer, start, &staged);
        }
        self.queue.submit(std::iter::empty());
        Tensor::new(
            Buffer::new(Box::new(storage)),
            NAME,
            src.dtype(),
            src.shape(),
            None,
            byte_offset,
            0,
        )
    }

    /// WebGPU tensor → its elements as compact bytes, in row-major order (a strided tensor is
    /// compacted on the GPU first). Natively this blocks on the device; on wasm it awaits the
    /// buffer mapping.
    pub async fn download(self: &Arc<Self>, t: &TensorRef<'_>) -> Result<Vec<u8>, Error> {
        let len = compact_bytes(t.dtype(), t.shape())?;
        if len == 0 {
            return Ok(Vec::new());
        }
        // A strided tensor is compacted on the GPU first; `_compacted` keeps that buffer in the
        // table until the readback is done.
        let (source, offset, _compacted) = if t.contiguity().is_row_major() {
            (self.source_of(t)?.0, t.byte_offset(), None)
        } else {
            let c = self.compact_on_gpu(t)?;
            let (source, offset) = {
                let view = c.view()?;
                (self.source_of(&view)?.0, view.byte_offset())
            };
            (source, offset, Some(c))
        };
        let start = offset / 4 * 4;
        let end = round_up(offset + len as u64, 4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dlport readback"),
            size: end - start,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.copy_range(&source, start, &staging, 0, end - start)?;
        let (tx, rx) = futures_channel::oneshot::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|_| {
                backend_error("poll", "the device was lost while waiting for a readback")
            })?;
        rx.await
            .map_err(|_| backend_error("mapAsync", "the readback was cancelled"))?
            .map_err(|_| backend_error("mapAsync", "mapping the readback buffer failed"))?;
        let lead = (offset - start) as usize;
        let out = {
            let view = staging.slice(..).get_mapped_range().map_err(|_| {
                backend_error("getMappedRange", "the readback buffer is not mapped")
            })?;
            view[lead..lead + len].to_vec()
        };
        staging.unmap();
        Ok(out)
    }

    /// WebGPU → WebGPU: a compact copy of any layout and offset, done by a compute shader that
    /// gathers bytes (whole-word `copyBufferToBuffer` when the source is already compact and
    /// 4-aligned). The CPU never touches the data.
    pub fn compact_on_gpu(self: &Arc<Self>, src: &TensorRef<'_>) -> Result<Tensor, Error> {
        let len = compact_bytes(src.dtype(), src.shape())? as u64;
        let (from, from_size) = self.source_of(src)?;
        let storage = self.alloc(len)?;
        let to = self.lookup(storage.handle as usize).expect("just inserted");
        let out = Tensor::new(
            Buffer::new(Box::new(storage)),
            NAME,
            src.dtype(),
            src.shape(),
            None,
            0,
            0,
        )?;
        if len == 0 {
            return Ok(out.with_copied(true));
        }
        if src.contiguity().is_row_major()
            && src.byte_offset().is_multiple_of(4)
            && len.is_multiple_of(4)
        {
            self.copy_range(&from, src.byte_offset(), &to, 0, len)?;
        } else {
            let params = compaction_params(src, from_size, len)?;
            self.dispatch(
                &COMPACT,
                &from,
                from_size,
                &to,
                bytemuck::cast_slice(&params),
                len.div_ceil(4),
            )?;
        }
        Ok(out.with_copied(true))
    }

    /// The normalization kernel: `out = (x · scale − mean[c]) / std[c]`, `c` the index along
    /// the last axis, into a new compact float32 WebGPU tensor of the same shape. Reads
    /// float32, int32, uint32 and uint8 tensors (a strided one is compacted on the GPU first);
    /// `mean` and `std` hold one value, or one per channel (at most [`MAX_CHANNELS`]).
    pub fn normalize(
        self: &Arc<Self>,
        src: &TensorRef<'_>,
        options: &Normalize<'_>,
    ) -> Result<Tensor, KernelError> {
        let kind = match src.dtype() {
            DataType::FLOAT32 => 0u32,
            DataType::INT32 => 1,
            DataType::UINT32 => 2,
            DataType::UINT8 => 3,
            dtype => return Err(KernelError::InputDtype { dtype }),
        };
        let channels = src.shape().last().copied().unwrap_or(1).max(1);
        for (name, values) in [("mean", options.mean), ("std", options.std)] {
            if values.len() != 1 && values.len() as i64 != channels || values.len() > MAX_CHANNELS {
                return Err(KernelError::ChannelCount {
                    name,
                    len: values.len(),
                    channels,
                });
            }
        }
        if let Some((channel, &value)) = options
            .std
            .iter()
            .enumerate()
            .find(|(_, v)| **v == 0.0 || !v.is_finite())
        {
            return Err(KernelError::BadStd { channel, value });
        }
        if !options.scale.is_finite() {
            return Err(KernelError::BadScale {
                value: options.scale,
            });
        }
        if !src.contiguity().is_row_major() {
            let compact = self.compact_on_gpu(src)?;
            let guard = compact.view()?;
            return self.normalize(&guard, options);
        }
        let elements = src.numel();
        let align = if kind == 3 { 1 } else { 4 };
        if !src.byte_offset().is_multiple_of(align) {
            return Err(KernelError::Misaligned {
                byte_offset: src.byte_offset(),
                required: align,
            });
        }
        let storage = self.alloc(elements * 4)?;
        let to = self.lookup(storage.handle as usize).expect("just inserted");
        let out = Tensor::new(
            Buffer::new(Box::new(storage)),
            NAME,
            DataType::FLOAT32,
            src.shape(),
            None,
            0,
            0,
        )?;
        if elements == 0 {
            return Ok(out);
        }
        if elements > u64::from(u32::MAX) || src.byte_offset() > u64::from(u32::MAX) {
            return Err(KernelError::TooLarge { elements });
        }
        // Params: n, channels, kind, src_offset, scale, 3 × pad, mean[64], std[64].
        let mut params = [0u32; 8 + 2 * MAX_CHANNELS];
        params[0] = elements as u32;
        params[1] = channels as u32;
        params[2] = kind;
        params[3] = src.byte_offset() as u32;
        params[4] = options.scale.to_bits();
        for c in 0..channels as usize {
            let pick = |v: &[f32]| if v.len() == 1 { v[0] } else { v[c] };
            params[8 + c] = pick(options.mean).to_bits();
            params[8 + MAX_CHANNELS + c] = pick(options.std).to_bits();
        }
        let (from, from_size) = self.source_of(src)?;
        let needed = src.byte_offset() + compact_bytes(src.dtype(), src.shape())? as u64;
        // The source is bound as whole words: the word holding the last byte must be in it.
        if round_up(needed, 4) > from_size / 4 * 4 {
            return Err(Error::StorageTooSmall {
                needed: round_up(needed, 4),
                available: from_size,
            }
            .into());
        }
        self.dispatch(
            &NORMALIZE,
            &from,
            from_size,
            &to,
            bytemuck::cast_slice(&params),
            elements,
        )?;
        Ok(out)
    }
}

/// The compaction kernel's parameters: ndim, elem, out_bytes, src_offset, then shape[8] (u32)
/// and strides[8] (i32).
fn compaction_params(
    src: &TensorRef<'_>,
    from_size: u64,
    len: u64,
) -> Result<[u32; 4 + 2 * MAX_GPU_NDIM], Error> {
    let bits = src.layout().element_bits;
    if bits % 8 != 0 || src.ndim() > MAX_GPU_NDIM {
        return Err(Error::Unsupported {
            backend: NAME,
            operation: "GPU compaction of packed sub-byte tensors or tensors of more than 8 axes",
        });
    }
    let elem = bits / 8;
    let lo = i64::try_from(src.byte_offset()).unwrap_or(i64::MAX) + src.byte_span().lo;
    if lo < 0
        || src.byte_offset() + src.byte_span().hi as u64 > from_size
        || len > u64::from(u32::MAX)
    {
        return Err(Error::StorageTooSmall {
            needed: src.byte_offset() + src.byte_span().hi as u64,
            available: from_size,
        });
    }
    let mut params = [0u32; 4 + 2 * MAX_GPU_NDIM];
    params[0] = src.ndim() as u32;
    params[1] = elem;
    params[2] = len as u32;
    params[3] = src.byte_offset() as u32;
    for (k, (&e, s)) in src.shape().iter().zip(src.strides()).enumerate() {
        params[4 + k] = e as u32;
        params[4 + MAX_GPU_NDIM + k] = s as i32 as u32;
    }
    Ok(params)
}

/// Where a kernel or copy reads from.
enum Source {
    /// A buffer wgpu made or adopted.
    Wgpu(Arc<wgpu::Buffer>),
    /// A foreign JS `GPUBuffer` (wasm).
    #[cfg(target_arch = "wasm32")]
    Js(wgpu::webgpu::GpuBuffer),
}

/// A compute kernel: a label (also its pipeline-cache key) and its WGSL, whose entry point
/// `main` binds the source at 0, the destination at 1 and a uniform at 2.
pub(crate) struct Kernel {
    pub(crate) label: &'static str,
    pub(crate) wgsl: &'static str,
}

const COMPACT: Kernel = Kernel {
    label: "dlport strided→compact",
    wgsl: COMPACT_WGSL,
};

const NORMALIZE: Kernel = Kernel {
    label: "dlport normalize",
    wgsl: NORMALIZE_WGSL,
};

/// Channels [`GpuDevice::normalize`] takes per-channel values for.
pub const MAX_CHANNELS: usize = 64;

/// Options of [`GpuDevice::normalize`]: `out = (x · scale − mean[c]) / std[c]`.
#[derive(Clone, Copy, Debug)]
pub struct Normalize<'a> {
    /// One mean, or one per channel (the last axis).
    pub mean: &'a [f32],
    /// One standard deviation, or one per channel; none may be 0 or non-finite.
    pub std: &'a [f32],
    /// Applied to the input first (1/255 turns bytes into [0, 1]).
    pub scale: f32,
}

/// Why a dlport WebGPU kernel refused its arguments.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum KernelError {
    /// A core error (validation, allocation, a released buffer, …).
    Core(Error),
    /// The kernel does not read this element type.
    InputDtype {
        /// The tensor's dtype.
        dtype: DataType,
    },
    /// `mean` or `std` has neither one value nor one per channel.
    ChannelCount {
        /// "mean" or "std".
        name: &'static str,
        /// How many values were given.
        len: usize,
        /// The extent of the last axis.
        channels: i64,
    },
    /// A standard deviation of 0 or a non-finite one.
    BadStd {
        /// Its channel.
        channel: usize,
        /// The value.
        value: f32,
    },
    /// A non-finite scale.
    BadScale {
        /// The value.
        value: f32,
    },
    /// The first element is not aligned for the kernel's reads.
    Misaligned {
        /// The tensor's byte offset.
        byte_offset: u64,
        /// The alignment needed.
        required: u64,
    },
    /// More elements than one kernel launch indexes (2^32 − 1).
    TooLarge {
        /// The element count.
        elements: u64,
    },
}

impl From<Error> for KernelError {
    fn from(e: Error) -> Self {
        Self::Core(e)
    }
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Core(e) => e.fmt(f),
            Self::InputDtype { dtype } => write!(
                f,
                "normalize reads float32, int32, uint32 or uint8 tensors, not {dtype}; convert it first"
            ),
            Self::ChannelCount {
                name,
                len,
                channels,
            } => write!(
                f,
                "{name} has {len} values, but the last axis has {channels} channels; give 1 value or {channels} (at most {MAX_CHANNELS})"
            ),
            Self::BadStd { channel, value } => write!(
                f,
                "std[{channel}] = {}: a standard deviation must be finite and not 0",
                special(*value)
            ),
            Self::BadScale { value } => write!(f, "scale = {} is not finite", special(*value)),
            Self::Misaligned {
                byte_offset,
                required,
            } => write!(
                f,
                "byte_offset = {byte_offset} is not a multiple of {required}, which the kernel's reads need; compact the tensor first"
            ),
            Self::TooLarge { elements } => write!(
                f,
                "{elements} elements are more than one kernel launch indexes (2^32 - 1); split the tensor"
            ),
        }
    }
}

/// Shows the values these errors carry (0 or non-finite) without pulling float formatting,
/// some 20 KB, into the wasm package.
fn special(v: f32) -> &'static str {
    match v {
        _ if v.is_nan() => "NaN",
        f32::INFINITY => "inf",
        f32::NEG_INFINITY => "-inf",
        _ if v == 0.0 && v.is_sign_negative() => "-0",
        0.0 => "0",
        _ => "a value out of range",
    }
}

impl std::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Core(e) => Some(e),
            _ => None,
        }
    }
}

/// The normalization kernel: one invocation per element; the source is read as words and the
/// element picked by kind (0 float32, 1 int32, 2 uint32, 3 uint8).
const NORMALIZE_WGSL: &str = r#"
struct Params {
  n: u32, channels: u32, kind: u32, src_offset: u32,
  scale: f32, pad0: u32, pad1: u32, pad2: u32,
  mean: array<vec4<f32>, 16>,
  stdev: array<vec4<f32>, 16>,
};
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 64u;
  if (i >= p.n) { return; }
  var x: f32;
  switch p.kind {
    case 0u: { x = bitcast<f32>(src[p.src_offset / 4u + i]); }
    case 1u: { x = f32(bitcast<i32>(src[p.src_offset / 4u + i])); }
    case 2u: { x = f32(src[p.src_offset / 4u + i]); }
    default: {
      let b = p.src_offset + i;
      x = f32((src[b / 4u] >> ((b % 4u) * 8u)) & 0xffu);
    }
  }
  let c = i % p.channels;
  dst[i] = (x * p.scale - p.mean[c / 4u][c % 4u]) / p.stdev[c / 4u][c % 4u];
}
"#;

/// The strided → compact gather: one invocation writes one output word, byte by byte, from
/// wherever the source layout puts each byte (any element size, any offset, negative and zero
/// strides).
const COMPACT_WGSL: &str = r#"
struct Params {
  ndim: u32, elem: u32, out_bytes: u32, src_offset: u32,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<i32>, 2>,
};
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.x + gid.y * nwg.x * 64u;
  if (w * 4u >= p.out_bytes) { return; }
  var word = 0u;
  for (var b = 0u; b < 4u; b = b + 1u) {
    let ob = w * 4u + b;
    if (ob >= p.out_bytes) { break; }
    let e = ob / p.elem;
    let within = ob % p.elem;
    var rem = e;
    var off = 0i;
    for (var k = i32(p.ndim) - 1; k >= 0; k = k - 1) {
      let ext = p.shape[k / 4][k % 4];
      let i = rem % ext;
      rem = rem / ext;
      off = off + i32(i) * p.strides[k / 4][k % 4];
    }
    let sb = u32(i32(p.src_offset) + off * i32(p.elem)) + within;
    let byte = (src[sb / 4u] >> ((sb % 4u) * 8u)) & 0xffu;
    word = word | (byte << (b * 8u));
  }
  dst[w] = word;
}
"#;

/// The storage of a WebGPU tensor: a slot of the buffer table, released (and the buffer
/// destroyed) when dropped — by the last tensor handle or the last DLPack reference.
pub struct SlotStorage {
    gpu: Arc<GpuDevice>,
    handle: u32,
    len: usize,
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
            return Err(Error::InvalidDeviceId {
                backend: NAME,
                device_id: device.device_id,
            });
        }
        let bytes = compact_bytes(dtype, shape)? as u64;
        let storage = self.gpu.alloc(bytes)?;
        Tensor::new(
            Buffer::new(Box::new(storage)),
            NAME,
            dtype,
            shape,
            None,
            0,
            0,
        )
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
                    .view_external(exported, Device::CPU)
                    .map(|t| Some(t.with_copied(true)));
            }
            #[cfg(target_arch = "wasm32")]
            return Err(Error::Unsupported {
                backend: NAME,
                operation: "synchronous readback in the browser (await download)",
            });
        }
        Ok(None)
    }
}

/// Imports a DLPack tensor that may live on this WebGPU device (used by tests and the JS layer).
pub fn import(backend: &WebGpuBackend, m: ManagedTensor) -> Result<Tensor, Error> {
    let device = m.view().device();
    backend.view_external(m, device)
}
