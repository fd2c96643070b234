//! `dlport_example`: a PyO3 extension on dlport-pyo3. Its functions take any DLPack producer
//! (NumPy, JAX, PyTorch, tvm-ffi, `dlport.Tensor`, a capsule) as a [`DLPackTensor`] and return
//! dlport tensors, which NumPy, JAX and PyTorch take without a copy.

use dlport_core::{DataType, Device, Tensor};
use dlport_pyo3::{DLPackTensor, ImportOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// The same memory, held by dlport: no copy. The producer's array stays alive while the
/// result (or anything that took the result's memory) lives.
#[pyfunction]
fn passthrough(x: DLPackTensor) -> DLPackTensor {
    x
}

/// `x * factor` in a new float32 tensor. `x` is float32 on any device and in any layout:
/// dlport copies it to the host and makes it row-major compact only where needed.
#[pyfunction]
fn scale(x: &Bound<'_, PyAny>, factor: f32) -> PyResult<DLPackTensor> {
    let options = ImportOptions::new().device(Device::cpu()).compact(1);
    let x = DLPackTensor::extract_with(x, &options)?;
    let t = x.tensor();
    if t.dtype() != DataType::FLOAT32 {
        return Err(PyTypeError::new_err(format!(
            "scale() takes float32 tensors, got x.dtype = {}",
            t.dtype()
        )));
    }
    let view = t.view().map_err(dlport_error)?;
    let data = view
        .tensor_ref()
        .as_slice::<f32>()
        .map_err(dlport_error)?
        .iter()
        .map(|v| v * factor)
        .collect();
    let shape = t.shape().to_vec();
    Ok(Tensor::from_vec(data, &shape).map_err(dlport_error)?.into())
}

/// A dlport error as a Python exception (the messages name the field and the value).
fn dlport_error(e: dlport_core::Error) -> PyErr {
    pyo3::exceptions::PyBufferError::new_err(e.to_string())
}

/// The extension module.
#[pymodule]
fn dlport_example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(passthrough, m)?)?;
    m.add_function(wrap_pyfunction!(scale, m)?)?;
    Ok(())
}
