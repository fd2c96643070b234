//! [`ready`]: the one-time preparation of the `Tensor` class (the CPython layout check and
//! the buffer protocol), which conversions and the exchange API call before a first tensor.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::tensor::PyTensor;
use crate::{buffer, cpython};

/// Prepares the `Tensor` class of this extension once: checks the CPython type layout the
/// route cache and the buffer protocol read ([`cpython::check`]), then installs the buffer
/// protocol (warning, `RuntimeWarning`, where the interpreter's types do not look as
/// expected). [`DLPackTensor`](crate::DLPackTensor)'s conversions call it; an extension module may call it in its
/// `#[pymodule]` to report a failure at import instead.
pub fn ready(py: Python<'_>) -> PyResult<()> {
    static READY: PyOnceLock<()> = PyOnceLock::new();
    if READY.get(py).is_some() {
        return Ok(());
    }
    READY
        .get_or_try_init(py, || {
            let ty = py.get_type::<PyTensor>();
            cpython::check(&ty)?;
            buffer::install(&ty)
        })
        .map(|_| ())
}
