//! Page-locked ("pinned") host memory.
//!
//! With a CUDA driver (feature `cuda` and `libcuda` present) the memory comes from
//! `cuMemHostAlloc` (portable, not write-combined, since the CPU reads it) and is exported as
//! `kDLCUDAHost`. Without one it is ordinary host memory locked with `mlock` (`VirtualLock` on
//! Windows), exported as plain `kDLCPU` and described as page-locked: the backend never claims
//! a device type the memory does not have.

use std::ffi::c_void;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{
    AlignedBuffer, Backend, Buffer, TensorStorage, allocation_bytes, compact_bytes,
};
use dlport_core::error::BackendError;
use dlport_core::{DataType, Device, Error, Tensor, TensorRef};

/// Page size used for locked allocations.
const PAGE: usize = 4096;

/// How the pinned backend obtains page-locked memory.
#[derive(Clone, Debug)]
pub enum PinnedMode {
    /// `cuMemHostAlloc` through the CUDA driver: `kDLCUDAHost` memory.
    #[cfg(feature = "cuda")]
    Cuda(std::sync::Arc<cudarc::driver::CudaContext>),
    /// `mlock`-ed host memory: `kDLCPU`, page-locked.
    Mlock,
}

/// The pinned-memory backend (`"pinned"`).
#[derive(Clone, Debug)]
pub struct PinnedBackend {
    mode: PinnedMode,
    locker: Locker,
}

/// The function that locks pages (replaceable in tests to exercise the failure paths).
pub type Locker = fn(*const c_void, usize) -> Result<(), i32>;

// Page locking, one room per platform, chosen here once: each has `mlock`, `munlock` and
// `lock_error` with the same signatures.
#[cfg(not(any(unix, windows)))]
#[path = "lock_none.rs"]
mod lock;
#[cfg(unix)]
#[path = "lock_unix.rs"]
mod lock;
#[cfg(windows)]
#[path = "lock_windows.rs"]
mod lock;

pub use lock::lock_error;
use lock::{mlock, munlock};

/// The last OS error of this thread (`errno`, or `GetLastError()` on Windows).
fn last_os_error() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Default for PinnedBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl PinnedBackend {
    /// The backend's name.
    pub const NAME: &'static str = crate::names::PINNED;

    /// CUDA-pinned memory when a CUDA driver is usable, `mlock` otherwise.
    pub fn new() -> Self {
        #[cfg(feature = "cuda")]
        if let Ok(ctx) = crate::cuda::context(0) {
            return Self {
                mode: PinnedMode::Cuda(ctx),
                locker: mlock,
            };
        }
        Self::mlock()
    }

    /// Always `mlock` (no driver involved).
    pub fn mlock() -> Self {
        Self {
            mode: PinnedMode::Mlock,
            locker: mlock,
        }
    }

    /// `mlock` through a custom locker (for tests of the failure paths).
    pub fn with_locker(locker: Locker) -> Self {
        Self {
            mode: PinnedMode::Mlock,
            locker,
        }
    }

    /// The mode in use.
    pub fn mode(&self) -> &PinnedMode {
        &self.mode
    }

    /// The device its tensors have: `cuda_host:0` with CUDA, `cpu` with `mlock`.
    pub fn device(&self) -> Device {
        match self.mode {
            #[cfg(feature = "cuda")]
            PinnedMode::Cuda(_) => Device::cuda_host(),
            PinnedMode::Mlock => Device::cpu(),
        }
    }

    /// What the memory is, in words.
    pub fn describe(&self) -> &'static str {
        match self.mode {
            #[cfg(feature = "cuda")]
            PinnedMode::Cuda(_) => "CUDA-pinned host memory (cuMemHostAlloc), kDLCUDAHost",
            PinnedMode::Mlock => "page-locked host memory (mlock), exported as kDLCPU",
        }
    }

    /// Allocates `bytes` zeroed, page-locked bytes.
    pub fn alloc_bytes(&self, bytes: usize) -> Result<Box<dyn TensorStorage>, Error> {
        match &self.mode {
            #[cfg(feature = "cuda")]
            PinnedMode::Cuda(ctx) => Ok(Box::new(crate::cuda::HostPinned::new(ctx, bytes)?)),
            PinnedMode::Mlock => Ok(Box::new(LockedBuffer::new(bytes, self.locker)?)),
        }
    }

    /// Refuses `kDLCUDAHost` memory (`operation`) when this backend locks memory itself: it is
    /// the backend the registry finds for that type when no CUDA driver was usable, and the
    /// only one that knows why there is none, so it says so (and what to ask for instead)
    /// rather than letting the copy fall through to a generic refusal.
    fn refuse_cuda_host(&self, device: Device, operation: &'static str) -> Result<(), Error> {
        if device.device_type != DeviceType::CUDA_HOST || !matches!(self.mode, PinnedMode::Mlock) {
            return Ok(());
        }
        let detail = if cfg!(feature = "cuda") {
            "CUDA-pinned memory needs the CUDA driver, and no usable one was found (libcuda.so.1 \
             or a CUDA device), so pinned memory here is page-locked kDLCPU memory: ask for \
             kDLCPU, (1, 0), or None for the tensor's own device"
        } else {
            "CUDA-pinned memory needs the CUDA driver, and this build of dlport has no CUDA \
             support (feature `cuda`), so pinned memory here is page-locked kDLCPU memory: ask \
             for kDLCPU, (1, 0), or None for the tensor's own device"
        };
        Err(Error::Backend(BackendError::Unsupported {
            report: dlport_core::error::BackendReport::new(Self::NAME, operation, detail),
        }))
    }

    /// A zeroed, compact, page-locked tensor, after checking its size against the process's
    /// allocation limit (`allocation_bytes`, as every backend's allocation).
    pub fn zeros(&self, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        // Page-aligned, with CUDA as with mlock.
        let bytes = allocation_bytes(dtype, shape, PAGE)?;
        let storage = self.alloc_bytes(bytes)?;
        Tensor::builder(Buffer::new(storage), Self::NAME, dtype, shape).build()
    }
}

impl Backend for PinnedBackend {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        match self.mode {
            #[cfg(feature = "cuda")]
            PinnedMode::Cuda(_) => &[DeviceType::CUDA_HOST],
            // mlock memory is plain kDLCPU, which the CPU backend serves.
            PinnedMode::Mlock => &[],
        }
    }

    fn can_access(&self, memory: Device) -> bool {
        memory.is_host_accessible()
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        self.refuse_cuda_host(device, "allocation of kDLCUDAHost memory")?;
        if device.device_type != self.device().device_type {
            return Err(Error::Backend(BackendError::unsupported(
                Self::NAME,
                "allocation on this device (pinned memory is cuda_host:0 with CUDA, cpu with mlock)",
            )));
        }
        self.zeros(dtype, shape)
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        self.refuse_cuda_host(target, "a copy to kDLCUDAHost memory")?;
        if target != self.device() || !src.device().is_host_accessible() {
            return Ok(None);
        }
        let t = self.zeros(src.dtype(), src.shape())?;
        let len = compact_bytes(src.dtype(), src.shape())?;
        if len != 0 {
            // SAFETY: a fresh pinned allocation of exactly `len` bytes, reachable only by us.
            let dst = unsafe { std::slice::from_raw_parts_mut(t.buffer().ptr().cast::<u8>(), len) };
            src.copy_to_compact(dst)?;
        }
        Ok(Some(t.with_copied(true)))
    }
}

/// `mlock`-ed, page-aligned, zeroed host memory; unlocked and freed on drop.
#[derive(Debug)]
pub struct LockedBuffer {
    buf: AlignedBuffer,
    locked: bool,
}

impl LockedBuffer {
    /// Allocates and locks `len` bytes (rounded up to whole pages for the lock).
    pub fn new(len: usize, locker: Locker) -> Result<Self, Error> {
        let buf = AlignedBuffer::zeroed(len, PAGE)?;
        if len == 0 {
            return Ok(Self { buf, locked: false });
        }
        locker(buf.as_ptr().cast(), len).map_err(lock_error)?;
        Ok(Self { buf, locked: true })
    }

    /// Whether the pages are locked.
    pub fn is_locked(&self) -> bool {
        self.locked
    }
}

impl Drop for LockedBuffer {
    fn drop(&mut self) {
        if self.locked {
            munlock(self.buf.as_ptr().cast(), self.buf.len());
        }
    }
}

// SAFETY: forwards to the aligned allocation, stable and owned alone.
unsafe impl TensorStorage for LockedBuffer {
    fn data_ptr(&mut self) -> *mut c_void {
        self.buf.as_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.buf.len()
    }
}
