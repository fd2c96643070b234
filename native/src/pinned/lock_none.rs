//! Page locking where the platform has none: every lock fails, and the backend says so.

use std::ffi::c_void;

use dlport_core::Error;
use dlport_core::error::BackendError;

use super::PinnedBackend;

/// Locking is not available: always refused (the code is 0).
pub(super) fn mlock(_: *const c_void, _: usize) -> Result<(), i32> {
    Err(0)
}

/// Nothing was locked.
pub(super) fn munlock(_: *const c_void, _: usize) {}

/// The error for a lock this platform cannot make.
pub fn lock_error(code: i32) -> Error {
    Error::Backend(BackendError::failed(
        PinnedBackend::NAME,
        "mlock",
        code,
        "this platform cannot lock pages",
    ))
}
