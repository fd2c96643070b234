//! The CUDA backend (feature `cuda`): device buffers, CUDA-pinned host memory, H2D/D2H copies
//! through pinned staging, views of imported `kDLCUDA`/`kDLCUDAManaged` tensors, exports that keep
//! buffers alive, and the DLPack stream hand-off.
//!
//! The driver is loaded at run time (cudarc's `fallback-dynamic-loading`). cudarc panics when
//! `libcuda` is missing, so every entry goes through [`probe`] first, which turns absence into
//! [`BackendError::DriverNotFound`].

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, DriverError, result, sys};
use dlport_core::abi::{DeviceType, FLAG_IS_COPIED};
use dlport_core::backend::{
    Access, AlignedBuffer, Backend, Buffer, CPU_ALIGN, CpuBackend, StreamRequest, TensorStorage,
    allocation_bytes, compact_bytes,
};
use dlport_core::error::{BackendError, BackendReport, DispatchError, Driver};
use dlport_core::{DataType, Device, Error, Tensor, TensorRef};

/// The backend's name.
pub const NAME: &str = crate::names::CUDA;

/// CUDA's legacy default stream handle (`CU_STREAM_LEGACY`).
const LEGACY_DEFAULT_STREAM: usize = 1;

/// Turns a driver error into a dlport error naming the call.
pub fn driver_error(operation: &'static str, e: DriverError) -> Error {
    use sys::CUresult as R;
    let detail = match e.0 {
        R::CUDA_ERROR_OUT_OF_MEMORY => "out of memory: free tensors or allocate less",
        R::CUDA_ERROR_NO_DEVICE => "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)",
        R::CUDA_ERROR_INVALID_DEVICE => "invalid device ordinal",
        R::CUDA_ERROR_INVALID_VALUE => "an argument is invalid (pointer, size or stream)",
        R::CUDA_ERROR_INVALID_HANDLE => "the stream or event handle is invalid",
        R::CUDA_ERROR_NOT_INITIALIZED => "the driver is not initialised",
        _ => "the CUDA driver reported an error",
    };
    Error::Backend(BackendError::Failed {
        code: e.0 as i32,
        report: BackendReport::new(NAME, operation, detail).with_source(e),
    })
}

/// Checks that a CUDA driver can be used, without panicking: `libcuda` must load and `cuInit`
/// succeed. Returns the number of devices.
pub fn probe() -> Result<usize, Error> {
    static PROBE: OnceLock<Result<usize, Error>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: only tries to open the library; no symbol is called.
            if !unsafe { sys::is_culib_present() } {
                return Err(Error::Backend(BackendError::DriverNotFound {
                    driver: &Driver {
                        api: "CUDA",
                        library: "libcuda.so.1",
                    },
                }));
            }
            result::init().map_err(|e| driver_error("cuInit", e))?;
            let n = result::device::get_count().map_err(|e| driver_error("cuDeviceGetCount", e))?;
            Ok(n.max(0) as usize)
        })
        .clone()
}

fn contexts() -> Result<&'static [Arc<CudaContext>], Error> {
    static CONTEXTS: OnceLock<Result<Vec<Arc<CudaContext>>, Error>> = OnceLock::new();
    CONTEXTS
        .get_or_init(|| {
            let n = probe()?;
            (0..n)
                .map(|i| {
                    CudaContext::new(i).map_err(|e| driver_error("cuDevicePrimaryCtxRetain", e))
                })
                .collect()
        })
        .as_deref()
        .map_err(Clone::clone)
}

/// The primary context of device `ordinal`.
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>, Error> {
    let all = contexts()?;
    all.get(ordinal)
        .cloned()
        .ok_or(Error::Backend(BackendError::failed(
            NAME,
            "cuDeviceGet",
            i32::try_from(ordinal).unwrap_or(i32::MAX),
            "no CUDA device with this ordinal",
        )))
}

/// Waits for all work on every device (managed memory is then host-readable).
pub fn synchronize_all() -> Result<(), Error> {
    for ctx in contexts()? {
        ctx.synchronize()
            .map_err(|e| driver_error("cuCtxSynchronize", e))?;
    }
    Ok(())
}

fn bind(ctx: &CudaContext) -> Result<(), Error> {
    ctx.bind_to_thread()
        .map_err(|e| driver_error("cuCtxSetCurrent", e))
}

/// CUDA-pinned host memory from `cuMemHostAlloc` (portable, not write-combined).
#[derive(Debug)]
pub struct HostPinned {
    ctx: Arc<CudaContext>,
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: the allocation is owned alone and freed once; the context handle is thread-safe.
unsafe impl Send for HostPinned {}

impl HostPinned {
    /// Allocates `len` zeroed bytes of pinned host memory.
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, Error> {
        bind(ctx)?;
        // SAFETY: a plain allocation call; the size is ≥ 1 so the pointer is real.
        let ptr = unsafe { result::malloc_host(len.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|e| driver_error("cuMemHostAlloc", e))?;
        // SAFETY: `ptr` is a fresh host allocation of at least `len` bytes.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, len) };
        Ok(Self {
            ctx: Arc::clone(ctx),
            ptr,
            len,
        })
    }
}

impl Drop for HostPinned {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by cuMemHostAlloc in `new`, freed once here.
        let _ = unsafe { result::free_host(self.ptr) };
    }
}

// SAFETY: a stable host allocation of `len` bytes, owned alone.
unsafe impl TensorStorage for HostPinned {
    fn data_ptr(&mut self) -> *mut c_void {
        self.ptr
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        Device::cuda_host()
    }
}

/// A range of CUDA device memory at a fixed device address in one context: the one
/// [`TensorStorage`] of device memory. When dropped it is given back exactly once by its
/// `release` (with the context bound: `cuMemFree` for an allocation, `cuIpcCloseMemHandle` for
/// a mapping of another process's memory); `keep` is dropped after that (a CUDA IPC consumer's
/// liveness fd, which tells the producer this consumer let go).
#[derive(Debug)]
pub struct DeviceRange<K: Send + 'static = ()> {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    len: usize,
    ordinal: i32,
    access: Access,
    release: unsafe fn(sys::CUdeviceptr),
    /// Held, never read: dropped after the release.
    _keep: K,
}

/// Device memory from `cuMemAlloc`, owned alone.
pub type DeviceMemory = DeviceRange<()>;

// SAFETY: the range is owned alone and given back once; the context handle is thread-safe, and
// `keep` is `Send`.
unsafe impl<K: Send + 'static> Send for DeviceRange<K> {}

impl<K: Send + 'static> DeviceRange<K> {
    /// Takes `len` bytes at `ptr` on device `ordinal` (in `ctx`), to be given back by
    /// `release` once, and `keep` until then.
    ///
    /// # Safety
    /// `ptr` addresses at least `len` bytes of device memory in `ctx` that stay at that address
    /// until `release(ptr)`, which nobody else calls; `access` is what other handles may do.
    pub(crate) unsafe fn from_raw(
        ctx: Arc<CudaContext>,
        ptr: sys::CUdeviceptr,
        len: usize,
        ordinal: i32,
        access: Access,
        release: unsafe fn(sys::CUdeviceptr),
        keep: K,
    ) -> Self {
        Self {
            ctx,
            ptr,
            len,
            ordinal,
            access,
            release,
            _keep: keep,
        }
    }
}

impl DeviceMemory {
    /// Allocates `len` zeroed bytes on device `ordinal`.
    pub fn new(ordinal: usize, len: usize) -> Result<Self, Error> {
        let ctx = context(ordinal)?;
        bind(&ctx)?;
        // SAFETY: a plain allocation call in the bound context.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }
            .map_err(|e| driver_error("cuMemAlloc", e))?;
        /// `cuMemFree`, the release of an allocation.
        ///
        /// # Safety
        /// `ptr` came from `cuMemAlloc` and is freed once, with its context bound.
        unsafe fn free(ptr: sys::CUdeviceptr) {
            // SAFETY: the contract.
            let _ = unsafe { result::free_sync(ptr) };
        }
        // SAFETY: a fresh allocation of at least `len` bytes in `ctx`, freed only by `free`,
        // owned alone; from here dropping the range frees it.
        let range =
            unsafe { Self::from_raw(ctx, ptr, len, ordinal as i32, Access::Exclusive, free, ()) };
        // SAFETY: `ptr` is a fresh device allocation of at least `len` bytes.
        unsafe { result::memset_d8_sync(ptr, 0, len) }
            .map_err(|e| driver_error("cuMemsetD8", e))?;
        Ok(range)
    }
}

impl<K: Send + 'static> Drop for DeviceRange<K> {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the range's own release, called once, here (`from_raw`'s contract); `_keep`
        // drops after this body.
        unsafe { (self.release)(self.ptr) };
    }
}

// SAFETY: `len` bytes at a fixed device address until drop (`from_raw`'s contract); the pointer
// is a device address, never dereferenced on the host; `access` is what `from_raw` was told.
unsafe impl<K: Send + 'static> TensorStorage for DeviceRange<K> {
    fn data_ptr(&mut self) -> *mut c_void {
        std::ptr::without_provenance_mut(self.ptr as usize)
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        Device::cuda(self.ordinal)
    }
    fn access(&self) -> Access {
        self.access
    }
}

/// The CUDA backend (`"cuda"`).
#[derive(Debug)]
pub struct CudaBackend {
    devices: usize,
}

impl CudaBackend {
    /// Probes the driver; fails with [`BackendError::DriverNotFound`] where there is none.
    pub fn new() -> Result<Self, Error> {
        Ok(Self { devices: probe()? })
    }

    /// Number of visible devices.
    pub fn device_count(&self) -> usize {
        self.devices
    }

    fn ordinal(&self, device: Device) -> Result<usize, Error> {
        usize::try_from(device.device_id)
            .ok()
            .filter(|&i| i < self.devices)
            .ok_or(Error::Dispatch(DispatchError::InvalidDeviceId {
                backend: NAME,
                device_id: device.device_id,
            }))
    }

    /// A zeroed device tensor, after checking its size against the process's allocation limit
    /// (`allocation_bytes`, as every backend's allocation).
    pub fn zeros(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        let bytes = allocation_bytes(dtype, shape, 1)?;
        let mem = DeviceMemory::new(self.ordinal(device)?, bytes)?;
        Tensor::builder(Buffer::new(Box::new(mem)), NAME, dtype, shape).build()
    }

    /// A zeroed CUDA-pinned host tensor (`cuda_host:0`), after checking its size against the
    /// process's allocation limit.
    pub fn pinned_zeros(&self, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        let bytes = allocation_bytes(dtype, shape, 4096)?;
        let mem = HostPinned::new(&context(0)?, bytes)?;
        Tensor::builder(
            Buffer::new(Box::new(mem)),
            crate::names::PINNED,
            dtype,
            shape,
        )
        .build()
    }

    /// The stream hand-off of the DLPack protocol: the producer records an event on its stream
    /// and the consumer's stream waits on it. `NoSync` does nothing, and neither does a
    /// consumer on the producer's own stream (its work is ordered already). The registry's
    /// exports reach it as [`Backend::stream_hand_off`], with the legacy default stream as
    /// the producer unless the caller names one.
    pub fn hand_off(
        &self,
        device: Device,
        producer: usize,
        consumer: StreamRequest,
    ) -> Result<(), Error> {
        let Some(consumer) = consumer.cuda_handle() else {
            return Ok(());
        };
        let ordinal = self.ordinal(device)?;
        if consumer == producer {
            return Ok(());
        }
        let ctx = context(ordinal)?;
        bind(&ctx)?;
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| driver_error("cuEventCreate", e))?;
        let outcome = (|| {
            // SAFETY: the event is live; the producer and consumer streams are handles the
            // caller vouches for (or the legacy/per-thread pseudo-handles 1 and 2).
            unsafe { result::event::record(event, producer as sys::CUstream) }
                .map_err(|e| driver_error("cuEventRecord", e))?;
            // SAFETY: as above.
            unsafe {
                result::stream::wait_event(
                    consumer as sys::CUstream,
                    event,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .map_err(|e| driver_error("cuStreamWaitEvent", e))
        })();
        // SAFETY: destroying a recorded event is allowed; its resources go once the wait is done.
        let _ = unsafe { result::event::destroy(event) };
        outcome
    }

    /// Host → device: compacts into pinned staging unless the source is already pinned and
    /// compact, then one `cuMemcpyHtoD`.
    fn upload(&self, src: &TensorRef<'_>, target: Device) -> Result<Tensor, Error> {
        let out = self.zeros(target, src.dtype(), src.shape())?;
        let len = compact_bytes(src.dtype(), src.shape())?;
        if len == 0 {
            return Ok(out.with_copied(true));
        }
        let dst = out.buffer().ptr() as usize as sys::CUdeviceptr;
        let direct =
            src.device().device_type == DeviceType::CUDA_HOST && src.contiguity().is_row_major();
        let staging;
        let bytes: &[u8] = if direct {
            src.as_bytes()?
        } else {
            staging = HostPinned::new(&context(0)?, len)?;
            // SAFETY: the staging buffer holds `len` bytes that only we reach.
            let buf = unsafe { std::slice::from_raw_parts_mut(staging.ptr.cast::<u8>(), len) };
            src.copy_to_compact(buf)?;
            buf
        };
        bind(&*context(self.ordinal(target)?)?)?;
        // SAFETY: `dst` is a device allocation of `len` bytes; `bytes` is `len` readable bytes.
        unsafe { result::memcpy_htod_sync(dst, bytes) }
            .map_err(|e| driver_error("cuMemcpyHtoD", e))?;
        Ok(out.with_copied(true))
    }

    /// Device → host (`cpu` or `cuda_host`): one `cuMemcpyDtoH` into pinned memory, then, for a
    /// `cpu` target, a copy into a 64-byte-aligned host buffer.
    fn download(&self, src: &TensorRef<'_>, target: Device) -> Result<Tensor, Error> {
        if !src.contiguity().is_row_major() {
            return Err(Error::Backend(BackendError::unsupported(
                NAME,
                "downloading a strided device tensor (compact it on the device first)",
            )));
        }
        let len = compact_bytes(src.dtype(), src.shape())?;
        let pinned = self.pinned_zeros(src.dtype(), src.shape())?;
        if len != 0 {
            let from = (src.data() as usize as sys::CUdeviceptr) + src.byte_offset();
            // SAFETY: a fresh pinned buffer of `len` bytes that only we reach.
            let buf =
                unsafe { std::slice::from_raw_parts_mut(pinned.buffer().ptr().cast::<u8>(), len) };
            bind(&*context(self.ordinal(src.device())?)?)?;
            // SAFETY: `from` starts a compact device range of `len` bytes (validated view).
            unsafe { result::memcpy_dtoh_sync(buf, from) }
                .map_err(|e| driver_error("cuMemcpyDtoH", e))?;
        }
        if target.device_type == DeviceType::CUDA_HOST {
            return Ok(pinned.with_copied(true));
        }
        // Into 64-byte-aligned host memory, as the CPU backend's copies are (the registry
        // checked the size against the limit in force before it asked for this copy).
        let mut host = AlignedBuffer::zeroed(len, CPU_ALIGN)?;
        pinned
            .view()?
            .tensor_ref()
            .copy_to_compact(host.as_mut_slice())?;
        Tensor::builder(
            Buffer::new(Box::new(host)),
            CpuBackend::NAME,
            src.dtype(),
            src.shape(),
        )
        .flags(FLAG_IS_COPIED)
        .build()
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::CUDA, DeviceType::CUDA_MANAGED]
    }

    fn can_access(&self, memory: Device) -> bool {
        match memory.device_type {
            DeviceType::CUDA => self.ordinal(memory).is_ok(),
            DeviceType::CUDA_MANAGED => true,
            _ => false,
        }
    }

    /// [`CudaBackend::hand_off`] from `producer`, or from the legacy default stream, which
    /// dlport's own device work (synchronous) and its imports (made with `stream=None`) are
    /// ordered before.
    fn stream_hand_off(
        &self,
        memory: Device,
        producer: Option<usize>,
        consumer: StreamRequest,
    ) -> Result<(), Error> {
        self.hand_off(memory, producer.unwrap_or(LEGACY_DEFAULT_STREAM), consumer)
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        match device.device_type {
            DeviceType::CUDA => self.zeros(device, dtype, shape),
            DeviceType::CUDA_HOST => self.pinned_zeros(dtype, shape),
            _ => Err(Error::Backend(BackendError::unsupported(
                NAME,
                "allocation outside cuda and cuda_host",
            ))),
        }
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        let from_device = src.device().device_type == DeviceType::CUDA;
        match target.device_type {
            DeviceType::CUDA if src.device().is_host_accessible() => {
                self.upload(src, target).map(Some)
            }
            DeviceType::CUDA if from_device => {
                if !src.contiguity().is_row_major() {
                    return Ok(None);
                }
                let out = self.zeros(target, src.dtype(), src.shape())?;
                let len = compact_bytes(src.dtype(), src.shape())?;
                if len != 0 {
                    let from = (src.data() as usize as sys::CUdeviceptr) + src.byte_offset();
                    let to = out.buffer().ptr() as usize as sys::CUdeviceptr;
                    bind(&*context(self.ordinal(target)?)?)?;
                    // SAFETY: both are device ranges of `len` bytes (validated; fresh).
                    unsafe { result::memcpy_dtod_sync(to, from, len) }
                        .map_err(|e| driver_error("cuMemcpyDtoD", e))?;
                }
                Ok(Some(out.with_copied(true)))
            }
            DeviceType::CPU | DeviceType::CUDA_HOST if from_device => {
                self.download(src, target).map(Some)
            }
            _ => Ok(None),
        }
    }
}
