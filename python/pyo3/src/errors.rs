//! dlport's failures as Python exceptions: dlport classes (`dlport/_errors.py`), each a
//! `dlport.DLPackError` and also the builtin the array API names, so that existing `except`
//! clauses keep working: `BufferError` when the data cannot cross as asked, `ValueError` for a
//! bad argument value, `TypeError` for an argument of the wrong kind, `MemoryError` for a failed
//! allocation. Each carries the message and `code`: core's stable error number (`DLPORT_ERR_*`
//! in the C ABI, 1..=`Error::CODE_COUNT`), or one of the binding's own ([`binding_code`]);
//! never 0. (Only a call's own shape — a missing or unexpected argument — is CPython's or
//! pyo3's `TypeError`, without a code.)

use dlport_core::Error;
use dlport_core::error::{BackendError, DispatchError};
use pyo3::exceptions::{PyBufferError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// How Python sees a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The data cannot cross as asked (`BufferError`).
    Buffer,
    /// A bad argument value (`ValueError`).
    Value,
    /// An argument of the wrong kind (`TypeError`).
    Type,
    /// An allocation failed (`MemoryError`).
    Memory,
}

/// A dlport error on its way to Python: its class, its stable code (core's, or the binding's
/// own, [`binding_code`]; never 0) and the message.
#[derive(Debug)]
pub struct Failure {
    /// The Python exception class.
    pub kind: Kind,
    /// `Error::code()`, as in the C ABI's `DLPORT_ERR_*`, or the binding's own code.
    pub code: u32,
    /// What went wrong, naming the field and the value.
    pub message: String,
}

impl Failure {
    /// An error of the binding itself (the binding's code of its kind).
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            code: binding_code(kind),
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self {
            kind: kind_of(&e),
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// The one classification of core's errors, by concern and variant: bad arguments (a name, a
/// device id, a stream, an option, a device breaking the rule of ids) are `ValueError`, a
/// failed allocation is `MemoryError`, everything else says the data cannot cross as asked
/// (`BufferError`, the array API's choice): invalid tensors, unsupported versions, devices
/// without a backend, copies the policy forbids, flags a form cannot carry.
pub fn kind_of(e: &Error) -> Kind {
    match e {
        Error::Dispatch(
            DispatchError::InvalidName { .. }
            | DispatchError::InvalidDeviceId { .. }
            | DispatchError::InvalidStream { .. }
            | DispatchError::InvalidOption { .. }
            | DispatchError::InvalidDevice { .. },
        ) => Kind::Value,
        Error::Backend(BackendError::AllocationFailed { .. }) => Kind::Memory,
        _ => Kind::Buffer,
    }
}

/// The code of an error of the binding itself (not core's): stable numbers above core's range,
/// one per kind. 1001: a bad data hand-over (`BufferError`), 1002: a bad argument value
/// (`ValueError`), 1003: an argument of the wrong kind (`TypeError`), 1004: a failed
/// allocation (`MemoryError`).
pub const fn binding_code(kind: Kind) -> u32 {
    match kind {
        Kind::Buffer => 1001,
        Kind::Value => 1002,
        Kind::Type => 1003,
        Kind::Memory => 1004,
    }
}

/// The class in `dlport._errors` of a kind.
const fn class_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Buffer => "DLPackBufferError",
        Kind::Value => "DLPackValueError",
        Kind::Type => "DLPackTypeError",
        Kind::Memory => "DLPackMemoryError",
    }
}

/// The exception, a dlport class with `code`; the bare builtin if `dlport._errors` cannot be
/// imported (an interpreter shutting down).
fn exception(py: Python<'_>, f: &Failure) -> PyResult<PyErr> {
    let class = py.import("dlport._errors")?.getattr(class_name(f.kind))?;
    let value = class.call1((f.message.as_str(), f.code))?;
    Ok(PyErr::from_value(value))
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        Python::attach(|py| {
            exception(py, &f).unwrap_or_else(|_| match f.kind {
                Kind::Buffer => PyBufferError::new_err(f.message),
                Kind::Value => PyValueError::new_err(f.message),
                Kind::Type => PyTypeError::new_err(f.message),
                Kind::Memory => PyMemoryError::new_err(f.message),
            })
        })
    }
}

/// A `BufferError` of the binding itself.
pub fn buffer_error(message: impl Into<String>) -> PyErr {
    Failure::new(Kind::Buffer, message).into()
}

/// A `TypeError` of the binding itself (an argument of the wrong kind).
pub fn type_error(message: impl Into<String>) -> PyErr {
    Failure::new(Kind::Type, message).into()
}

/// A `ValueError` of the binding itself (a bad argument value).
pub fn value_error(message: impl Into<String>) -> PyErr {
    Failure::new(Kind::Value, message).into()
}

/// The package's exception for a dlport error, as `dlport.from_dlpack` raises it: a
/// `dlport.DLPackBufferError` (a `BufferError`), `DLPackValueError` or `DLPackMemoryError` with
/// the error's stable `code` (the builtin classes where the package `dlport` is not installed).
pub fn error(e: dlport_core::Error) -> PyErr {
    Failure::from(e).into()
}
