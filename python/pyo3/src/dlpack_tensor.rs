//! [`DLPackTensor`]: a PyO3 argument that takes any DLPack producer, and a return value that
//! gives Python a `dlport.Tensor`.

use dlport_core::{Device, ImportOptions, Tensor};
use pyo3::prelude::*;

use crate::import;
use crate::tensor::PyTensor;

/// A tensor from any DLPack producer, held by dlport — and, returned from an extension
/// function, a `dlport.Tensor` for Python.
///
/// As an argument (`fn f(x: DLPackTensor)`) it imports the object exactly as
/// `dlport.from_dlpack(x)` does, with the default [`ImportOptions`]; [`Self::extract_with`]
/// takes other options. The tensor is a view of the producer's memory (no copy unless one was
/// asked for or needed): the producer's memory stays alive while the tensor, or any export of
/// it, lives. A failure is the package's exception (a `BufferError`, `ValueError` or
/// `TypeError`) naming the field and the value.
///
/// As a return value it becomes a [`PyTensor`] (`dlport.Tensor` of this extension), a DLPack
/// producer whose consumers (`numpy.from_dlpack`, `jax.dlpack.from_dlpack`, `torch.from_dlpack`)
/// take the same memory without a copy. An extracted argument is that object already: returned,
/// it is the same object, and `tensor()` reads it without the GIL.
#[derive(Debug)]
pub struct DLPackTensor(Inner);

/// Where the tensor lives. Either is one pointer: pyo3 moves an argument and a result by value
/// through its conversions, and a 168-byte value moved twice, right after it was written, costs
/// more time than the object an import makes anyway (BENCHMARKS.md, "PyO3 argument path").
#[derive(Debug)]
enum Inner {
    /// The `dlport.Tensor` an import made.
    Object(Py<PyTensor>),
    /// A tensor made in Rust (`From<Tensor>`), to become an object when returned.
    Value(Box<PyTensor>),
}

impl DLPackTensor {
    /// Imports `obj` (an object with `__dlpack__`, or a bare DLPack capsule) under core's
    /// import options, as `dlport.from_dlpack(obj, device=, copy=, layout=, align=)` does:
    /// `device` (the memory's own when `None`), `copy` (the array API's, as a
    /// [`CopyPolicy`](dlport_core::CopyPolicy)), `requirements` (row-major compact and an
    /// alignment, met by a view where the memory has them, else by one copy where `copy`
    /// allows) and `max_alloc`. `advertised` is what the producer's `__dlpack_device__` says.
    ///
    /// ```no_run
    /// use dlport_core::backend::{LayoutNeed, ViewRequirements};
    /// use dlport_core::{CopyPolicy, Device, ImportOptions};
    /// use dlport_pyo3::DLPackTensor;
    /// use pyo3::prelude::*;
    ///
    /// /// Host memory, row-major compact and 64-byte aligned, as JAX takes it: a copy only
    /// /// where the producer's memory is not that already.
    /// #[pyfunction]
    /// fn for_jax(x: &Bound<'_, PyAny>) -> PyResult<DLPackTensor> {
    ///     let options = ImportOptions {
    ///         device: Some(Device::cpu()),
    ///         copy: CopyPolicy::IfNeeded,
    ///         requirements: Some(ViewRequirements {
    ///             layout: LayoutNeed::RowMajor,
    ///             alignment: 64,
    ///         }),
    ///         ..ImportOptions::default()
    ///     };
    ///     DLPackTensor::extract_with(x, &options)
    /// }
    /// ```
    pub fn extract_with(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<Self> {
        crate::ready::ready(obj.py())?;
        import::take(obj, options, |tensor| {
            let object = Bound::new(obj.py(), PyTensor::new(tensor, options.device))?;
            Ok(Self(Inner::Object(object.unbind())))
        })
    }

    fn value(&self) -> &PyTensor {
        match &self.0 {
            Inner::Object(object) => object.get(),
            Inner::Value(value) => value,
        }
    }

    /// The tensor: shape, strides, dtype, device and typed access to host memory
    /// (`tensor().view()`, `to_vec`).
    pub fn tensor(&self) -> &Tensor {
        self.value().tensor()
    }

    /// The tensor, owned (a handle to the same memory: the Python object, if any, keeps its
    /// own).
    pub fn into_tensor(self) -> Tensor {
        match self.0 {
            Inner::Object(object) => object.get().tensor().clone(),
            Inner::Value(value) => value.into_tensor(),
        }
    }

    /// The device it presents (`__dlpack_device__`): the memory's own, except pinned or managed
    /// memory, which presents as `cpu` unless the import named its class.
    pub fn device(&self) -> Device {
        self.value().device()
    }
}

impl From<Tensor> for DLPackTensor {
    /// A dlport tensor (made by `Tensor::from_vec`, a backend's `allocate`, or taken from
    /// another `DLPackTensor`) to return to Python.
    fn from(tensor: Tensor) -> Self {
        Self(Inner::Value(Box::new(PyTensor::new(tensor, None))))
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for DLPackTensor {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Self::extract_with(&obj, &ImportOptions::default())
    }
}

impl<'py> IntoPyObject<'py> for DLPackTensor {
    type Target = PyTensor;
    type Output = Bound<'py, PyTensor>;
    type Error = PyErr;

    #[inline]
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTensor>> {
        crate::ready::ready(py)?;
        match self.0 {
            Inner::Object(object) => Ok(object.into_bound(py)),
            Inner::Value(value) => Bound::new(py, *value),
        }
    }
}

impl From<DLPackTensor> for PyTensor {
    fn from(t: DLPackTensor) -> Self {
        match t.0 {
            Inner::Object(object) => object.get().clone(),
            Inner::Value(value) => *value,
        }
    }
}
