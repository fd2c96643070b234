//! CUDA device memory shared through CUDA IPC (feature `cuda`, Linux).
//!
//! The producer takes a `cuIpcGetMemHandle` of the allocation that holds the tensor; the
//! descriptor carries the handle, the element 0 offset inside the allocation and its size. CUDA
//! IPC does not keep the exporter's memory alive, so the producer keeps the tensor itself, and
//! one fd tells it when to let go: the descriptor's fd is the write end of a pipe whose read end
//! a producer thread watches. Every holder of a write end (the `Shared` value, each consumer's
//! opened tensor) keeps the pipe open; when the last one closes, or its process dies and the
//! kernel closes it, the thread reads end-of-file and releases the tensor, exactly once.
//!
//! The consumer opens the handle with `cuIpcOpenMemHandle` on the same device ordinal (both
//! processes must number devices alike: the same `CUDA_VISIBLE_DEVICES`), checks the mapped
//! allocation is at least `byte_len` bytes, and gets a zero-copy `kDLCUDA` tensor whose deleter
//! closes the handle, then its write end.

use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};
use dlport_core::abi::{FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use dlport_core::backend::Access;
use dlport_core::{CopyPolicy, Device, Error, ExportBuilder, ManagedTensor};

use super::descriptor::{CUDA_IPC_HANDLE_LEN, Descriptor, HandleKind};
use super::errors::{NAME, errno, os_error, unsupported};
use super::options::ShareOptions;
use crate::cuda::{self, DeviceRange, driver_error};

fn context(device: Device) -> Result<Arc<CudaContext>, Error> {
    let ordinal = usize::try_from(device.device_id).map_err(|_| {
        Error::Dispatch(dlport_core::error::DispatchError::InvalidDeviceId {
            backend: NAME,
            device_id: device.device_id,
        })
    })?;
    let ctx = cuda::context(ordinal)?;
    ctx.bind_to_thread()
        .map_err(|e| driver_error("cuCtxSetCurrent", e))?;
    Ok(ctx)
}

/// The allocation (base, size) that holds device address `p`.
fn address_range(p: sys::CUdeviceptr) -> Result<(sys::CUdeviceptr, usize), Error> {
    let (mut base, mut size) = (0, 0usize);
    // SAFETY: writes two values we own; the driver only looks `p` up.
    unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, p) }
        .result()
        .map_err(|e| driver_error("cuMemGetAddressRange", e))?;
    Ok((base, size))
}

/// A pipe (read end, write end), both close-on-exec.
fn pipe() -> Result<(OwnedFd, OwnedFd), Error> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_error(
            "pipe2",
            errno(),
            "creating the liveness pipe failed",
        ));
    }
    // SAFETY: two descriptors just created, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Blocks until every write end of the pipe is closed.
fn wait_for_eof(read_end: &OwnedFd) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads at most one byte into a local.
        let n = unsafe { libc::read(read_end.as_raw_fd(), (&raw mut byte).cast::<c_void>(), 1) };
        if n == 0 || (n < 0 && errno() != i64::from(libc::EINTR)) {
            return;
        }
    }
}

/// Shares a CUDA tensor: its IPC handle, and the write end of the pipe that keeps it alive.
pub(super) fn share(
    tensor: ManagedTensor,
    options: &ShareOptions,
) -> Result<(Descriptor, OwnedFd), Error> {
    if options.copy == CopyPolicy::Always {
        return Err(unsupported(
            "copying device memory in order to share it (CopyPolicy::Always): \
                        share the tensor itself (CopyPolicy::IfNeeded or Never)",
        ));
    }
    let view = tensor.view();
    if options.read_only || view.is_read_only() {
        return Err(unsupported(
            "a read-only share of CUDA memory: CUDA IPC maps the memory writable in every \
             process that opens it (cuIpcOpenMemHandle has no read-only mode), so READ_ONLY \
             could not be kept; share it writable, or copy it to host memory and share that \
             read-only",
        ));
    }
    if view.numel() == 0 {
        return Err(unsupported(
            "sharing an empty CUDA tensor through CUDA IPC (it has no memory to \
                        map: send its shape and make an empty tensor in the peer)",
        ));
    }
    let device = view.device();
    let _ctx = context(device)?;
    let first = view.data() as usize as sys::CUdeviceptr + view.byte_offset();
    let (base, size) = address_range(first)?;
    let mut handle = sys::CUipcMemHandle {
        reserved: [0; CUDA_IPC_HANDLE_LEN],
    };
    // SAFETY: `base` is the start of a live allocation (cuMemGetAddressRange); the handle is
    // written into a value we own.
    unsafe { sys::cuIpcGetMemHandle(&mut handle, base) }
        .result()
        .map_err(|e| driver_error("cuIpcGetMemHandle", e))?;
    let descriptor = Descriptor {
        kind: HandleKind::CudaIpc,
        device,
        dtype: view.dtype(),
        shape: view.shape().to_vec(),
        strides: view.strides().collect(),
        byte_offset: first - base,
        byte_len: size as u64,
        flags: view.flags() & !FLAG_IS_COPIED,
        handle: handle.reserved.iter().map(|&b| b as u8).collect(),
    };
    descriptor.validate()?;
    let (read_end, write_end) = pipe()?;
    // The thread owns the tensor from here: if it cannot start, the closure (and the tensor)
    // is dropped, which releases it.
    std::thread::Builder::new()
        .name("dlport-cuda-ipc".into())
        .spawn(move || {
            wait_for_eof(&read_end);
            drop(tensor);
        })
        .map_err(|e| {
            os_error(
                "pthread_create",
                i64::from(e.raw_os_error().unwrap_or(0)),
                "starting the thread that releases the shared CUDA tensor failed",
            )
        })?;
    Ok((descriptor, write_end))
}

/// Opens a CUDA IPC descriptor (validated by the caller); `fd` is its liveness pipe.
pub(super) fn open(d: &Descriptor, fd: BorrowedFd<'_>) -> Result<ManagedTensor, Error> {
    // SAFETY: all-zero is a valid `stat`; fstat writes it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFIFO
    {
        return Err(os_error(
            "fstat",
            i64::from(st.st_mode & libc::S_IFMT),
            "the fd of a CUDA IPC descriptor must be the producer's liveness pipe (a FIFO): \
             pass the fd received with the descriptor",
        ));
    }
    let alive = fd.try_clone_to_owned().map_err(|e| {
        os_error(
            "fcntl(F_DUPFD_CLOEXEC)",
            i64::from(e.raw_os_error().unwrap_or(0)),
            "duplicating the liveness fd failed",
        )
    })?;
    cuda::probe()?;
    let ctx = context(d.device)?;
    let mut handle = sys::CUipcMemHandle {
        reserved: [0; CUDA_IPC_HANDLE_LEN],
    };
    for (r, &b) in handle.reserved.iter_mut().zip(&d.handle) {
        *r = b as _;
    }
    let mut ptr: sys::CUdeviceptr = 0;
    let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as c_uint;
    // SAFETY: writes the mapped address into a value we own; the handle is plain bytes that the
    // driver checks (a forged one is an error, not a mapping).
    unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, handle, lazy) }
        .result()
        .map_err(|e| driver_error("cuIpcOpenMemHandle", e))?;
    /// `cuIpcCloseMemHandle`, the release of a mapping of another process's memory.
    ///
    /// # Safety
    /// `ptr` came from `cuIpcOpenMemHandle` and is closed once, with its context bound.
    unsafe fn close(ptr: sys::CUdeviceptr) {
        // SAFETY: the contract.
        let _ = unsafe { sys::cuIpcCloseMemHandle(ptr) };
    }
    // Other processes may write the memory: Shared, or ReadOnly when the descriptor says so.
    let access = if d.flags & FLAG_READ_ONLY != 0 {
        Access::ReadOnly
    } else {
        Access::Shared
    };
    // SAFETY: a mapping of `byte_len` bytes (checked against the allocation's size below) at a
    // fixed address until `close`, which only the range calls; the liveness fd is dropped after
    // the handle is closed.
    let storage = unsafe {
        DeviceRange::from_raw(
            ctx,
            ptr,
            d.byte_len as usize,
            d.device.device_id,
            access,
            close,
            alive,
        )
    };
    // From here dropping `storage` closes the handle, then the liveness fd.
    let (_, size) = address_range(ptr)?;
    if (size as u64) < d.byte_len {
        return Err(Error::Layout(
            dlport_core::error::LayoutError::StorageTooSmall {
                needed: d.byte_len,
                available: size as u64,
            },
        ));
    }
    ExportBuilder::new(storage, d.dtype, &d.shape)
        .strides(&d.strides)
        .byte_offset(d.byte_offset)
        .read_only(d.flags & FLAG_READ_ONLY != 0)
        .subbyte_padded(d.flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0)
        .build()
}
