//! `dlport.Tensor`: a tensor held by a dlport backend, and a DLPack producer.

use dlport_core::abi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion, RawManaged};
use dlport_core::{CopyPolicy, Device, ExportOptions};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::adapter::{self, Held};
use crate::{args, capsule, exchange};

/// A tensor held by dlport: memory of any producer (a view, or a copy where one was needed and
/// allowed), validated once. It is a DLPack producer (`__dlpack__`, `__dlpack_device__`, the
/// DLPack 1.3 C exchange API), exposes host memory through the buffer protocol, and answers
/// every device query from one value: the device it presents.
// `freelist`: pyo3 keeps up to 64 dead objects for the next ones, so most imports neither
// allocate nor track a new object (BENCHMARKS.md, "The Python package").
#[pyclass(module = "dlport", name = "Tensor", frozen, weakref, freelist = 64)]
#[derive(Clone, Debug)]
pub struct PyTensor {
    held: Held,
    /// What `__dlpack_device__`, `device` and exports say (see [`Held::presented`]).
    device: Device,
    /// For a tensor unpickled by `_rebuild`: where the sender's memory was.
    origin: Option<Device>,
}

impl PyTensor {
    /// Wraps a held tensor; `requested` is the device the import asked for.
    #[inline]
    pub fn new(held: Held, requested: Option<Device>) -> Self {
        let device = held.presented(requested);
        Self {
            held,
            device,
            origin: None,
        }
    }

    /// The same tensor, saying where the memory came from (an unpickled tensor: the sender's).
    pub fn with_origin(self, origin: Device) -> Self {
        Self {
            origin: Some(origin),
            ..self
        }
    }

    /// Where the memory came from, for an unpickled tensor (the sender's memory).
    pub fn origin(&self) -> Option<Device> {
        self.origin
    }

    /// The tensor.
    pub fn tensor(&self) -> &dlport_core::Tensor {
        self.held.tensor()
    }

    /// The held tensor.
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// The held tensor, owned.
    pub fn into_held(self) -> Held {
        self.held
    }

    /// The device it presents.
    pub fn device(&self) -> Device {
        self.device
    }

    /// A versioned export for a DLPack 1.x consumer (the exchange API's producer side). It
    /// makes no stream hand-off (stream -1): the API's consumer orders its work itself, after
    /// `current_work_stream`.
    pub fn export_versioned(&self) -> Result<RawManaged, adapter::Failure> {
        let options = ExportOptions {
            max_version: Some(DLPackVersion::new(
                DLPACK_MAJOR_VERSION,
                DLPACK_MINOR_VERSION,
            )),
            ..ExportOptions::default()
        };
        Ok(self.export(&options, Some(-1))?.into_raw())
    }

    /// An export under core's `options`, handing off to the consumer's `stream`.
    fn export(
        &self,
        options: &ExportOptions,
        stream: Option<i64>,
    ) -> Result<adapter::Owned, adapter::Failure> {
        adapter::export(&self.held, self.device, options, stream)
    }
}

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
        PyTuple::new(py, self.held.shape())
    }

    /// Strides in elements (DLPack's unit, as `torch.Tensor.stride()`; NumPy counts bytes).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.held.strides())
    }

    /// Number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.held.shape().len()
    }

    /// The element type's name: `float32`, `bfloat16`, `float8_e4m3fn`, `int4`, ...
    #[getter]
    fn dtype(&self) -> String {
        self.held.dtype().to_string()
    }

    /// The device it presents: `cpu`, `cuda:0`, `cuda_host:0`, ...
    #[getter(device)]
    fn device_name(&self) -> String {
        self.device.to_string()
    }

    /// Where the memory really is: `cuda_host:0` for pinned memory presented as `cpu`.
    #[getter]
    fn memory(&self) -> String {
        self.held.memory().to_string()
    }

    /// For a tensor unpickled from another process: where the sender's memory was (`cpu`,
    /// `cuda_host:0` for pinned memory that travelled as host bytes, `cuda:0` copied to the
    /// host under `dlport.pickling(device_copy=True)`); `None` otherwise.
    #[getter(origin)]
    fn origin_name(&self) -> Option<String> {
        self.origin.map(|d| d.to_string())
    }

    /// READ_ONLY: consumers must not write (exports carry the flag; legacy ones are copies).
    #[getter]
    fn readonly(&self) -> bool {
        self.held.is_read_only()
    }

    /// The memory is a copy dlport made (for a device, a layout or an alignment the producer's
    /// memory lacked); its exports carry IS_COPIED.
    #[getter]
    fn copied(&self) -> bool {
        self.held.is_copied()
    }

    /// Bytes of the elements in compact form (sub-byte elements packed).
    #[getter]
    fn nbytes(&self) -> usize {
        self.held.nbytes()
    }

    /// The address of the first element (`data + byte_offset`), as `torch.Tensor.data_ptr()`.
    fn data_ptr(&self) -> usize {
        (self.held.data() as usize).wrapping_add(self.held.byte_offset() as usize)
    }

    /// Outstanding DLPack references to the memory (for tests: 0 once every consumer released
    /// its export, which a second release would underflow).
    #[getter]
    fn _dlpack_users(&self) -> usize {
        self.held.users()
    }

    /// `(device_type, device_id)` of the device it presents.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (self.device.device_type.0, self.device.device_id)
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
        let stream = args::stream(stream)?;
        let options = ExportOptions {
            // `None` (or major 0): the legacy form, as `__dlpack__` without `max_version`.
            max_version: args::max_version(max_version)?
                .map(|(major, minor)| DLPackVersion::new(major, minor)),
            dl_device: args::dl_device(dl_device)?,
            copy: CopyPolicy::from_copy(args::copy(copy)?),
            ..ExportOptions::default()
        };
        let exported = if options.copy == CopyPolicy::Always {
            // A copy can be large: let other threads run meanwhile.
            py.detach(|| self.export(&options, stream))?
        } else {
            self.export(&options, stream)?
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
        let held = &self.held;
        let compacted = py.detach(|| adapter::compact(held, align))?;
        Ok(Self::new(compacted, Some(self.device)))
    }

    /// Pickling (protocol 5: the bytes out of band, no copy; protocols 0 to 4: a copy in
    /// band). A strided tensor is made compact once, on the way out; device memory is refused
    /// unless `dlport.pickling(device_copy=True)` allows a copy to the host. See `_rebuild`.
    fn __reduce_ex__<'py>(slf: &Bound<'py, Self>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        crate::pickle::reduce_ex(slf, protocol)
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
        let fields = crate::pickle::Fields::extract(dtype, shape, strides, flags, memory)?;
        crate::pickle::rebuild(buffer, &fields)
    }

    /// `copy.copy(t)`: another `dlport.Tensor` over the same memory (a view, as slicing gives).
    fn __copy__(&self) -> Self {
        self.clone()
    }

    /// `copy.deepcopy(t)`: a copy of the elements in new memory on the same device (writable,
    /// `copied` True).
    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let held = &self.held;
        let copy = py.detach(|| adapter::deep_copy(held))?;
        Ok(Self {
            held: copy,
            device: self.device,
            origin: self.origin,
        })
    }

    fn __repr__(&self) -> String {
        let h = &self.held;
        let mut s = format!(
            "dlport.Tensor(shape={}, dtype={}, device={}",
            tuple_repr(h.shape()),
            h.dtype(),
            self.device
        );
        if h.memory() != self.device {
            s += &format!(", memory={}", h.memory());
        }
        if !h.is_row_major() {
            s += &format!(", strides={}", tuple_repr(h.strides()));
        }
        if h.is_read_only() {
            s += ", readonly=True";
        }
        if let Some(origin) = self.origin.filter(|&o| o != h.memory()) {
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
