//! The errors of dlport-core: one small [`Error`] over four concerns, as rustls arranges its
//! errors.
//!
//! - [`LayoutError`]: the raw fields break a DLPack rule (pointer, version, flags, `ndim`,
//!   dtype, extents, strides, address range). The producer is at fault.
//! - [`AccessError`]: a valid tensor cannot be accessed as asked (element type, host access,
//!   contiguity, alignment, read-only or shared memory, a released buffer, a flag the
//!   consumer's form cannot carry).
//! - [`DispatchError`]: routing failed (names, backends, devices, copies, allocation limits,
//!   options, streams).
//! - [`BackendError`]: a backend cannot do it, or its driver or OS failed; the backend's own
//!   error, if it attached one, is the `source`.
//!
//! Every error has a stable number, [`Error::code`] (the sub-errors have `code()` too), that
//! the C ABI returns, and a message that names the field and the value and says what to do.
//!
//! # Size
//! `size_of::<Error>() <= 32` is asserted at compile time, on 32- and 64-bit targets, so a
//! `Result<_, Error>` stays small on the import hot path: each sub-error fits in 24 bytes and
//! the word left is the tag. No two texts sit side by side in a variant: names are one-byte
//! enums ([`Flag`], [`NameKind`], [`OptionRule`], [`StreamReason`]); a backend's texts are one
//! [`BackendReport`] (a `&'static` [`StaticReport`], or with `alloc` a shared allocation made
//! at run time) and a driver a `&'static` [`Driver`]; the two payloads that are large or of
//! variable length are boxed under `alloc` ([`AddressRange`], [`BackendNames`]).

mod access;
mod backend;
mod dispatch;
mod layout;
mod reasons;
mod values;

use core::fmt;

pub use access::{AccessError, Flag};
pub use backend::{BackendError, BackendReport, Driver, StaticReport};
#[cfg(feature = "alloc")]
pub use dispatch::BackendNames;
pub use dispatch::{CopyReason, DispatchError, NameKind, OptionRule, StreamReason, ValueRule};
pub use layout::{AddressRange, LayoutError};
#[cfg(feature = "alloc")]
pub use values::ShownValue;
pub use values::{Address, ByteCount, ShortStr};

/// Everything that can go wrong when reading, validating, owning, dispatching or exporting a
/// DLPack tensor: one of four concerns, each a sub-error.
///
/// Display and [`source`](core::error::Error::source) are the sub-error's (the message is not
/// repeated down the chain; a backend's own error is the source). Match the concern, then the
/// variant; both enums are `#[non_exhaustive]`, so keep a catch-all arm. The payloads of each
/// concern (names, rules, counts, addresses) are in this module.
///
/// # Examples
///
/// ```
/// use dlport_core::Error;
/// use dlport_core::error::LayoutError;
///
/// let err = dlport_core::layout::check_ndim(-1).unwrap_err();
/// assert!(matches!(err, Error::Layout(LayoutError::NdimOutOfRange { ndim: -1 })));
/// assert_eq!(err.code(), 4);
/// assert_eq!(err.to_string(), "ndim = -1 is out of range 0..=64");
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The tensor's raw fields break a DLPack rule.
    Layout(LayoutError),
    /// A valid tensor cannot be accessed as asked.
    Access(AccessError),
    /// Finding a backend, device, copy or option failed.
    Dispatch(DispatchError),
    /// A backend cannot do it, or its driver or OS failed.
    Backend(BackendError),
}

const _: () = {
    use core::mem::size_of;
    assert!(size_of::<Error>() <= 32);
    assert!(size_of::<Result<(), Error>>() <= 32);
    assert!(size_of::<LayoutError>() <= 24);
    assert!(size_of::<AccessError>() <= 24);
    assert!(size_of::<DispatchError>() <= 24);
    assert!(size_of::<BackendError>() <= 24);
};

const _: () = {
    const fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Error>();
};

impl Error {
    /// How many distinct codes [`code`](Self::code) returns (codes are `1..=CODE_COUNT`).
    pub const CODE_COUNT: u32 = 44;

    /// A stable number for this error (1-based), used by the C ABI (`DLPORT_ERR_*`) and by
    /// tests that check every error is reachable. Codes are never reused; new variants get new
    /// numbers. Each sub-error's `code()` gives the same number.
    pub const fn code(&self) -> u32 {
        match self {
            Self::Layout(e) => e.code(),
            Self::Access(e) => e.code(),
            Self::Dispatch(e) => e.code(),
            Self::Backend(e) => e.code(),
        }
    }

    /// The sub-error, as a `dyn Error` (to log or downcast it).
    fn inner(&self) -> &(dyn core::error::Error + 'static) {
        match self {
            Self::Layout(e) => e,
            Self::Access(e) => e,
            Self::Dispatch(e) => e,
            Self::Backend(e) => e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.inner(), f)
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        self.inner().source()
    }
}

impl From<LayoutError> for Error {
    fn from(e: LayoutError) -> Self {
        Self::Layout(e)
    }
}

impl From<AccessError> for Error {
    fn from(e: AccessError) -> Self {
        Self::Access(e)
    }
}

impl From<DispatchError> for Error {
    fn from(e: DispatchError) -> Self {
        Self::Dispatch(e)
    }
}

impl From<BackendError> for Error {
    fn from(e: BackendError) -> Self {
        Self::Backend(e)
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use core::error::Error as _;

    /// A backend's own error type.
    #[derive(Debug, PartialEq)]
    struct DriverSaid(i32);

    impl fmt::Display for DriverSaid {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "driver status {}", self.0)
        }
    }

    impl core::error::Error for DriverSaid {}

    /// A source is compared by address: a `static` has one (a promoted constant need not).
    static OUT_OF_MEMORY: DriverSaid = DriverSaid(2);

    static WITH_SOURCE: StaticReport = StaticReport {
        backend: "xpu",
        operation: "xpuMalloc",
        detail: "out of device memory",
        source: Some(&OUT_OF_MEMORY),
    };

    fn failed(report: BackendReport) -> Error {
        BackendError::Failed { code: 2, report }.into()
    }

    #[test]
    fn a_backend_source_is_the_source_and_the_message_is_not_repeated() {
        let plain = failed(BackendReport::new(
            "xpu",
            "xpuMalloc",
            "out of device memory",
        ));
        assert!(plain.source().is_none());
        let from_static = failed(BackendReport::from_static(&WITH_SOURCE));
        let owned = failed(
            BackendReport::new("xpu", "xpuMalloc", "out of device memory")
                .with_source(DriverSaid(2)),
        );
        for err in [&from_static, &owned] {
            assert_eq!(err.code(), 32);
            assert_eq!(
                err.to_string(),
                "backend \"xpu\": xpuMalloc failed with code 2: out of device memory"
            );
            let source = err.source().expect("the backend's error");
            assert_eq!(source.downcast_ref::<DriverSaid>(), Some(&DriverSaid(2)));
            assert!(source.source().is_none());
            assert_eq!(err.clone(), *err, "a clone shares the source");
            assert_ne!(*err, plain, "a source makes another report");
        }
        assert_eq!(
            failed(BackendReport::from_static(&WITH_SOURCE)),
            from_static,
            "one static, one source"
        );
        assert_ne!(from_static, owned, "two sources, two objects");
        assert_eq!(
            plain,
            BackendError::failed("xpu", "xpuMalloc", 2, "out of device memory").into(),
            "reports without a source compare by text"
        );
    }

    #[test]
    fn an_unsupported_operation_may_say_what_to_do_instead() {
        let err: Error = BackendError::unsupported("cpu", "allocation on cuda:0").into();
        assert_eq!(
            err.to_string(),
            "backend \"cpu\" does not support allocation on cuda:0"
        );
        static HINT: StaticReport = StaticReport {
            backend: "webgpu",
            operation: "synchronous readback",
            detail: "await download",
            source: None,
        };
        let err: Error = BackendError::Unsupported {
            report: BackendReport::from_static(&HINT),
        }
        .into();
        assert_eq!(
            err.to_string(),
            "backend \"webgpu\" does not support synchronous readback: await download"
        );
        assert_eq!(err.code(), 28);
    }

    #[test]
    fn sub_errors_give_the_codes_of_their_error() {
        let errors: [Error; 4] = [
            LayoutError::NullManagedTensor.into(),
            AccessError::ReadOnly.into(),
            DispatchError::DuplicateBackend { name: "cpu" }.into(),
            BackendError::AllocationFailed { bytes: 8, align: 8 }.into(),
        ];
        let codes = errors.each_ref().map(Error::code);
        assert_eq!(codes, [1, 19, 30, 29]);
        for e in &errors {
            assert!(e.source().is_none());
            assert_eq!(e.to_string(), e.inner().to_string());
        }
    }
}
