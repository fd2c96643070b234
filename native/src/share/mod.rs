//! Tensors shared with another process on the same machine, through the OS's own mechanisms.
//!
//! A tensor travels as a [`Descriptor`] (a small versioned value: dtype, shape, strides, byte
//! offset and length, device, flags, kind of handle) plus file descriptors:
//! - **host memory** lives in a sealed memfd, mapped `MAP_SHARED` by every process that opens
//!   it; the fd travels over a Unix socket with `SCM_RIGHTS` ([`Shared::send`],
//!   [`Shared::recv`]);
//! - **CUDA device memory** (feature `cuda`) travels as a `cuIpcGetMemHandle` handle plus one fd
//!   that keeps the producer's tensor alive until every consumer has let go.
//!
//! The opening process gets a zero-copy DLPack tensor ([`open`]) whose deleter unmaps (or closes
//! the IPC handle). The memory lives while any process maps it; the kernel counts the mappings
//! and fds, so a consumer killed with SIGKILL lets go when it dies, and the producer's own
//! release (dropping its tensor) runs exactly once, whatever its peers do.
//!
//! Memory dlport did not put in a memfd ([`alloc`] does) is copied into a new one only as
//! [`ShareOptions::copy`] allows.
//!
//! # Read-only shares
//!
//! A READ_ONLY share ([`ShareOptions::read_only`], or a read-only tensor) is unwritable by every
//! process that receives it, whatever it does with the fd: reopening `/proc/self/fd/N` or
//! `/proc/<pid>/fd/N` with `O_RDWR`, `write`/`pwrite`, `mmap(PROT_WRITE, MAP_SHARED)`,
//! `mprotect` to add write, `ftruncate`, `fallocate` (a punched hole included), `F_ADD_SEALS`,
//! passing the fd on. The seals are on the memfd itself, so they hold for every fd of it:
//! - one of dlport's memfds is sealed `F_SEAL_FUTURE_WRITE` (Linux 5.1 or later) when first
//!   shared read-only: no new writable mapping and no write, by anyone, from then on, while the
//!   mappings made before (the producer's own) keep writing, and the peers see those writes
//!   (no copy). It stays so: a later writable share of it is a copy;
//! - every shared memfd is sealed `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`: no peer of a
//!   writable share either can resize it (a shrink would make the producer's next read SIGBUS)
//!   or change its seals (taking back what a writable share promised the others);
//! - where the memfd cannot be sealed so (it was shared writable before, so its seals are
//!   fixed; or the kernel has no `F_SEAL_FUTURE_WRITE`, EINVAL) and for memory that is not one
//!   of dlport's memfds, a read-only share is a copy into a new memfd sealed `F_SEAL_WRITE`:
//!   one compact copy of the tensor's bytes (a `pwrite`, or a strided copy through a mapping)
//!   and its memory, allowed by [`ShareOptions::copy`] (`Never`: an error saying why), seen by
//!   the producer as [`Shared::is_copy`]; the peers see a snapshot;
//! - the peers get an `O_RDONLY` fd as well (a reopen through `/proc/self/fd`, where mounted).
//!
//! The receiving side checks what it was promised: [`open`] refuses a READ_ONLY descriptor whose
//! memfd carries no write seal (`F_GET_SEALS`), as it refuses any memfd that may shrink. CUDA
//! IPC has no read-only mapping (`cuIpcOpenMemHandle` maps writable), so a read-only share of
//! CUDA memory, and a READ_ONLY CUDA IPC descriptor, are refused. The limit of the guarantee is
//! the fd: a process allowed to `ptrace` the producer (the same user, where the Yama LSM
//! allows it) can write the producer's memory through `/proc/<pid>/mem` like any other memory of
//! the producer's.
//!
//! Linux only in this release (memfd seals and `SCM_RIGHTS` as Linux has them): elsewhere the
//! Rust functions return `BackendError::Unsupported` and the C entries
//! `DLPORT_ERR_UNSUPPORTED`. Descriptors themselves ([`Descriptor::to_bytes`],
//! [`Descriptor::from_bytes`]) work everywhere.
//!
//! ```
//! # #[cfg(target_os = "linux")] {
//! use dlport_native::dlport_core::{CopyPolicy, DataType};
//! use dlport_native::share::{self, ShareOptions, Shared};
//! use std::os::unix::net::UnixStream;
//!
//! let mut t = share::alloc(DataType::INT32, &[4])?;
//! // SAFETY: nobody else has this memory yet.
//! unsafe { t.assume_exclusive() }?;
//! t.as_mut_slice::<i32>()?.copy_from_slice(&[1, 2, 3, 4]);
//! let shared = share::share(&t.view(), &ShareOptions { copy: CopyPolicy::Never, ..Default::default() })?;
//!
//! // In real use the other end of the socket is in another process.
//! let (a, b) = UnixStream::pair().unwrap();
//! shared.send(&a)?;
//! let opened = Shared::recv(&b)?.open()?;
//! assert_eq!(opened.as_slice::<i32>()?, &[1, 2, 3, 4]);
//! # }
//! # Ok::<(), dlport_native::dlport_core::Error>(())
//! ```

#[cfg(cuda_ipc)]
mod cuda_ipc;
mod descriptor;
mod errors;
#[cfg(memfd_share)]
mod memfd;
#[cfg(any(not(memfd_share), not(cuda_ipc)))]
mod noop;
mod options;
#[cfg(memfd_share)]
mod socket;

// Where this platform or build cannot share, the stub room stands in (build.rs names the
// conditions: `memfd_share`, `cuda_ipc`, `fds`).
#[cfg(all(fds, not(cuda_ipc)))]
use noop::cuda_ipc;
#[cfg(not(memfd_share))]
use noop::memfd;
#[cfg(all(fds, not(memfd_share)))]
use noop::socket;

pub use errors::NAME;
pub use options::{MAX_FDS, ShareOptions};

#[cfg(fds)]
use errors::invalid;
#[cfg(fds)]
use errors::{DEVICE_NOT_SHAREABLE, unsupported};

pub use descriptor::{
    CUDA_IPC_HANDLE_LEN, DESCRIPTOR_HEADER, DESCRIPTOR_MAX, Descriptor, FORMAT_VERSION, HandleKind,
    MAGIC,
};

#[cfg(fds)]
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

#[cfg(fds)]
use dlport_core::Error;
#[cfg(fds)]
use dlport_core::error::ValueRule;
#[cfg(fds)]
use dlport_core::{DataType, ManagedTensor, TensorRef};

/// A descriptor and the fds that travel with it: what a producer sends ([`share`]) and what a
/// consumer receives ([`Shared::recv`]). Dropping it closes its fds; the memory stays while any
/// process maps it (and, for CUDA IPC, while any consumer holds the handle open).
#[cfg(fds)]
#[derive(Debug)]
pub struct Shared {
    descriptor: Descriptor,
    fds: Vec<OwnedFd>,
    copied: bool,
}

#[cfg(fds)]
impl Shared {
    /// A descriptor with its fds (as many as [`Descriptor::fd_count`]), e.g. received through a
    /// transport of the caller's own.
    pub fn from_parts(descriptor: Descriptor, fds: Vec<OwnedFd>) -> Result<Self, Error> {
        descriptor.validate()?;
        check_fd_count(&descriptor, fds.len())?;
        Ok(Self {
            descriptor,
            fds,
            copied: false,
        })
    }

    /// The descriptor.
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    /// Whether [`share`] copied the memory into a new memfd (memory that is not one of dlport's
    /// memfds, or one whose seals do not allow the share as asked): the peers then see a
    /// snapshot, not the producer's later writes. False for what was received or put together
    /// ([`recv`](Self::recv), [`from_parts`](Self::from_parts)).
    pub fn is_copy(&self) -> bool {
        self.copied
    }

    /// The fds, in descriptor order.
    pub fn fds(&self) -> &[OwnedFd] {
        &self.fds
    }

    /// The descriptor and its fds.
    pub fn into_parts(self) -> (Descriptor, Vec<OwnedFd>) {
        (self.descriptor, self.fds)
    }

    /// Opens the tensor in this process (see [`open`]); the fds stay open in `self`.
    pub fn open(&self) -> Result<ManagedTensor, Error> {
        let fds: Vec<BorrowedFd<'_>> = self.fds.iter().map(AsFd::as_fd).collect();
        open(&self.descriptor, &fds)
    }

    /// Sends the descriptor and its fds over a connected Unix stream socket (`SCM_RIGHTS`).
    /// The fds stay open here too: drop `self` when no other peer needs them.
    pub fn send(&self, socket: &impl AsFd) -> Result<(), Error> {
        let bytes = self.descriptor.to_bytes()?;
        let fds: Vec<BorrowedFd<'_>> = self.fds.iter().map(AsFd::as_fd).collect();
        socket::send(socket.as_fd(), &bytes, &fds)
    }

    /// Receives one descriptor and its fds from a connected Unix stream socket. Fails (closing
    /// whatever fds arrived) on a bad descriptor or a wrong number of fds.
    pub fn recv(socket: &impl AsFd) -> Result<Self, Error> {
        let (bytes, fds) = socket::recv(socket.as_fd())?;
        Self::from_parts(Descriptor::from_bytes(&bytes)?, fds)
    }
}

/// A zeroed, compact host tensor in a new sealed memfd, ready to be shared without a copy. Its
/// access is [`Access::Shared`](dlport_core::backend::Access): once shared, other processes may write
/// it, so `as_mut_slice` needs `unsafe assume_exclusive` (true until the first share, or while
/// the peers are known to be idle).
#[cfg(fds)]
pub fn alloc(dtype: DataType, shape: &[i64]) -> Result<ManagedTensor, Error> {
    memfd::alloc(dtype, shape, None)
}

/// Shares host memory: a view of one of dlport's memfds ([`alloc`], or a tensor opened from a
/// descriptor) travels without a copy where its seals allow the share (one shared read-only
/// before cannot be shared writable, one shared writable before cannot be shared read-only: see
/// [read-only shares](self#read-only-shares)); anything else is copied into a new memfd as
/// `options.copy` allows. The view's owner may be dropped at any time after: the memfd lives
/// while the returned value or any mapping holds it. Device memory needs the owner
/// ([`share_managed`]).
#[cfg(fds)]
pub fn share(view: &TensorRef<'_>, options: &ShareOptions) -> Result<Shared, Error> {
    if !view.device().is_host_accessible() {
        return Err(unsupported(
            "sharing device memory from a borrowed view: pass its owner to \
                        share_managed, which keeps it alive until every peer let go",
        ));
    }
    let (descriptor, fd, copied) = memfd::share(view, options)?;
    Ok(Shared {
        descriptor,
        fds: vec![fd],
        copied,
    })
}

/// Shares an owned tensor: host memory as [`share`] does (the tensor is released on return;
/// the memfd keeps the bytes), CUDA device memory through CUDA IPC (feature `cuda`): the
/// tensor is kept until the returned value and every consumer's handle are gone (or the
/// consumers died), then released exactly once.
#[cfg(fds)]
pub fn share_managed(tensor: ManagedTensor, options: &ShareOptions) -> Result<Shared, Error> {
    let device = tensor.view().device();
    if device.is_host_accessible() {
        return share(&tensor.view(), options);
    }
    if device.device_type != dlport_core::abi::DeviceType::CUDA {
        return Err(unsupported(DEVICE_NOT_SHAREABLE));
    }
    let (descriptor, fd) = cuda_ipc::share(tensor, options)?;
    Ok(Shared {
        descriptor,
        fds: vec![fd],
        copied: false,
    })
}

/// Opens a descriptor in this process: a zero-copy DLPack tensor over the shared memory, whose
/// deleter unmaps it (or closes the CUDA IPC handle). The descriptor is validated again and
/// each fd checked before anything is mapped: a closed fd, a pipe, a plain file, an unsealed
/// memfd or one smaller than `byte_len` is an error, never a mapping of the wrong size, and so is
/// a READ_ONLY descriptor whose memfd carries no write seal (whoever holds its fd could write
/// it). The fds stay the caller's (the mapping does not need them).
///
/// The tensor is Shared (other processes may write the memory) or READ_ONLY; IS_COPIED is
/// never set.
#[cfg(fds)]
pub fn open(descriptor: &Descriptor, fds: &[BorrowedFd<'_>]) -> Result<ManagedTensor, Error> {
    descriptor.validate()?;
    check_fd_count(descriptor, fds.len())?;
    match descriptor.kind {
        HandleKind::Memfd => memfd::open(descriptor, fds[0]),
        HandleKind::CudaIpc => cuda_ipc::open(descriptor, fds[0]),
    }
}

/// How many shared-memory mappings this process made (allocations and opened descriptors) and
/// how many it has unmapped. Equal when every tensor over shared memory was released.
pub fn mapping_counts() -> (u64, u64) {
    memfd::counts()
}

#[cfg(fds)]
fn check_fd_count(descriptor: &Descriptor, fds: usize) -> Result<(), Error> {
    if fds != descriptor.fd_count() {
        return Err(invalid(
            &ValueRule {
                field: "fd count",
                expected: "descriptor.fd_count (1): pass exactly the fds that came with the descriptor",
            },
            fds as u64,
        ));
    }
    Ok(())
}

#[cfg(all(test, memfd_share))]
mod tests {
    use super::*;
    use dlport_core::error::DispatchError;
    use dlport_core::{CopyPolicy, DataType, ExportBuilder};

    #[test]
    fn a_memfd_tensor_shares_without_a_copy_and_foreign_memory_only_with_one() {
        let mut t = alloc(DataType::UINT8, &[3, 5]).unwrap();
        // SAFETY: the memory has not been shared yet.
        unsafe { t.assume_exclusive() }.unwrap();
        t.as_mut_slice::<u8>().unwrap().fill(7);
        let never = ShareOptions {
            copy: CopyPolicy::Never,
            ..Default::default()
        };
        let s = share(&t.view(), &never).unwrap();
        let opened = s.open().unwrap();
        assert_eq!(opened.as_slice::<u8>().unwrap(), &[7; 15]);
        // Two mappings of the same pages: a write through one shows in the other.
        t.as_mut_slice::<u8>().unwrap()[0] = 9;
        assert_eq!(opened.as_slice::<u8>().unwrap()[0], 9);

        let foreign = ExportBuilder::from_vec(vec![1u8, 2, 3], &[3])
            .build()
            .unwrap();
        let e = share(&foreign.view(), &never).unwrap_err();
        assert_eq!(
            e,
            Error::Dispatch(DispatchError::CopyRequired {
                reason: dlport_core::error::CopyReason::NotShareable {
                    device: dlport_core::Device::cpu()
                }
            })
        );
        assert!(
            e.to_string()
                .contains("not in memory another process can map"),
            "{e}"
        );
        let copied = share(&foreign.view(), &ShareOptions::default()).unwrap();
        assert_eq!(copied.open().unwrap().as_slice::<u8>().unwrap(), &[1, 2, 3]);
    }

    #[test]
    fn an_opened_tensor_is_passed_on_without_a_copy_and_empty_tensors_travel() {
        let mut t = alloc(DataType::INT16, &[4, 6]).unwrap();
        // SAFETY: the memory has not been shared yet.
        unsafe { t.assume_exclusive() }.unwrap();
        t.as_mut_slice::<i16>().unwrap().fill(3);
        let never = ShareOptions {
            copy: CopyPolicy::Never,
            ..Default::default()
        };
        let first = share(&t.view(), &never).unwrap().open().unwrap();
        // The opened tensor is shared on from its own mapping: no copy, and the third mapping
        // sees the producer's writes.
        let again = share(&first.view(), &never).unwrap();
        assert_eq!(again.descriptor().byte_offset, 0);
        assert_eq!(again.descriptor().byte_len, 48);
        let second = again.open().unwrap();
        t.as_mut_slice::<i16>().unwrap()[5] = -1;
        assert_eq!(second.as_slice::<i16>().unwrap()[5], -1);

        let empty = alloc(DataType::FLOAT32, &[3, 0]).unwrap();
        let s = share(&empty.view(), &never).unwrap();
        assert_eq!(s.descriptor().byte_len, 0);
        let opened = s.open().unwrap();
        assert_eq!(opened.view().shape(), &[3, 0]);
        assert_eq!(opened.as_slice::<f32>().unwrap(), &[] as &[f32]);
    }
}
