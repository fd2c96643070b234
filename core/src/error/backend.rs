//! [`BackendError`]: a backend cannot do something, or its driver or operating system failed.

use core::fmt;

/// A backend refused or failed: an operation it does not support, memory it could not
/// allocate, a failed driver or OS call (which may carry the backend's own error as its
/// [`source`](core::error::Error::source)), or a driver that is not installed.
///
/// Texts a backend supplies are `&'static`. Where a variant needs more than one besides the
/// backend's name, they live in a `static` descriptor ([`Failure`], [`Driver`]) so that the
/// error holds one pointer for them: a constant `&Failure { .. }` is promoted to a `&'static`
/// by the compiler.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// A backend does not support an operation.
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// The operation, in words: one pointer to a `&'static str` (write `&"allocation"`).
        operation: &'static &'static str,
    },
    /// Memory could not be allocated.
    AllocationFailed {
        /// Bytes requested.
        bytes: u64,
        /// Alignment requested.
        align: usize,
    },
    /// A backend's driver or operating system refused an operation.
    Failed {
        /// The call that failed ("mlock", "cuMemAlloc", …).
        operation: &'static str,
        /// The code it returned (errno, `CUresult`, `GetLastError`, …: every such code is a
        /// 32-bit value).
        code: i32,
        /// The backend, what the code means and what to do, and the backend's own error.
        failure: &'static Failure,
    },
    /// A driver library is not installed on this machine.
    DriverNotFound {
        /// The driver: its API and the library looked for.
        driver: &'static Driver,
    },
}

impl BackendError {
    /// The stable number of this error (see [`Error::code`](super::Error::code)).
    pub const fn code(&self) -> u32 {
        match self {
            Self::Unsupported { .. } => 28,
            Self::AllocationFailed { .. } => 29,
            Self::Failed { .. } => 32,
            Self::DriverNotFound { .. } => 33,
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported { backend, operation } => {
                write!(f, "backend \"{backend}\" does not support {operation}")
            }
            Self::AllocationFailed { bytes, align } => {
                write!(
                    f,
                    "allocating {bytes} bytes aligned to {align} failed: out of memory"
                )
            }
            Self::Failed {
                operation,
                code,
                failure,
            } => write!(
                f,
                "backend \"{}\": {operation} failed with code {code}: {}",
                failure.backend, failure.detail
            ),
            Self::DriverNotFound { driver } => write!(
                f,
                "no {} driver: {} not found; install the driver or use the host backends",
                driver.api, driver.library
            ),
        }
    }
}

impl core::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Failed { failure, .. } => match failure.source {
                Some(source) => Some(source),
                None => None,
            },
            _ => None,
        }
    }
}

/// What a failed backend call means, described once: the backend, what the code means and
/// what to do, and optionally the backend's own error for it (a `static` value of the
/// backend's error type, which [`source`](core::error::Error::source) returns and callers can
/// downcast). [`BackendError::Failed`] holds a `&'static Failure`: write
/// `&Failure { backend: NAME, detail: "…", source: None }` with constant fields (the compiler
/// promotes it to a static), or declare a `static` (needed when `source` refers to a
/// `static`). The dynamic part of a failure is its `code`.
#[derive(Clone, Copy)]
pub struct Failure {
    /// The backend's name.
    pub backend: &'static str,
    /// What the code means and what to do.
    pub detail: &'static str,
    /// The backend's own error for this failure, if it has a type for it (a `static`, so
    /// that equal errors have the same source: a promoted constant has no unique address).
    pub source: Option<&'static (dyn core::error::Error + Send + Sync)>,
}

/// Descriptors are equal when their texts are, and their sources are the same object (an
/// error value has no equality of its own).
impl PartialEq for Failure {
    fn eq(&self, other: &Self) -> bool {
        self.backend == other.backend
            && self.detail == other.detail
            && match (self.source, other.source) {
                (None, None) => true,
                (Some(a), Some(b)) => core::ptr::addr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for Failure {}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failure")
            .field("backend", &self.backend)
            .field("detail", &self.detail)
            .field("source", &self.source)
            .finish()
    }
}

/// A driver a backend loads at run time, for [`BackendError::DriverNotFound`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Driver {
    /// The API ("CUDA").
    pub api: &'static str,
    /// The library looked for ("libcuda.so.1").
    pub library: &'static str,
}
