//! dlport's failures as Python exceptions, following the array API: `BufferError` when the
//! data cannot cross as asked, `ValueError` for a bad argument value, `TypeError` for an
//! argument of the wrong kind, `MemoryError` for a failed allocation. Each carries the core's
//! message, and `code`: the core's stable error number (`DLPORT_ERR_*` in the C ABI), or 0 for
//! the binding's own errors. (Only a call's own shape — a missing or unexpected argument — is
//! CPython's or pyo3's `TypeError`, without a code.)

use pyo3::exceptions::{PyBufferError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::adapter::{Failure, Kind};

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        let err = match f.kind {
            Kind::Buffer => PyBufferError::new_err(f.message),
            Kind::Value => PyValueError::new_err(f.message),
            Kind::Type => PyTypeError::new_err(f.message),
            Kind::Memory => PyMemoryError::new_err(f.message),
        };
        Python::attach(|py| {
            // Only a failed attribute store on a fresh exception could fail here; the exception
            // itself is what matters.
            let _ = err.value(py).setattr("code", f.code);
        });
        err
    }
}

/// A `BufferError` of the binding itself.
pub fn buffer_error(message: impl Into<String>) -> PyErr {
    Failure::new(Kind::Buffer, message).into()
}

/// A `TypeError` of the binding itself (an argument of the wrong kind), with code 0.
pub fn type_error(message: impl Into<String>) -> PyErr {
    Failure::new(Kind::Type, message).into()
}

/// A `ValueError` of the binding itself (a bad argument value), with code 0.
pub fn value_error(message: impl Into<String>) -> PyErr {
    Failure::new(Kind::Value, message).into()
}
