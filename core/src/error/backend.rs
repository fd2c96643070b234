//! [`BackendError`]: a backend cannot do something, or its driver or operating system failed.

use core::fmt;

/// A backend refused or failed: an operation it does not support, memory it could not
/// allocate, a failed driver or OS call (which may carry the backend's own error as its
/// [`source`](core::error::Error::source)), or a driver that is not installed.
///
/// What a backend says (its name, the operation, what it means) is a [`BackendReport`]: one
/// `static` [`StaticReport`] (no allocation, `no_std`), or with `alloc` one made at run time
/// from any `&'static str`s, with the backend's own error attached if it has one.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// A backend does not support an operation.
    Unsupported {
        /// The backend and the operation (and, if not empty, what to do instead).
        report: BackendReport,
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
        /// The code the call returned (errno, `CUresult`, `GetLastError`, …: every such code
        /// is a 32-bit value).
        code: i32,
        /// The backend, the call, what the code means and what to do, and the backend's own
        /// error.
        report: BackendReport,
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

    /// `backend` does not support `operation`.
    #[cfg(feature = "alloc")]
    pub fn unsupported(backend: &'static str, operation: &'static str) -> Self {
        Self::Unsupported {
            report: BackendReport::new(backend, operation, ""),
        }
    }

    /// `backend`'s call `operation` failed with `code`, which means `detail`.
    #[cfg(feature = "alloc")]
    pub fn failed(
        backend: &'static str,
        operation: &'static str,
        code: i32,
        detail: &'static str,
    ) -> Self {
        Self::Failed {
            code,
            report: BackendReport::new(backend, operation, detail),
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported { report } => {
                write!(
                    f,
                    "backend \"{}\" does not support {}",
                    report.backend(),
                    report.operation()
                )?;
                match report.detail() {
                    "" => Ok(()),
                    detail => write!(f, ": {detail}"),
                }
            }
            Self::AllocationFailed { bytes, align } => {
                write!(
                    f,
                    "allocating {bytes} bytes aligned to {align} failed: out of memory"
                )
            }
            Self::Failed { code, report } => write!(
                f,
                "backend \"{}\": {} failed with code {code}: {}",
                report.backend(),
                report.operation(),
                report.detail()
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
            Self::Unsupported { report } | Self::Failed { report, .. } => report
                .source()
                .map(|source| source as &(dyn core::error::Error + 'static)),
            _ => None,
        }
    }
}

/// What a backend says about an operation, written as a `static` (or a constant
/// `&StaticReport { .. }`, which the compiler promotes to one): no allocation, usable without
/// `alloc`. Turn it into a [`BackendReport`] with [`BackendReport::from_static`].
#[derive(Clone, Copy)]
pub struct StaticReport {
    /// The backend's name.
    pub backend: &'static str,
    /// The operation or call ("allocation", "mlock", "cuMemAlloc", …).
    pub operation: &'static str,
    /// What the code means and what to do ("" when there is nothing to add).
    pub detail: &'static str,
    /// The backend's own error, if it has a type for it: a `static`, so that equal errors
    /// have the same source (a promoted constant has no unique address).
    pub source: Option<&'static (dyn core::error::Error + Send + Sync)>,
}

impl fmt::Debug for StaticReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticReport")
            .field("backend", &self.backend)
            .field("operation", &self.operation)
            .field("detail", &self.detail)
            .field("source", &self.source)
            .finish()
    }
}

/// What a backend says about an operation it does not support or that failed: its name, the
/// operation, what it means and what to do, and optionally the backend's own error (the
/// [`source`](core::error::Error::source) of the error that carries it).
///
/// 16 bytes: a `&'static StaticReport`, or with `alloc` a shared allocation made by
/// [`new`](Self::new) or [`owned`](Self::owned) (so that a backend can pass any text at run
/// time, and attach an owned error with [`with_source`](Self::with_source)). Reports are equal
/// when their texts are and their sources are the same object.
#[derive(Clone)]
pub struct BackendReport(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static StaticReport),
    #[cfg(feature = "alloc")]
    Shared(alloc::sync::Arc<Owned>),
}

#[cfg(feature = "alloc")]
struct Owned {
    text: StaticReport,
    /// A detail made at run time, owned by the report (it replaces `text.detail`).
    detail: Option<alloc::boxed::Box<str>>,
    source: Option<alloc::boxed::Box<dyn core::error::Error + Send + Sync>>,
}

impl BackendReport {
    /// A report that lives in a `static`.
    pub const fn from_static(report: &'static StaticReport) -> Self {
        Self(Repr::Static(report))
    }

    /// A report made at run time (allocated once, shared by the clones of the error).
    #[cfg(feature = "alloc")]
    pub fn new(backend: &'static str, operation: &'static str, detail: &'static str) -> Self {
        Self(Repr::Shared(alloc::sync::Arc::new(Owned {
            text: StaticReport {
                backend,
                operation,
                detail,
                source: None,
            },
            detail: None,
            source: None,
        })))
    }

    /// A report whose detail is made at run time and owned by the report (freed with the
    /// last clone of the error), so that texts from outside (a plugin's messages, paths)
    /// never need to live for the whole process.
    #[cfg(feature = "alloc")]
    pub fn owned(
        backend: &'static str,
        operation: &'static str,
        detail: alloc::string::String,
    ) -> Self {
        Self(Repr::Shared(alloc::sync::Arc::new(Owned {
            text: StaticReport {
                backend,
                operation,
                detail: "",
                source: None,
            },
            detail: Some(detail.into_boxed_str()),
            source: None,
        })))
    }

    /// The same report with the backend's own error attached as its source.
    #[cfg(feature = "alloc")]
    pub fn with_source(self, source: impl core::error::Error + Send + Sync + 'static) -> Self {
        let text = *self.text();
        let detail = match &self.0 {
            Repr::Shared(owned) => owned.detail.clone(),
            Repr::Static(_) => None,
        };
        Self(Repr::Shared(alloc::sync::Arc::new(Owned {
            text,
            detail,
            source: Some(alloc::boxed::Box::new(source)),
        })))
    }

    fn text(&self) -> &StaticReport {
        match &self.0 {
            Repr::Static(report) => report,
            #[cfg(feature = "alloc")]
            Repr::Shared(owned) => &owned.text,
        }
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.text().backend
    }

    /// The operation or call.
    pub fn operation(&self) -> &'static str {
        self.text().operation
    }

    /// What the code means and what to do ("" when there is nothing to add).
    pub fn detail(&self) -> &str {
        #[cfg(feature = "alloc")]
        if let Repr::Shared(owned) = &self.0 {
            if let Some(detail) = &owned.detail {
                return detail;
            }
        }
        self.text().detail
    }

    /// The backend's own error, if it attached one (downcast it with `downcast_ref`).
    pub fn source(&self) -> Option<&(dyn core::error::Error + Send + Sync + 'static)> {
        #[cfg(feature = "alloc")]
        if let Repr::Shared(owned) = &self.0 {
            if let Some(source) = &owned.source {
                return Some(&**source);
            }
        }
        self.text().source
    }
}

impl PartialEq for BackendReport {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.text(), other.text());
        a.backend == b.backend
            && a.operation == b.operation
            && self.detail() == other.detail()
            && match (self.source(), other.source()) {
                (None, None) => true,
                (Some(a), Some(b)) => core::ptr::addr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for BackendReport {}

impl fmt::Debug for BackendReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendReport")
            .field("backend", &self.backend())
            .field("operation", &self.operation())
            .field("detail", &self.detail())
            .field("source", &self.source())
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
