//! The C entries of dlport-native's [`share`](dlport_native::share): tensors shared with another
//! process (`dlport_share_*`, `dlport_shared_*`), with the conventions of every other entry
//! (`ffi`): a status code, the message in `dlport_last_error()`, no unwinding. The work with
//! fds is in `sys`: below for Linux, its stub elsewhere, where every entry that would share,
//! send, receive or open returns `DLPORT_ERR_UNSUPPORTED`.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use dlport_core::abi::TypeCode;
use dlport_core::{DataType, Error};

use dlport_native::share::{self as native_share, DESCRIPTOR_MAX};

use crate::ffi::{Failure, arg, copy_arg, entry, give, out_ptr, take};

/// The longest share descriptor, in bytes: what a buffer must hold to receive any descriptor
/// through a transport of the caller's own.
pub const DLPORT_SHARE_DESCRIPTOR_MAX: usize = 1144;

const _: () = assert!(DLPORT_SHARE_DESCRIPTOR_MAX == DESCRIPTOR_MAX);

/// A shared tensor as it travels: a descriptor (bytes) and the file descriptors that go with
/// it, owned by this value. Made by `dlport_share` or `dlport_share_recv`; freed (its fds
/// closed) by `dlport_shared_free`.
pub struct DlportShared {
    bytes: Vec<u8>,
    raw_fds: Vec<c_int>,
    /// What owns the fds (and sends them). Off Linux no handle is ever made.
    #[cfg_attr(not(memfd_share), allow(dead_code))]
    shared: sys::Owner,
}

fn shared_ref<'a>(shared: *const DlportShared) -> Result<&'a DlportShared, Failure> {
    // SAFETY: NULL or a live handle (the callers' contract).
    unsafe { shared.as_ref() }.ok_or_else(|| arg("shared is NULL"))
}

/// Allocates a zeroed, compact host tensor in a new sealed memfd, which `dlport_share` then
/// shares without a copy. `shape` holds `ndim` extents (NULL when `ndim` is 0). The tensor's
/// memory is shared with every process that opens it: once shared, others may write it.
///
/// Ownership: on success `*out` is a new managed tensor (versioned when `to_versioned` is
/// non-zero) the caller releases once; on error nothing is allocated or written.
///
/// # Safety
/// `shape` is readable for `ndim` values; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_share_alloc(
    code: u8,
    bits: u8,
    lanes: u16,
    shape: *const i64,
    ndim: i32,
    to_versioned: c_int,
    out: *mut *mut c_void,
) -> c_int {
    entry(|| {
        let out = out_ptr(out, "out")?;
        let n = dlport_core::layout::check_ndim(i64::from(ndim))?;
        if n > 0 && shape.is_null() {
            return Err(Error::Layout(dlport_core::error::LayoutError::NullShape { ndim }).into());
        }
        let shape = if n == 0 {
            &[][..]
        } else {
            // SAFETY: `n` readable values (contract), bounded by MAX_NDIM.
            unsafe { std::slice::from_raw_parts(shape, n) }
        };
        let dtype = DataType::new(TypeCode(code), bits, lanes);
        give(sys::alloc(dtype, shape)?, to_versioned != 0, out)
    })
}

/// CONSUMING. Shares a managed tensor with other processes. Host memory in one of dlport's
/// memfds (`dlport_share_alloc`, or a tensor opened with `dlport_share_open`) is shared
/// without a copy; other host memory is copied into a new memfd as `copy` allows (a
/// `DlportCopy`; with `DLPORT_COPY_NEVER` it is `DLPORT_ERR_COPY_REQUIRED`, saying why).
/// CUDA device memory (a build with the `cuda` feature) travels as a CUDA IPC handle, and the
/// tensor is kept until `*out` and every consumer's handle are gone, or the consumers died.
/// `read_only` non-zero gives peers the tensor READ_ONLY, in memory no process that receives it
/// can write, whatever it does with the fd (reopening `/proc/<pid>/fd/N` with `O_RDWR`,
/// `mmap(PROT_WRITE)`, `mprotect`, `ftruncate`, `pwrite`, `fallocate`, `F_ADD_SEALS`, passing it
/// on): one of dlport's memfds is sealed `F_SEAL_FUTURE_WRITE` (Linux 5.1 or later; mappings
/// made before, the producer's, keep writing, and the peers see those writes), and anything
/// else is a copy into a memfd sealed `F_SEAL_WRITE` (memory that is not a memfd of dlport's,
/// a memfd shared writable before, an older kernel), which `DLPORT_COPY_NEVER` refuses with
/// `DLPORT_ERR_UNSUPPORTED` saying why. A memfd shared read-only is shared writable only as a
/// copy after. CUDA memory cannot be shared read-only (CUDA IPC maps it writable in every
/// process): `DLPORT_ERR_UNSUPPORTED`. Every shared memfd is sealed against resizing and seal
/// changes, so no peer can shrink it under the producer (SIGBUS).
///
/// Ownership: takes `managed` on every path (host memory is released before this returns: the
/// memfd keeps the bytes). On success `*out` is a new handle the caller frees with
/// `dlport_shared_free` once it was sent (or is no longer needed).
///
/// # Safety
/// As `dlport_release` for `managed`; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_share(
    managed: *mut c_void,
    versioned: c_int,
    copy: i32,
    read_only: c_int,
    out: *mut *mut DlportShared,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded contract; ownership is taken first.
        let m = unsafe { take(managed, versioned) }?;
        let out = out_ptr(out, "out")?;
        let options = native_share::ShareOptions {
            copy: copy_arg(copy)?,
            read_only: read_only != 0,
            max_alloc: None,
        };
        let shared = sys::share(m, &options)?;
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(Box::into_raw(shared)) };
        Ok(())
    })
}

/// The descriptor's bytes (at most `DLPORT_SHARE_DESCRIPTOR_MAX`), for a transport of the
/// caller's own; `dlport_share_send` sends them with the fds over a Unix socket.
///
/// Ownership: nothing is transferred; the bytes belong to `shared` (valid until
/// `dlport_shared_free`).
///
/// # Safety
/// `shared` is a live handle; the out pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_shared_descriptor(
    shared: *const DlportShared,
    bytes_out: *mut *const u8,
    len_out: *mut usize,
) -> c_int {
    entry(|| {
        let s = shared_ref(shared)?;
        let b = out_ptr(bytes_out, "bytes_out")?;
        let l = out_ptr(len_out, "len_out")?;
        // SAFETY: writable (contract).
        unsafe {
            b.as_ptr().write(s.bytes.as_ptr());
            l.as_ptr().write(s.bytes.len());
        }
        Ok(())
    })
}

/// The file descriptors that travel with the descriptor, in order.
///
/// Ownership: nothing is transferred; the fds belong to `shared` and are closed by
/// `dlport_shared_free` (`dup` one to keep it).
///
/// # Safety
/// `shared` is a live handle; the out pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_shared_fds(
    shared: *const DlportShared,
    fds_out: *mut *const c_int,
    count_out: *mut usize,
) -> c_int {
    entry(|| {
        let s = shared_ref(shared)?;
        let f = out_ptr(fds_out, "fds_out")?;
        let c = out_ptr(count_out, "count_out")?;
        // SAFETY: writable (contract).
        unsafe {
            f.as_ptr().write(s.raw_fds.as_ptr());
            c.as_ptr().write(s.raw_fds.len());
        }
        Ok(())
    })
}

/// Frees a handle from `dlport_share` or `dlport_share_recv` and closes its fds (NULL is
/// ignored). The shared memory stays while any process maps it.
///
/// Ownership: takes `shared`, which must not be used again.
///
/// # Safety
/// `shared` is NULL or a handle from dlport, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_shared_free(shared: *mut DlportShared) {
    let _ = entry(|| {
        if !shared.is_null() {
            // SAFETY: created by Box::into_raw in dlport (contract).
            drop(unsafe { Box::from_raw(shared) });
        }
        Ok(())
    });
}

/// Sends the descriptor and its fds over a connected Unix stream socket (`SCM_RIGHTS`): one
/// frame, a 4-byte little-endian length and the descriptor, with the fds attached.
///
/// Ownership: nothing is transferred: `shared` keeps its fds (the peer receives duplicates).
///
/// # Safety
/// `shared` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_share_send(shared: *const DlportShared, socket: c_int) -> c_int {
    entry(|| {
        let s = shared_ref(shared)?;
        sys::send(s, socket)
    })
}

/// Receives one descriptor and its fds from a connected Unix stream socket, and checks the
/// descriptor (a bad one, or a wrong number of fds, is an error and the fds that came with it
/// are closed).
///
/// Ownership: on success `*out` is a new handle that owns the received fds; the caller opens
/// it with `dlport_share_open` and frees it with `dlport_shared_free`.
///
/// # Safety
/// `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_share_recv(socket: c_int, out: *mut *mut DlportShared) -> c_int {
    entry(|| {
        let out = out_ptr(out, "out")?;
        let boxed = sys::recv(socket)?;
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(Box::into_raw(boxed)) };
        Ok(())
    })
}

/// Opens a descriptor in this process: a zero-copy managed tensor over the shared memory
/// (versioned when `to_versioned` is non-zero) whose deleter unmaps it. `bytes`/`len` are the
/// descriptor, `fds`/`nfds` the fds that came with it. Everything is checked before anything
/// is mapped: truncated or trailing bytes, a format version from the future, every tensor
/// field, the fd count, and each fd (open, a memfd sealed against shrinking, for a READ_ONLY
/// descriptor sealed against writes, at least as large as the descriptor says); each failure
/// names the field and its value.
///
/// Ownership: the bytes and fds stay the caller's (close the fds when done; the mapping does
/// not need them). On success `*out` is a new managed tensor the caller releases once.
///
/// # Safety
/// `bytes` is readable for `len` bytes; `fds` for `nfds` values (may be NULL when `nfds` is 0);
/// the fds stay open during the call; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_share_open(
    bytes: *const u8,
    len: usize,
    fds: *const c_int,
    nfds: usize,
    to_versioned: c_int,
    out: *mut *mut c_void,
) -> c_int {
    entry(|| {
        let out = out_ptr(out, "out")?;
        if bytes.is_null() {
            return Err(arg("bytes is NULL: pass the descriptor's bytes"));
        }
        if nfds > native_share::MAX_FDS {
            return Err(arg(format!(
                "nfds = {nfds} is more than a descriptor carries (at most 4)"
            )));
        }
        if nfds > 0 && fds.is_null() {
            return Err(arg(format!("fds is NULL, but nfds = {nfds}")));
        }
        // SAFETY: `len` readable bytes (contract).
        let descriptor = native_share::Descriptor::from_bytes(unsafe {
            std::slice::from_raw_parts(bytes, len)
        })?;
        let raw: &[c_int] = if nfds == 0 {
            &[]
        } else {
            // SAFETY: `nfds` readable values (contract), at most 4.
            unsafe { std::slice::from_raw_parts(fds, nfds) }
        };
        give(sys::open(&descriptor, raw)?, to_versioned != 0, out)
    })
}

/// How many shared-memory mappings this process made (`dlport_share_alloc` and opened
/// descriptors) and how many it unmapped; equal once every such tensor was released. Either
/// pointer may be NULL.
///
/// Ownership: nothing is transferred.
///
/// # Safety
/// Non-NULL pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_share_mapping_counts(mapped: *mut u64, unmapped: *mut u64) {
    let (m, u) = native_share::mapping_counts();
    for (p, v) in [(mapped, m), (unmapped, u)] {
        if let Some(p) = NonNull::new(p) {
            // SAFETY: non-NULL and writable (contract).
            unsafe { p.as_ptr().write(v) };
        }
    }
}

/// The entries' work with fds on Linux: C fd arguments checked and borrowed, the Rust API of
/// [`share`](dlport_native::share) called with them, and a shared tensor's fds kept in its
/// handle.
#[cfg(memfd_share)]
mod sys {
    use std::ffi::c_int;
    use std::os::fd::{AsRawFd, BorrowedFd};

    use dlport_core::{DataType, Error, ManagedTensor};
    use dlport_native::share::{self, Descriptor, ShareOptions, Shared};

    use super::DlportShared;
    use crate::ffi::{Failure, arg};

    /// What a shared tensor's handle keeps: the descriptor and its open fds.
    pub(super) type Owner = Shared;

    impl DlportShared {
        fn new(shared: Shared) -> Result<Box<Self>, Error> {
            Ok(Box::new(Self {
                bytes: shared.descriptor().to_bytes()?,
                raw_fds: shared.fds().iter().map(AsRawFd::as_raw_fd).collect(),
                shared,
            }))
        }
    }

    /// Checks a C fd argument: not negative, and open in this process.
    fn fd_arg<'a>(fd: c_int, name: &str) -> Result<BorrowedFd<'a>, Failure> {
        if fd < 0 {
            return Err(arg(format!(
                "{name} = {fd} is not a file descriptor: pass an open one"
            )));
        }
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(arg(format!(
                "{name} = {fd} is not open in this process (EBADF): pass the fd received with \
                 the descriptor, before closing it"
            )));
        }
        // SAFETY: checked open just above; the caller keeps it open for the call (contract).
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    pub(super) fn alloc(dtype: DataType, shape: &[i64]) -> Result<ManagedTensor, Error> {
        share::alloc(dtype, shape)
    }

    pub(super) fn share(
        m: ManagedTensor,
        options: &ShareOptions,
    ) -> Result<Box<DlportShared>, Error> {
        DlportShared::new(share::share_managed(m, options)?)
    }

    pub(super) fn send(s: &DlportShared, socket: c_int) -> Result<(), Failure> {
        let socket = fd_arg(socket, "socket")?;
        // The handle's fds are still open (a caller may have closed one it read with
        // `dlport_shared_fds`): the same check as for every other fd.
        for &fd in &s.raw_fds {
            fd_arg(fd, "a shared fd")?;
        }
        Ok(s.shared.send(&socket)?)
    }

    pub(super) fn recv(socket: c_int) -> Result<Box<DlportShared>, Failure> {
        let shared = Shared::recv(&fd_arg(socket, "socket")?)?;
        Ok(DlportShared::new(shared)?)
    }

    pub(super) fn open(descriptor: &Descriptor, raw: &[c_int]) -> Result<ManagedTensor, Failure> {
        let borrowed = raw
            .iter()
            .enumerate()
            .map(|(i, &fd)| fd_arg(fd, &format!("fds[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(share::open(descriptor, &borrowed)?)
    }
}

/// The entries' work with fds where there are no memfds: every entry that would share, send,
/// receive or open refuses with `DLPORT_ERR_UNSUPPORTED`, as dlport-native's Rust API does.
#[cfg(not(memfd_share))]
mod sys {
    use std::ffi::c_int;

    use dlport_core::error::BackendError;
    use dlport_core::{DataType, Error, ManagedTensor};
    use dlport_native::share::{Descriptor, NAME, ShareOptions};

    use super::DlportShared;
    use crate::ffi::Failure;

    /// No fd travels on this platform: no handle is ever made.
    pub(super) enum Owner {}

    /// What sharing is on a platform without memfd seals.
    const PLATFORM: &str = "sharing tensors between processes on this platform (memfd seals and \
                            SCM_RIGHTS as Linux has them; Linux only in this release)";

    fn unsupported() -> Error {
        BackendError::unsupported(NAME, PLATFORM).into()
    }

    pub(super) fn alloc(_: DataType, _: &[i64]) -> Result<ManagedTensor, Error> {
        Err(unsupported())
    }

    pub(super) fn share(_: ManagedTensor, _: &ShareOptions) -> Result<Box<DlportShared>, Error> {
        Err(unsupported())
    }

    pub(super) fn send(_: &DlportShared, _: c_int) -> Result<(), Failure> {
        Err(unsupported().into())
    }

    pub(super) fn recv(_: c_int) -> Result<Box<DlportShared>, Failure> {
        Err(unsupported().into())
    }

    pub(super) fn open(_: &Descriptor, _: &[c_int]) -> Result<ManagedTensor, Failure> {
        Err(unsupported().into())
    }
}
