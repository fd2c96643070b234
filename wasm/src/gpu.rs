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
use std::sync::{Arc, Mutex, OnceLock};

use dlport_core::device::{Backend, Buffer, Tensor, compact_bytes, copy_to_compact};
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
    compact: OnceLock<wgpu::ComputePipeline>,
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

/// The buffer table: handle `h` (≥ 1) is slot `h − 1`.
#[derive(Default)]
struct Table {
    slots: Vec<Option<Arc<wgpu::Buffer>>>,
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
            .map_err(|_| {
                backend_error(
                    "requestAdapter",
                    "no WebGPU adapter: no GPU and no software driver (install mesa-vulkan-drivers for lavapipe)",
                )
            })?;
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
            compact: OnceLock::new(),
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

    // On single-threaded wasm a buffer is !Send; the Arc only shares it within that thread.
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    fn insert(&self, buffer: wgpu::Buffer) -> u32 {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.live += 1;
        let buffer = Some(Arc::new(buffer));
        match t.free.pop() {
            Some(i) => {
                t.slots[i as usize] = buffer;
                i + 1
            }
            None => {
                t.slots.push(buffer);
                t.slots.len() as u32
            }
        }
    }

    fn release(&self, handle: u32) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = t.slots.get_mut(handle as usize - 1) {
            if let Some(buffer) = slot.take() {
                buffer.destroy();
                t.live -= 1;
                t.free.push(handle - 1);
            }
        }
    }

    /// The buffer behind a handle, if it is live.
    pub fn lookup(&self, handle: usize) -> Option<Arc<wgpu::Buffer>> {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.slots.get(handle.checked_sub(1)?)?.clone()
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
        let handle = self.insert(buffer);
        Ok(SlotStorage {
            gpu: Arc::clone(self),
            handle,
            len: bytes as usize,
        })
    }

    fn buffer_of(&self, view: &TensorRef<'_>) -> Result<Arc<wgpu::Buffer>, Error> {
        if view.device().device_type != DeviceType::WEBGPU {
            return Err(Error::Unsupported {
                backend: NAME,
                operation: "GPU operations on a non-WebGPU tensor",
            });
        }
        self.lookup(view.data() as usize).ok_or(backend_error(
            "lookup",
            "the handle is not a live buffer of this WebGPU device",
        ))
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
        let (buffer, offset, _compacted) = if t.contiguity().is_row_major() {
            (self.buffer_of(t)?, t.byte_offset(), None)
        } else {
            let c = self.compact_on_gpu(t)?;
            let (buffer, offset) = {
                let guard = c.read()?;
                let view = guard.view();
                (self.buffer_of(&view)?, view.byte_offset())
            };
            (buffer, offset, Some(c))
        };
        let start = offset / 4 * 4;
        let end = round_up(offset + len as u64, 4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dlport readback"),
            size: end - start,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&buffer, start, &staging, 0, end - start);
        self.queue.submit([enc.finish()]);
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
        let from = self.buffer_of(src)?;
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
        let mut enc = self.device.create_command_encoder(&Default::default());
        if src.contiguity().is_row_major()
            && src.byte_offset().is_multiple_of(4)
            && len.is_multiple_of(4)
        {
            enc.copy_buffer_to_buffer(&from, src.byte_offset(), &to, 0, len);
        } else {
            self.encode_compaction(&mut enc, src, &from, &to, len)?;
        }
        self.queue.submit([enc.finish()]);
        Ok(out.with_copied(true))
    }

    fn encode_compaction(
        &self,
        enc: &mut wgpu::CommandEncoder,
        src: &TensorRef<'_>,
        from: &wgpu::Buffer,
        to: &wgpu::Buffer,
        len: u64,
    ) -> Result<(), Error> {
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
            || src.byte_offset() + src.byte_span().hi as u64 > from.size()
            || len > u64::from(u32::MAX)
        {
            return Err(Error::StorageTooSmall {
                needed: src.byte_offset() + src.byte_span().hi as u64,
                available: from.size(),
            });
        }
        // Params: ndim, elem, out_bytes, src_offset, then shape[8] (u32) and strides[8] (i32).
        let mut params = [0u32; 4 + 2 * MAX_GPU_NDIM];
        params[0] = src.ndim() as u32;
        params[1] = elem;
        params[2] = len as u32;
        params[3] = src.byte_offset() as u32;
        for (k, (&e, s)) in src.shape().iter().zip(src.strides()).enumerate() {
            params[4 + k] = e as u32;
            params[4 + MAX_GPU_NDIM + k] = s as i32 as u32;
        }
        let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dlport compaction params"),
            size: std::mem::size_of_val(&params) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue
            .write_buffer(&uniform, 0, bytemuck::cast_slice(&params));
        let pipeline = self.compact.get_or_init(|| {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("dlport strided→compact"),
                    source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(COMPACT_WGSL)),
                });
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some("dlport strided→compact"),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
        });
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: from.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: to.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: uniform.as_entire_binding(),
                },
            ],
        });
        let words = len.div_ceil(4) as u32;
        let groups = words.div_ceil(64);
        let (x, y) = (groups.min(65535), groups.div_ceil(65535));
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(x, y, 1);
        Ok(())
    }
}

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
                let cpu = dlport_core::device::CpuBackend;
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
