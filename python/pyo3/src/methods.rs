//! `dlport.Tensor`'s Python methods: its attributes, `__dlpack__`, `compact`, pickling and
//! copying. The room above the class's value (`crate::tensor`) and the rooms that read and make
//! tensors (the exchange API, pickling), none of which names it.

use dlport_core::CopyPolicy;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::tensor::PyTensor;
use crate::{adapter, args, capsule, exchange, pickle};

#[pymethods]
impl PyTensor {
    /// `dlport.Tensor(...)` is refused with what to call instead.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Self> {
        Err(crate::errors::type_error(
            "dlport.Tensor is not made by its constructor: take a tensor from any DLPack \
             producer with dlport.from_dlpack(x) (NumPy, JAX, PyTorch, CuPy, a capsule)",
        ))
    }

    /// The DLPack 1.3 C exchange API: a capsule named "dlpack_exchange_api" holding a pointer
    /// to dlport's static `DLPackExchangeAPI`.
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        exchange::api_capsule(py)
    }

    /// Extents.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor().shape())
    }

    /// Strides in elements (DLPack's unit, as `torch.Tensor.stride()`; NumPy counts bytes).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor().strides())
    }

    /// Number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.tensor().shape().len()
    }

    /// The element type's name: `float32`, `bfloat16`, `float8_e4m3fn`, `int4`, ...
    #[getter]
    fn dtype(&self) -> String {
        self.tensor().dtype().to_string()
    }

    /// The device it presents: `cpu`, `cuda:0`, `cuda_host:0`, ...
    #[getter(device)]
    fn device_name(&self) -> String {
        self.device().to_string()
    }

    /// Where the memory really is: `cuda_host:0` for pinned memory presented as `cpu`.
    #[getter]
    fn memory(&self) -> String {
        self.tensor().device().to_string()
    }

    /// For a tensor unpickled from another process: where the sender's memory was (`cpu`,
    /// `cuda_host:0` for pinned memory that travelled as host bytes, `cuda:0` copied to the
    /// host under `dlport.pickling(device_copy=True)`); `None` otherwise.
    #[getter(origin)]
    fn origin_name(&self) -> Option<String> {
        self.origin().map(|d| d.to_string())
    }

    /// READ_ONLY: consumers must not write (exports carry the flag; legacy ones are copies).
    #[getter]
    fn readonly(&self) -> bool {
        self.tensor().is_read_only()
    }

    /// The memory is a copy dlport made (for a device, a layout or an alignment the producer's
    /// memory lacked); its exports carry IS_COPIED.
    #[getter]
    fn copied(&self) -> bool {
        self.tensor().is_copied()
    }

    /// Bytes of the elements in compact form (sub-byte elements packed), exactly: a Python int,
    /// which may exceed what memory holds (a stride-0 axis keeps the memory at one element).
    #[getter]
    fn nbytes(&self) -> PyResult<u128> {
        let t = self.tensor();
        Ok(crate::geometry::nbytes(t.dtype(), t.shape()).map_err(adapter::Failure::from)?)
    }

    /// The address of the first element (`data + byte_offset`), as `torch.Tensor.data_ptr()`.
    fn data_ptr(&self) -> usize {
        let t = self.tensor();
        (t.buffer().ptr() as usize).wrapping_add(t.byte_offset() as usize)
    }

    /// Outstanding DLPack references to the memory (for tests: 0 once every consumer released
    /// its export, which a second release would underflow).
    #[getter]
    fn _dlpack_users(&self) -> usize {
        self.tensor().buffer().users()
    }

    /// `(device_type, device_id)` of the device it presents.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let device = self.device();
        (device.device_type.0, device.device_id)
    }

    /// A DLPack capsule (the array API's `__dlpack__`): versioned (1.3) when `max_version` has a
    /// major version of 1 or more, legacy otherwise; on `dl_device` (default: the device it
    /// presents), copied there when needed and `copy` allows; `copy=True` always copies. For
    /// CUDA memory, `stream` waits on dlport's work (the DLPack stream hand-off).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = args::export_options(stream, max_version, dl_device, copy)?;
        let exported = if options.copy == CopyPolicy::Always {
            // A copy can be large: let other threads run meanwhile.
            py.detach(|| self.export(&options))?
        } else {
            self.export(&options)?
        };
        capsule::wrap(py, exported.into_raw())
    }

    /// A row-major compact tensor with the same elements, on the same memory: this tensor's
    /// memory when it already is one, aligned to `align` bytes (default: 64 in host memory, as
    /// JAX wants), else a copy through the backend's copy kernels (strided, negative and
    /// broadcast strides alike). A copy says so: `copied` is True and exports carry IS_COPIED.
    #[pyo3(signature = (*, align=None))]
    fn compact(&self, py: Python<'_>, align: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let align = args::alignment(align)?;
        let t = self.tensor();
        let compacted = py.detach(|| adapter::compact(t, align))?;
        Ok(Self::new(compacted, Some(self.device())))
    }

    /// Pickling (protocol 5: the bytes out of band, no copy; protocols 0 to 4: a copy in
    /// band). A strided tensor is made compact once, on the way out; device memory is refused
    /// unless `dlport.pickling(device_copy=True)` allows a copy to the host. See `_rebuild`.
    fn __reduce_ex__<'py>(slf: &Bound<'py, Self>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        pickle::reduce_ex(slf, protocol)
    }

    /// The other end of `__reduce_ex__`: a view of `buffer` (the buffer the engine hands back),
    /// holding it until the last view goes; READ_ONLY when the buffer is read-only or `flags`
    /// says so. Every field is checked before the view exists; a forged pickle is a
    /// `DLPackValueError` naming the field.
    #[staticmethod]
    fn _rebuild(
        buffer: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        strides: &Bound<'_, PyAny>,
        flags: &Bound<'_, PyAny>,
        memory: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let fields = pickle::Fields::extract(dtype, shape, strides, flags, memory)?;
        pickle::rebuild(buffer, &fields)
    }

    /// `copy.copy(t)`: another `dlport.Tensor` over the same memory (a view, as slicing gives).
    fn __copy__(&self) -> Self {
        self.clone()
    }

    /// `copy.deepcopy(t)`: a copy of the elements in new memory on the same device (writable,
    /// `copied` True).
    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let t = self.tensor();
        let copy = py.detach(|| adapter::deep_copy(t))?;
        Ok(self.with_tensor(copy))
    }

    fn __repr__(&self) -> String {
        let t = self.tensor();
        let (device, memory) = (self.device(), t.device());
        let mut s = format!(
            "dlport.Tensor(shape={}, dtype={}, device={device}",
            tuple_repr(t.shape()),
            t.dtype(),
        );
        if memory != device {
            s += &format!(", memory={memory}");
        }
        if !t.contiguity().is_row_major() {
            s += &format!(", strides={}", tuple_repr(t.strides()));
        }
        if t.is_read_only() {
            s += ", readonly=True";
        }
        if let Some(origin) = self.origin().filter(|&o| o != memory) {
            s += &format!(", origin={origin}");
        }
        s + ")"
    }
}

/// `(2, 3)`, `(5,)`, `()` as Python writes tuples.
fn tuple_repr(v: &[i64]) -> String {
    match v {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}
