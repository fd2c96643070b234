//! [`BackendError`]: a backend cannot do something, or its driver or operating system failed.

use core::fmt;

/// A backend refused or failed: an operation it does not support, memory it could not
/// allocate, a failed driver or OS call (which may carry the backend's own error as its
/// [`source`](core::error::Error::source)), or a driver that is not installed.
///
/// Texts a backend supplies are `&'static`, and those that come in pairs live in a `static`
/// descriptor ([`Failure`], [`Driver`]) so that the error holds one pointer for them: a
/// constant `&Failure { .. }` is promoted to a `&'static` by the compiler.
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
        /// The backend, the call and what the failure means.
        failure: &'static Failure,
        /// The code the call returned (errno, `CUresult`, `GetLastError`, …; every such code
        /// is a 32-bit value).
        code: i32,
        /// The backend's own error, if it attached one: what [`source`](core::error::Error::source)
        /// returns.
        cause: Option<Cause>,
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
            Self::Failed { failure, code, .. } => write!(
                f,
                "backend \"{}\": {} failed with code {code}: {}",
                failure.backend, failure.operation, failure.detail
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
            Self::Failed {
                cause: Some(cause), ..
            } => Some(cause.get()),
            _ => None,
        }
    }
}

/// A backend call that can fail, described once: the backend, the call, and what the failure
/// means and what to do. [`BackendError::Failed`] holds a `&'static Failure`: write
/// `&Failure { backend: NAME, operation: "mlock", detail: "…" }` with constant fields (the
/// compiler promotes it to a static), or declare a `static`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Failure {
    /// The backend's name.
    pub backend: &'static str,
    /// The call that failed ("mlock", "cuMemAlloc", …).
    pub operation: &'static str,
    /// What it means and what to do.
    pub detail: &'static str,
}

/// A driver a backend loads at run time, for [`BackendError::DriverNotFound`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Driver {
    /// The API ("CUDA").
    pub api: &'static str,
    /// The library looked for ("libcuda.so.1").
    pub library: &'static str,
}

#[cfg(feature = "alloc")]
type CauseRef = alloc::sync::Arc<dyn core::error::Error + Send + Sync>;
#[cfg(not(feature = "alloc"))]
type CauseRef = &'static (dyn core::error::Error + Send + Sync);

/// A backend's own error, attached to [`BackendError::Failed`] (its `source()`): a `static`
/// one ([`from_static`](Self::from_static)) or, with `alloc`, any value
/// ([`new`](Self::new), shared by clones of the error). Two causes are equal when they are the
/// same object (a clone of an error equals it); compare [`Error::code`](super::Error::code) or
/// downcast [`get`](Self::get) to compare by content.
#[derive(Clone)]
pub struct Cause(CauseRef);

impl Cause {
    /// A cause that lives in a `static` (with `alloc`, the reference is put behind an `Arc`,
    /// so both kinds of cause have one representation).
    pub fn from_static(error: &'static (dyn core::error::Error + Send + Sync)) -> Self {
        #[cfg(feature = "alloc")]
        let error = alloc::sync::Arc::new(error);
        Self(error)
    }

    /// Any error value, shared by the clones of the error that carries it.
    #[cfg(feature = "alloc")]
    pub fn new(error: impl core::error::Error + Send + Sync + 'static) -> Self {
        Self(alloc::sync::Arc::new(error))
    }

    /// The backend's error (downcast it with `downcast_ref`).
    pub fn get(&self) -> &(dyn core::error::Error + Send + Sync + 'static) {
        #[cfg(feature = "alloc")]
        if let Some(error) = self
            .0
            .downcast_ref::<&'static (dyn core::error::Error + Send + Sync)>()
        {
            // A static cause, behind the `Arc`: the static itself, so that it downcasts to its
            // own type and two causes from one static are the same object.
            return *error;
        }
        &*self.0
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::addr_eq(self.get(), other.get())
    }
}

impl Eq for Cause {}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.get(), f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.get(), f)
    }
}
