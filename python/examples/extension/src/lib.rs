//! `dlport_example`: a PyO3 extension on dlport-pyo3. Its functions take any DLPack producer
//! (NumPy, JAX, PyTorch, tvm-ffi, `dlport.Tensor`, a capsule) as a [`DLPackTensor`] and return
//! dlport tensors, which NumPy, JAX and PyTorch take without a copy.

use dlport_core::backend::{AlignedBuffer, Buffer, CPU_ALIGN, LayoutNeed, ViewRequirements};
use dlport_core::{CopyPolicy, DataType, Device, ImportOptions, Tensor};
use dlport_pyo3::DLPackTensor;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// Row-major compact, at any alignment: core's import options say what a consumer needs.
const ROW_MAJOR: ViewRequirements = ViewRequirements {
    layout: LayoutNeed::RowMajor,
    alignment: 1,
};

/// The same memory, held by dlport: no copy. The producer's array stays alive while the
/// result (or anything that took the result's memory) lives.
#[pyfunction]
fn passthrough(x: DLPackTensor) -> DLPackTensor {
    x
}

/// `x` as row-major compact memory, never copied: a strided view is refused with the package's
/// `BufferError` (`DLPackTensor::extract_with` takes `from_dlpack`'s options).
#[pyfunction]
fn compact_view(x: &Bound<'_, PyAny>) -> PyResult<DLPackTensor> {
    let options = ImportOptions {
        copy: CopyPolicy::Never,
        requirements: Some(ROW_MAJOR),
        ..ImportOptions::default()
    };
    DLPackTensor::extract_with(x, &options)
}

/// `x * factor` in a new float32 tensor, 64-byte aligned (JAX views it without a copy). `x` is
/// float32 on any device and in any layout: dlport copies it to the host and makes it row-major
/// compact only where needed.
#[pyfunction]
fn scale(x: &Bound<'_, PyAny>, factor: f32) -> PyResult<DLPackTensor> {
    let options = ImportOptions {
        device: Some(Device::cpu()),
        requirements: Some(ROW_MAJOR),
        ..ImportOptions::default()
    };
    let x = DLPackTensor::extract_with(x, &options)?;
    let t = x.tensor();
    if t.dtype() != DataType::FLOAT32 {
        return Err(PyTypeError::new_err(format!(
            "scale() takes float32 tensors, got x.dtype = {}",
            t.dtype()
        )));
    }
    let view = t.view().map_err(dlport_pyo3::error)?;
    let input = view
        .tensor_ref()
        .as_slice::<f32>()
        .map_err(dlport_pyo3::error)?;
    let mut out =
        AlignedBuffer::zeroed(size_of_val(input), CPU_ALIGN).map_err(dlport_pyo3::error)?;
    for (o, v) in out.as_mut_slice().chunks_exact_mut(4).zip(input) {
        o.copy_from_slice(&(v * factor).to_ne_bytes());
    }
    let buffer = Buffer::new(Box::new(out));
    let result = Tensor::builder(buffer, "cpu", DataType::FLOAT32, t.shape()).build();
    Ok(result.map_err(dlport_pyo3::error)?.into())
}

/// Takes `x` and drops it: dlport-pyo3's argument path alone (import, validation, release), for
/// bench/python/pyo3_args.py.
#[pyfunction]
fn take(x: DLPackTensor) {
    drop(x);
}

/// Takes `x` through dlpark 0.10's PyO3 path (`dlpark::python::from_dlpack`, then its
/// validation) and drops it, for bench/python/pyo3_args.py (cargo feature `dlpark`).
#[cfg(feature = "dlpark")]
#[pyfunction]
fn take_dlpark(x: &Bound<'_, PyAny>) -> PyResult<()> {
    let imported = dlpark::python::from_dlpack(x.as_borrowed(), None, None)?;
    imported
        .validate()
        .map_err(|e| pyo3::exceptions::PyBufferError::new_err(e.to_string()))?;
    Ok(())
}

/// The extension module.
#[pymodule]
fn dlport_example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(passthrough, m)?)?;
    m.add_function(wrap_pyfunction!(compact_view, m)?)?;
    m.add_function(wrap_pyfunction!(scale, m)?)?;
    m.add_function(wrap_pyfunction!(take, m)?)?;
    #[cfg(feature = "dlpark")]
    m.add_function(wrap_pyfunction!(take_dlpark, m)?)?;
    Ok(())
}
