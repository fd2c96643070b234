//! The constructors of the errors of `share` and of its rooms: the only places they build an
//! error that is not one of DLPack's own rules (StorageTooSmall, StridesLength, …), and the name
//! the errors carry.

#[cfg(memfd_share)]
use dlport_core::Device;
use dlport_core::Error;
#[cfg(fds)]
use dlport_core::error::BackendError;
use dlport_core::error::{DispatchError, ValueRule};

/// The name in this module's errors (`BackendError::Failed`, `BackendError::Unsupported`).
pub const NAME: &str = "share";

/// Why device memory other than CUDA's (or CUDA's, without CUDA IPC) is not shared.
#[cfg(fds)]
pub(super) const DEVICE_NOT_SHAREABLE: &str = "sharing this device's memory: host memory and CUDA device \
                                    memory (with the `cuda` feature, on Linux) can be shared";

/// A descriptor field, an argument or an option out of its range ("`field` = `value` is
/// invalid: it must be `expected`").
pub(super) fn invalid(rule: &'static ValueRule, value: u64) -> Error {
    DispatchError::InvalidValue { rule, value }.into()
}

/// Something this platform, build or kind of memory cannot do.
#[cfg(fds)]
pub(super) fn unsupported(operation: &'static str) -> Error {
    BackendError::unsupported(NAME, operation).into()
}

/// An operating-system or driver call failed (`code`: errno, or the value named in `detail`).
#[cfg(memfd_share)]
pub(super) fn os_error(operation: &'static str, code: i64, detail: &'static str) -> Error {
    BackendError::failed(NAME, operation, code as i32, detail).into()
}

/// This thread's `errno`.
#[cfg(memfd_share)]
pub(super) fn errno() -> i64 {
    i64::from(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// Memory another process cannot map as it is (not one of dlport's memfds), under
/// `CopyPolicy::Never`.
#[cfg(memfd_share)]
pub(super) fn copy_needed(device: Device) -> Error {
    DispatchError::CopyRequired {
        reason: dlport_core::error::CopyReason::NotShareable { device },
    }
    .into()
}

#[cfg(memfd_share)]
pub(super) fn descriptor_too_long(len: usize) -> Error {
    invalid(
        &ValueRule {
            field: "descriptor length",
            expected: "at most DESCRIPTOR_MAX (1144) bytes: the peer did not send a dlport descriptor",
        },
        len as u64,
    )
}
