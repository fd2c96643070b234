//! Host memory in sealed memfds (Linux): allocation, mappings, the registry that tells dlport's
//! mappings from other memory, and the checks a received fd passes before it is mapped.
//!
//! Every memfd dlport makes is sealed with `F_SEAL_SHRINK | F_SEAL_GROW` as soon as it has its
//! size, so no process can truncate it under a mapping (which would turn reads into SIGBUS), and
//! with `F_SEAL_SEAL` when it is first shared, so no peer changes its seals. A read-only share
//! first seals the memfd itself (the inode, not one fd) with `F_SEAL_FUTURE_WRITE`: from then on
//! no process, whatever fd it holds or reopens (`/proc/<pid>/fd/N` with `O_RDWR` included), can
//! write it, map it writable, `mprotect` a mapping writable or punch a hole in it, while the
//! mappings made before (the producer's) keep writing. A memfd whose seals are fixed otherwise
//! (shared writable before), or a kernel without `F_SEAL_FUTURE_WRITE` (Linux < 5.1), makes a
//! read-only share a copy into a new memfd sealed with `F_SEAL_WRITE`, as the copy policy
//! allows. A received fd is mapped only if it is an open regular file that carries
//! `F_SEAL_SHRINK` (and, for a READ_ONLY descriptor, a write seal) and is at least `byte_len`
//! bytes long: a pipe, a device, an ordinary file, an unsealed memfd or a "read-only" one anybody
//! could write is refused before anything is mapped.
//!
//! The memory lives while any process maps it or holds its fd; the kernel counts both, so a
//! peer that is killed lets go of its share when it dies, and the producer's own release
//! (dropping its tensor) never waits for, or depends on, a peer.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use dlport_core::abi::{FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use dlport_core::backend::{Access, MemoryClass, TensorStorage, compact_bytes};
use dlport_core::{CopyPolicy, DataType, Device, Error, ExportBuilder, ManagedTensor, TensorRef};

use super::descriptor::{Descriptor, HandleKind};
use super::errors::{copy_needed, errno, os_error, unsupported};
use super::options::ShareOptions;

/// Mappings made (allocations and opened descriptors) and unmapped, in this process.
static MAPPED: AtomicU64 = AtomicU64::new(0);
static UNMAPPED: AtomicU64 = AtomicU64::new(0);

pub(super) fn counts() -> (u64, u64) {
    (
        MAPPED.load(Ordering::SeqCst),
        UNMAPPED.load(Ordering::SeqCst),
    )
}

/// A memfd mapped into this process (`MAP_SHARED`), with its fd kept for sharing it on. Unmapped
/// once, when the last tensor over it is released.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
    writable: bool,
}

// SAFETY: the mapping is plain shared memory owned by this value until drop; the pointer is
// only handed to tensors, and the fd is an ordinary owned descriptor.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` only reads the immutable fields.
unsafe impl Sync for Mapping {}

/// dlport's live mappings by start address (non-empty ones only).
static REGISTRY: Mutex<BTreeMap<usize, Weak<Mapping>>> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, BTreeMap<usize, Weak<Mapping>>> {
    // A poisoned lock only means a panic elsewhere; every update leaves the map consistent.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

impl Mapping {
    /// Maps `len` bytes of `fd` (taken) shared, writable or not, and registers the range.
    fn new(fd: OwnedFd, len: usize, writable: bool) -> Result<Arc<Self>, Error> {
        let ptr = if len == 0 {
            NonNull::<u64>::dangling().cast()
        } else {
            let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
            // SAFETY: a fresh shared mapping chosen by the kernel (NULL hint); it overlaps no
            // Rust object. The fd is a sealed memfd of at least `len` bytes (checked by the
            // callers), so every mapped page is backed and cannot be truncated away.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    prot,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(os_error(
                    "mmap",
                    errno(),
                    "mapping the shared memory failed (ENOMEM: address space or \
                     vm.max_map_count exhausted; EACCES: the fd is read-only)",
                ));
            }
            NonNull::new(p.cast::<u8>()).ok_or_else(|| os_error("mmap", 0, "returned NULL"))?
        };
        MAPPED.fetch_add(1, Ordering::SeqCst);
        let m = Arc::new(Self {
            ptr,
            len,
            fd,
            writable,
        });
        if len != 0 {
            registry().insert(ptr.as_ptr() as usize, Arc::downgrade(&m));
        }
        Ok(m)
    }

    /// The bytes of a mapping nobody else can reach yet (just created, its fd not shared).
    fn fresh_bytes(self: &mut Arc<Self>) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: `len` mapped, writable bytes; the caller's `&mut Arc` of a mapping whose fd
        // and pointer have not left this function's caller means nothing else reads or writes
        // them while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len != 0 {
            let mut r = registry();
            // Only this mapping can sit at this address until it is unmapped below.
            r.remove(&(self.ptr.as_ptr() as usize));
            drop(r);
            // SAFETY: the range mapped in `new`, unmapped once; no tensor views it any more
            // (every tensor holds an Arc of this mapping).
            unsafe { libc::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len) };
        }
        UNMAPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A mapping as the storage of an exported tensor.
struct MapStorage(Arc<Mapping>);

// SAFETY: the mapping's pointer is fixed for its life and `len` bytes are valid behind it; the
// memory is shared with other processes (Access::Shared), or read-only when mapped without
// PROT_WRITE (Access::ReadOnly, so the export carries READ_ONLY and nobody gets `&mut`).
unsafe impl TensorStorage for MapStorage {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.ptr.as_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len
    }
    fn access(&self) -> Access {
        if self.0.writable {
            Access::Shared
        } else {
            Access::ReadOnly
        }
    }
}

/// A DLPack tensor over a mapping (keeps it mapped until released).
fn export(
    m: Arc<Mapping>,
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    byte_offset: u64,
    flags: u64,
) -> Result<ManagedTensor, Error> {
    let mut b = ExportBuilder::new(MapStorage(m), dtype, shape)
        .byte_offset(byte_offset)
        .read_only(flags & FLAG_READ_ONLY != 0)
        .subbyte_padded(flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0);
    if let Some(s) = strides {
        b = b.strides(s);
    }
    b.build()
}

/// The seals of every shared memfd: nobody resizes it (a shrink would make the producer's next
/// read of a cut page SIGBUS) and nobody changes its seals after it left (a peer adding a write
/// seal would take back what a writable share promised the others).
const SHARE_SEALS: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Either write seal: `F_SEAL_WRITE` (no writable mapping anywhere) or `F_SEAL_FUTURE_WRITE`
/// (none made from now on; those made before keep writing).
const WRITE_SEALS: i32 = libc::F_SEAL_WRITE | libc::F_SEAL_FUTURE_WRITE;

/// Why a memfd cannot be shared as asked without a copy (the `operation` of an `Unsupported`
/// error under `CopyPolicy::Never`).
const READ_ONLY_AFTER_WRITABLE: &str = "sharing this memfd read-only without a copy: it was \
    shared writable before, so its seals are fixed (F_SEAL_SEAL) and no write seal can be added \
    (its writable peers keep writing it); allow a copy (CopyPolicy::IfNeeded shares a \
    write-sealed snapshot)";
const WRITABLE_AFTER_READ_ONLY: &str = "sharing this memfd writable without a copy: it was \
    shared read-only before, so it is sealed against every new writable mapping \
    (F_SEAL_FUTURE_WRITE); allow a copy (CopyPolicy::IfNeeded shares a writable copy)";
const NO_FUTURE_WRITE: &str = "sharing this memfd read-only without a copy: this kernel has no \
    F_SEAL_FUTURE_WRITE (Linux older than 5.1), which seals it against the peers while the \
    producer's mapping keeps writing; allow a copy (CopyPolicy::IfNeeded shares a write-sealed \
    snapshot)";
const SEALS_FIXED: &str = "sharing this memfd without a copy: it lacks seals the share needs \
    (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, and a write seal for a read-only share) and \
    they cannot be added here (a memfd received read-only, or sealed differently by the process \
    that made it); allow a copy (CopyPolicy::IfNeeded)";

/// The seals of `fd`'s file.
fn seals(fd: BorrowedFd<'_>) -> Result<i32, Error> {
    // SAFETY: F_GET_SEALS only reads the file's seals.
    let s = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if s < 0 {
        return Err(os_error(
            "fcntl(F_GET_SEALS)",
            errno(),
            "reading the seals of the shared memory failed",
        ));
    }
    Ok(s)
}

/// Gives one of dlport's memfds the seals a share needs: [`SHARE_SEALS`], and for a read-only
/// share `F_SEAL_FUTURE_WRITE` (unless it has a write seal already). `Ok(Err(why))` where that
/// cannot be done (the share then needs a copy): a writable share of a write-sealed memfd, seals
/// fixed before, or a kernel without `F_SEAL_FUTURE_WRITE`.
fn seal_for_share(fd: BorrowedFd<'_>, read_only: bool) -> Result<Result<(), &'static str>, Error> {
    // Twice: another thread may seal the same memfd between the read and the add (EPERM).
    for _ in 0..2 {
        let have = seals(fd)?;
        let write_sealed = have & WRITE_SEALS != 0;
        if !read_only && write_sealed {
            return Ok(Err(WRITABLE_AFTER_READ_ONLY));
        }
        let want = SHARE_SEALS
            | if read_only && !write_sealed {
                libc::F_SEAL_FUTURE_WRITE
            } else {
                0
            };
        let missing = want & !have;
        if missing == 0 {
            return Ok(Ok(()));
        }
        if have & libc::F_SEAL_SEAL != 0 {
            return Ok(Err(if read_only && !write_sealed {
                READ_ONLY_AFTER_WRITABLE
            } else {
                SEALS_FIXED
            }));
        }
        // SAFETY: adds seals to a memfd this process maps; it only restricts what every holder
        // of the file may do from now on (existing mappings keep their access).
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, missing) } == 0 {
            return Ok(Ok(()));
        }
        match errno() {
            e if e == i64::from(libc::EINVAL) && missing & libc::F_SEAL_FUTURE_WRITE != 0 => {
                return Ok(Err(NO_FUTURE_WRITE));
            }
            // Sealed meanwhile (read again), or an fd that is not writable here.
            e if e == i64::from(libc::EPERM) => {}
            e => {
                return Err(os_error(
                    "fcntl(F_ADD_SEALS)",
                    e,
                    "sealing the shared memory failed",
                ));
            }
        }
    }
    Ok(Err(SEALS_FIXED))
}

/// Seals a copy made for a share once it is filled (no mapping of it is left): against every
/// write (`F_SEAL_WRITE`) for a read-only share, and against seal changes either way.
fn seal_copy(fd: BorrowedFd<'_>, read_only: bool) -> Result<(), Error> {
    let add = libc::F_SEAL_SEAL | if read_only { libc::F_SEAL_WRITE } else { 0 };
    // SAFETY: adds seals to the memfd we created; nothing maps it any more.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, add) } != 0 {
        return Err(os_error(
            "fcntl(F_ADD_SEALS)",
            errno(),
            "sealing the shared copy failed (EBUSY: a writable mapping of it is left)",
        ));
    }
    Ok(())
}

/// A new memfd of `len` bytes (zero-filled by the kernel), sealed against resizing; its other
/// seals come when it is shared ([`seal_for_share`], [`seal_copy`]).
fn create(len: usize) -> Result<OwnedFd, Error> {
    // SAFETY: a NUL-terminated name; memfd_create only creates a descriptor.
    let raw = unsafe {
        libc::memfd_create(
            c"dlport".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if raw < 0 {
        return Err(os_error(
            "memfd_create",
            errno(),
            "creating shared memory failed (EMFILE: too many open files; ENOSYS: kernel \
             older than 3.17)",
        ));
    }
    // SAFETY: a descriptor just created, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: resizes the file we own; no mapping exists yet.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(os_error(
            "ftruncate",
            errno(),
            "sizing the shared memory failed (ENOSPC/ENOMEM: not enough memory or tmpfs space)",
        ));
    }
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    // SAFETY: adds seals to the memfd we own.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(os_error(
            "fcntl(F_ADD_SEALS)",
            errno(),
            "sealing the shared memory failed",
        ));
    }
    Ok(fd)
}

/// Checks a memfd of `bytes` against the limit in force, as a registry copy is checked: the
/// lowest of the call's `max_alloc`, the default registry's and the process's
/// (`Registry::alloc_limit` of the default in force; the process's alone before one is).
fn check_copy(bytes: usize, max_alloc: Option<u64>) -> Result<(), Error> {
    // A `max_alloc` of 0 stays 0 here, which `check_alloc` refuses as a limit.
    let limit =
        dlport_core::Registry::get_default().map_or(max_alloc, |r| Some(r.alloc_limit(max_alloc)));
    dlport_core::backend::check_alloc(bytes as u128, limit)
}

/// A zeroed, compact tensor in a new sealed memfd (see [`super::alloc`]).
pub(super) fn alloc(
    dtype: DataType,
    shape: &[i64],
    limit: Option<u64>,
) -> Result<ManagedTensor, Error> {
    let bytes = compact_bytes(dtype, shape)?;
    check_copy(bytes, limit)?;
    let m = Mapping::new(create(bytes)?, bytes, true)?;
    export(m, dtype, shape, None, 0, 0)
}

/// The live dlport mapping that holds `[lo, hi)`, if any.
fn find(lo: usize, hi: usize) -> Option<Arc<Mapping>> {
    let r = registry();
    let (&start, weak) = r.range(..=lo).next_back()?;
    let m = weak.upgrade()?;
    (hi <= start + m.len).then_some(m)
}

fn dup(fd: BorrowedFd<'_>) -> Result<OwnedFd, Error> {
    fd.try_clone_to_owned().map_err(|e| {
        os_error(
            "fcntl(F_DUPFD_CLOEXEC)",
            i64::from(e.raw_os_error().unwrap_or(0)),
            "duplicating the memfd failed (EMFILE: too many open files)",
        )
    })
}

/// A read-only descriptor of the same memfd (a new open file description through
/// `/proc/self/fd`), so a peer cannot add seals or write through the fd it was given even
/// before the write seal is looked at; `None` where `/proc` is not mounted (the memfd's write
/// seal is what makes a read-only share unwritable, with either fd).
fn reopen_read_only(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    // SAFETY: a NUL-terminated path; open only creates a descriptor.
    let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    // SAFETY: a descriptor just opened, owned by nobody else.
    (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Host memory as a descriptor and its memfd: dlport's own mapping without a copy, anything
/// else copied into a new memfd as `options.copy` allows.
pub(super) fn share(
    view: &TensorRef<'_>,
    options: &ShareOptions,
) -> Result<(Descriptor, OwnedFd, bool), Error> {
    if view.device().memory_class() == MemoryClass::Managed {
        // Unified memory is host-readable once the devices are synchronised.
        crate::sync_managed()?;
    }
    let read_only = options.read_only || view.is_read_only();
    let padded = view.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED;
    let found = match (view.first_element_address(), view.numel()) {
        (Some(first), n) if n != 0 && options.copy != CopyPolicy::Always => {
            let span = view.byte_span();
            let lo = (first as i128 + i128::from(span.lo)) as usize;
            let hi = (first as i128 + i128::from(span.hi)) as usize;
            find(lo, hi).map(|m| (m, first))
        }
        _ => None,
    };
    // Why the memfd found cannot be shared as asked (then it is copied, as the policy allows).
    let mut why_copy = None;
    if let Some((m, _)) = &found {
        if let Err(why) = seal_for_share(m.fd.as_fd(), read_only)? {
            why_copy = Some(why);
        }
    }
    let (descriptor, fd, copied) = if let (Some((m, first)), None) = (found, why_copy) {
        let d = Descriptor {
            kind: HandleKind::Memfd,
            device: Device::cpu(),
            dtype: view.dtype(),
            shape: view.shape().to_vec(),
            strides: view.strides().collect(),
            byte_offset: (first - m.ptr.as_ptr() as usize) as u64,
            byte_len: m.len as u64,
            flags: padded | if read_only { FLAG_READ_ONLY } else { 0 },
            handle: Vec::new(),
        };
        let fd = if read_only {
            reopen_read_only(m.fd.as_fd()).map_or_else(|| dup(m.fd.as_fd()), Ok)?
        } else {
            dup(m.fd.as_fd())?
        };
        (d, fd, false)
    } else {
        if options.copy == CopyPolicy::Never && view.numel() != 0 {
            return Err(why_copy.map_or_else(|| copy_needed(view.device()), unsupported));
        }
        let bytes = compact_bytes(view.dtype(), view.shape())?;
        check_copy(bytes, options.max_alloc)?;
        let fd = create(bytes)?;
        if view.contiguity().is_row_major() && !view.is_subbyte_padded() {
            // Already compact: one pwrite fills the memfd's pages in the kernel, without a
            // mapping here (and without a page fault per page).
            let src = view.as_bytes()?;
            std::fs::File::from(dup(fd.as_fd())?)
                .write_all_at(src, 0)
                .map_err(|e| {
                    os_error(
                        "pwrite",
                        i64::from(e.raw_os_error().unwrap_or(0)),
                        "copying into the shared memory failed (ENOSPC/ENOMEM: not enough \
                         memory or tmpfs space)",
                    )
                })?;
        } else {
            // The producer's mapping of the copy is unmapped before the seals (F_SEAL_WRITE
            // needs no writable mapping left); the peer maps its own.
            let mut m = Mapping::new(dup(fd.as_fd())?, bytes, true)?;
            view.copy_to_compact(m.fresh_bytes())?;
            drop(m);
        }
        seal_copy(fd.as_fd(), read_only)?;
        let fd = if read_only {
            reopen_read_only(fd.as_fd()).unwrap_or(fd)
        } else {
            fd
        };
        let mut strides = vec![0i64; view.ndim()];
        dlport_core::layout::compact_row_major(view.shape(), &mut strides)?;
        let d = Descriptor {
            kind: HandleKind::Memfd,
            device: Device::cpu(),
            dtype: view.dtype(),
            shape: view.shape().to_vec(),
            strides,
            byte_offset: 0,
            byte_len: bytes as u64,
            // The copy is packed: IS_SUBBYTE_TYPE_PADDED does not travel.
            flags: if read_only { FLAG_READ_ONLY } else { 0 },
            handle: Vec::new(),
        };
        (d, fd, true)
    };
    descriptor.validate()?;
    Ok((descriptor, fd, copied))
}

/// Checks a received fd and reports whether it may be mapped writable. In order: open
/// (`F_GETFD`), a regular file (`fstat`), sealed against shrinking (`F_GET_SEALS`), for a
/// READ_ONLY descriptor sealed against writes, at least `byte_len` bytes long; then its access
/// mode and write seals.
fn check_fd(fd: BorrowedFd<'_>, byte_len: u64, read_only: bool) -> Result<bool, Error> {
    let raw = fd.as_raw_fd();
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
        return Err(os_error(
            "fcntl(F_GETFD)",
            errno(),
            "the fd is not open in this process: pass the fd received with the descriptor, \
             before closing it",
        ));
    }
    // SAFETY: all-zero is a valid `stat`; fstat writes it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable stat struct.
    if unsafe { libc::fstat(raw, &mut st) } != 0 {
        return Err(os_error("fstat", errno(), "the fd cannot be inspected"));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(os_error(
            "fstat",
            i64::from(st.st_mode & libc::S_IFMT),
            "the fd is not a memfd (the code is its file type, S_IFMT; a memfd is a regular \
             file, 0o100000): only fds from dlport's share can be opened",
        ));
    }
    // SAFETY: F_GET_SEALS only reads the file's seals.
    let seals = unsafe { libc::fcntl(raw, libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(os_error(
            "fcntl(F_GET_SEALS)",
            errno(),
            "the fd is not a memfd (its file has no seals): only fds from dlport's share can \
             be opened; a plain file could be truncated under the mapping",
        ));
    }
    if seals & libc::F_SEAL_SHRINK == 0 {
        return Err(os_error(
            "fcntl(F_GET_SEALS)",
            i64::from(seals),
            "the memfd is not sealed against shrinking (F_SEAL_SHRINK; the code is its seals), \
             so it could be truncated under the mapping (SIGBUS): share it through dlport, \
             which seals it",
        ));
    }
    if read_only && seals & WRITE_SEALS == 0 {
        return Err(os_error(
            "fcntl(F_GET_SEALS)",
            i64::from(seals),
            "the descriptor says READ_ONLY, but its memfd carries no write seal (F_SEAL_WRITE \
             or F_SEAL_FUTURE_WRITE; the code is its seals): any process holding the fd could \
             reopen it writable and write the memory. Refused: dlport's share write-seals every \
             read-only share; the producer did not",
        ));
    }
    let size = st.st_size.max(0) as u64;
    if size < byte_len {
        return Err(Error::Layout(
            dlport_core::error::LayoutError::StorageTooSmall {
                needed: byte_len,
                available: size,
            },
        ));
    }
    // SAFETY: F_GETFL only reads the descriptor's status flags.
    let mode = unsafe { libc::fcntl(raw, libc::F_GETFL) } & libc::O_ACCMODE;
    let write_sealed = seals & (libc::F_SEAL_WRITE | libc::F_SEAL_FUTURE_WRITE) != 0;
    Ok(mode == libc::O_RDWR && !write_sealed)
}

/// Maps a memfd descriptor (validated by the caller) as a DLPack tensor; READ_ONLY when the
/// descriptor says so or the fd cannot be mapped writable.
pub(super) fn open(d: &Descriptor, fd: BorrowedFd<'_>) -> Result<ManagedTensor, Error> {
    let read_only = d.flags & FLAG_READ_ONLY != 0;
    let writable = check_fd(fd, d.byte_len, read_only)? && !read_only;
    let m = Mapping::new(dup(fd)?, d.byte_len as usize, writable)?;
    let flags = d.flags | if writable { 0 } else { FLAG_READ_ONLY };
    export(m, d.dtype, &d.shape, Some(&d.strides), d.byte_offset, flags)
}
