//! Page locking on Unix: `mlock`, whose error is `errno`.

use std::ffi::c_void;

use dlport_core::Error;
use dlport_core::error::BackendError;

use super::{PinnedBackend, last_os_error};

/// Locks the pages of `[ptr, ptr + len)`; the error is `errno`.
pub(super) fn mlock(ptr: *const c_void, len: usize) -> Result<(), i32> {
    // SAFETY: mlock only changes the residency of the pages of [ptr, ptr + len), which the
    // caller owns; it reads and writes no memory.
    if unsafe { libc::mlock(ptr, len) } == 0 {
        Ok(())
    } else {
        Err(last_os_error())
    }
}

/// Unlocks what [`mlock`] locked (best effort: the pages are freed right after).
pub(super) fn munlock(ptr: *const c_void, len: usize) {
    // SAFETY: unlocks exactly a range locked by `mlock`, still owned by the caller.
    unsafe {
        libc::munlock(ptr, len);
    }
}

/// The error for a failed `mlock` (`errno`).
pub fn lock_error(errno: i32) -> Error {
    let detail = match errno {
        libc::ENOMEM => {
            "ENOMEM: the locked-memory limit (RLIMIT_MEMLOCK) is too low; raise it with `ulimit -l` or lock less"
        }
        libc::EPERM => {
            "EPERM: this process may not lock memory; grant CAP_IPC_LOCK or raise RLIMIT_MEMLOCK"
        }
        libc::EAGAIN => "EAGAIN: some pages could not be locked; retry with less memory",
        _ => "the operating system refused to lock the pages",
    };
    Error::Backend(BackendError::failed(
        PinnedBackend::NAME,
        "mlock",
        errno,
        detail,
    ))
}
