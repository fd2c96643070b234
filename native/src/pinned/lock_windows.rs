//! Page locking on Windows: `VirtualLock`, whose error is `GetLastError()`.

use std::ffi::c_void;

use dlport_core::Error;
use dlport_core::error::BackendError;

use super::{PinnedBackend, last_os_error};

/// Locks the pages of `[ptr, ptr + len)`; the error is `GetLastError()`.
pub(super) fn mlock(ptr: *const c_void, len: usize) -> Result<(), i32> {
    // SAFETY: VirtualLock only changes the residency of the pages of [ptr, ptr + len), which
    // the caller owns; it reads and writes no memory.
    if unsafe { windows_sys::Win32::System::Memory::VirtualLock(ptr, len) } != 0 {
        Ok(())
    } else {
        Err(last_os_error())
    }
}

/// Unlocks what [`mlock`] locked (best effort: the pages are freed right after).
pub(super) fn munlock(ptr: *const c_void, len: usize) {
    // SAFETY: unlocks exactly a range locked by `mlock` with VirtualLock, still owned by the
    // caller.
    unsafe {
        windows_sys::Win32::System::Memory::VirtualUnlock(ptr, len);
    }
}

/// The error for a failed `VirtualLock` (`code` from `GetLastError`).
pub fn lock_error(code: i32) -> Error {
    // ERROR_WORKING_SET_QUOTA (1453) and ERROR_NO_SYSTEM_RESOURCES (1450).
    let detail = match code {
        1453 => {
            "ERROR_WORKING_SET_QUOTA: the process's minimum working set is too small to lock \
             this much; raise it with SetProcessWorkingSetSize or lock less"
        }
        1450 => "ERROR_NO_SYSTEM_RESOURCES: the system could not lock the pages; lock less",
        _ => "the operating system refused to lock the pages",
    };
    Error::Backend(BackendError::failed(
        PinnedBackend::NAME,
        "VirtualLock",
        code,
        detail,
    ))
}
