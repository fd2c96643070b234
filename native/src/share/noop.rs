//! The stub room: sharing where this platform or build cannot do it. Each module stands in for
//! the room of the same name (`memfd` and `socket` off Linux, `cuda_ipc` without CUDA on
//! Linux) with the same functions, each refusing with [`unsupported`]. No other file names a
//! platform.

#[cfg(fds)]
use super::unsupported;

/// What sharing is on a platform without memfd seals.
#[cfg(fds)]
pub(super) const PLATFORM: &str = "sharing tensors between processes on this platform (memfd \
                                   seals and SCM_RIGHTS as Linux has them; Linux only in this \
                                   release)";

/// Host memory in sealed memfds: Linux only.
#[cfg(not(memfd_share))]
pub(super) mod memfd {
    #[cfg(fds)]
    use std::os::fd::{BorrowedFd, OwnedFd};

    #[cfg(fds)]
    use dlport_core::{DataType, Error, ManagedTensor, TensorRef};

    #[cfg(fds)]
    use super::{PLATFORM, unsupported};
    #[cfg(fds)]
    use crate::share::descriptor::Descriptor;
    #[cfg(fds)]
    use crate::share::options::ShareOptions;

    pub(in crate::share) fn counts() -> (u64, u64) {
        (0, 0)
    }

    #[cfg(fds)]
    pub(in crate::share) fn alloc(
        _: DataType,
        _: &[i64],
        _: Option<u64>,
    ) -> Result<ManagedTensor, Error> {
        Err(unsupported(PLATFORM))
    }

    #[cfg(fds)]
    pub(in crate::share) fn share(
        _: &TensorRef<'_>,
        _: &ShareOptions,
    ) -> Result<(Descriptor, OwnedFd, bool), Error> {
        Err(unsupported(PLATFORM))
    }

    #[cfg(fds)]
    pub(in crate::share) fn open(
        _: &Descriptor,
        _: BorrowedFd<'_>,
    ) -> Result<ManagedTensor, Error> {
        Err(unsupported(PLATFORM))
    }
}

/// Descriptor frames over a Unix socket: Linux only.
#[cfg(all(fds, not(memfd_share)))]
pub(super) mod socket {
    use std::os::fd::{BorrowedFd, OwnedFd};

    use dlport_core::Error;

    use super::{PLATFORM, unsupported};

    pub(in crate::share) fn send(
        _: BorrowedFd<'_>,
        _: &[u8],
        _: &[BorrowedFd<'_>],
    ) -> Result<(), Error> {
        Err(unsupported(PLATFORM))
    }

    pub(in crate::share) fn recv(_: BorrowedFd<'_>) -> Result<(Vec<u8>, Vec<OwnedFd>), Error> {
        Err(unsupported(PLATFORM))
    }
}

/// CUDA IPC: Linux with the `cuda` feature only.
#[cfg(all(fds, not(cuda_ipc)))]
pub(super) mod cuda_ipc {
    use std::os::fd::{BorrowedFd, OwnedFd};

    use dlport_core::{Error, ManagedTensor};

    use super::{PLATFORM, unsupported};
    use crate::share::descriptor::Descriptor;
    use crate::share::errors::DEVICE_NOT_SHAREABLE;
    use crate::share::options::ShareOptions;

    pub(in crate::share) fn share(
        _: ManagedTensor,
        _: &ShareOptions,
    ) -> Result<(Descriptor, OwnedFd), Error> {
        Err(unsupported(DEVICE_NOT_SHAREABLE))
    }

    pub(in crate::share) fn open(
        _: &Descriptor,
        _: BorrowedFd<'_>,
    ) -> Result<ManagedTensor, Error> {
        Err(unsupported(if cfg!(memfd_share) {
            "opening a CUDA IPC descriptor in a build without the `cuda` feature"
        } else {
            PLATFORM
        }))
    }
}
