//! Pickling `dlport.Tensor` (pickle protocol 5, PEP 574), so that tensors travel through Ray,
//! Dask, `multiprocessing` and `concurrent.futures` as those engines move objects.
//!
//! `Tensor.__reduce_ex__(protocol)` returns `(Tensor._rebuild, (buffer, dtype, shape, strides,
//! flags, memory))`:
//!
//! - `buffer`: the tensor's bytes. Under protocol 5, a `pickle.PickleBuffer` over them (no copy):
//!   an engine with a `buffer_callback` (Ray, Dask) moves it out of band; plain `pickle.dumps`
//!   copies it into the stream. Under protocols 0 to 4, and for an empty tensor under every
//!   protocol, a copy in band (`bytes` for a READ_ONLY tensor, `bytearray` otherwise, so the
//!   receiver's copy is writable as the sender's was).
//! - A strided tensor is made row-major compact once, on the way out (its strides are then
//!   `None`); a compact one is sent as it is.
//! - Host memory of every class (`cpu`, pinned `cuda_host`, managed) travels as host bytes, and
//!   `memory` names it, so the receiver's `Tensor.origin` says where it came from. Device memory
//!   (CUDA, plugin and PJRT devices) is refused (`BufferError`), unless the caller allows a copy
//!   to the host for the block: `with dlport.pickling(device_copy=True): ...`.
//!
//! `Tensor._rebuild` takes the buffer the engine hands back and makes a **view** of it: the
//! view holds the buffer (`PyObject_GetBuffer`) and releases it once, when the last tensor over
//! it goes. A read-only buffer (Ray's object store makes every buffer read-only) gives a
//! READ_ONLY tensor. Every field is checked before the view exists (`crate::reduce`).

use std::ffi::c_void;

use dlport_core::abi::{FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use dlport_core::backend::{Access, TensorStorage};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyTuple};

use crate::adapter::{self, Failure, Kind};
use crate::cpython::{self, PY_BUF_SIMPLE, PY_BUF_WRITABLE, PyBuffer};
use crate::errors::buffer_error;
use crate::reduce::Reduced;
use crate::tensor::PyTensor;

/// `Tensor.__reduce_ex__(protocol)`.
pub fn reduce_ex<'py>(t: &Bound<'py, PyTensor>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
    let py = t.py();
    let me = t.get();
    let tensor = me.tensor();
    let memory = tensor.device();
    let host = if memory.is_host_accessible() {
        // Row-major compact already: the same tensor; strided: one copy, here.
        py.detach(|| adapter::compact(tensor, Some(1)))?
    } else {
        let switch = device_copy_switch(py);
        if switch != Some(true) {
            let allow = match switch {
                Some(_) => {
                    "allow it for a block with `with dlport.pickling(device_copy=True): ...`"
                }
                None => {
                    "the switch that allows it, `dlport.pickling(device_copy=True)`, is the \
                     Python package dlport's, which cannot be imported here: install it \
                     (pip install dlport)"
                }
            };
            return Err(buffer_error(format!(
                "a dlport.Tensor in {memory} memory is not pickled: pickling sends host bytes, \
                 and copying device memory to the host is the caller's choice: {allow}, or \
                 pickle a host copy (dlport.from_dlpack(t, device=\"cpu\"))"
            )));
        }
        py.detach(|| adapter::host_copy(tensor))?
    };
    let (address, len) = adapter::host_span(&host)
        .ok_or_else(|| buffer_error("the host copy of the tensor is not row-major compact"))?;
    let read_only = tensor.is_read_only();
    let buffer: Bound<'py, PyAny> = if len == 0 {
        // No bytes to lend: an empty buffer in band, whose writability is the sender's (the
        // rebuild makes a read-only buffer's tensor READ_ONLY).
        if read_only {
            PyBytes::new(py, b"").into_any()
        } else {
            PyByteArray::new(py, b"").into_any()
        }
    } else if protocol >= 5 {
        let bytes = Bound::new(py, PyTensor::new(adapter::host_bytes(&host)?, None))?;
        py.import("pickle")?
            .getattr("PickleBuffer")?
            .call1((bytes,))?
    } else {
        // SAFETY: `address` is the first of `len` bytes of host memory that `host` (alive
        // until the end of this function) holds; they are only read, as any buffer-protocol
        // reader does.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, len) };
        if read_only {
            PyBytes::new(py, bytes).into_any()
        } else {
            PyByteArray::new(py, bytes).into_any()
        }
    };
    let mut flags = 0;
    if read_only {
        flags |= FLAG_READ_ONLY;
    }
    if host.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED != 0 {
        flags |= FLAG_IS_SUBBYTE_TYPE_PADDED;
    }
    let origin = me.origin().unwrap_or(memory);
    let args = (
        buffer,
        host.dtype().to_string(),
        PyTuple::new(py, host.shape())?,
        py.None(),
        flags,
        origin.to_string(),
    );
    let rebuild = py.get_type::<PyTensor>().getattr("_rebuild")?;
    PyTuple::new(py, [rebuild, args.into_pyobject(py)?.into_any()])
}

/// Whether `dlport.pickling(device_copy=True)` is in force in this context. The switch is the
/// Python package's (`dlport._pickle`, a context variable every copy of this crate must share:
/// the package's and each extension's): `None` where the package cannot be imported (an
/// extension on dlport-pyo3 without it), so that the refusal says what is missing.
fn device_copy_switch(py: Python<'_>) -> Option<bool> {
    let module = py.import("dlport._pickle").ok()?;
    Some(
        module
            .getattr("_device_copy")
            .and_then(|f| f.call0())
            .and_then(|v| v.extract::<bool>())
            .unwrap_or(false),
    )
}

/// The fields of `Tensor._rebuild`, extracted with errors that name them.
pub struct Fields {
    dtype: String,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    flags: u64,
    memory: String,
}

impl Fields {
    /// Reads the in-band fields of a pickle.
    pub fn extract(
        dtype: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        strides: &Bound<'_, PyAny>,
        flags: &Bound<'_, PyAny>,
        memory: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        fn field<'py, T: FromPyObjectOwned<'py>>(
            v: &Bound<'py, PyAny>,
            name: &str,
            expected: &str,
        ) -> PyResult<T> {
            v.extract::<T>().map_err(|_| {
                Failure::new(
                    Kind::Value,
                    format!(
                        "unpickling a dlport.Tensor: pickle.{name} must be {expected}, got {}",
                        crate::args::shown(v)
                    ),
                )
                .into()
            })
        }
        let ints = "a tuple of integers in the int64 range";
        Ok(Self {
            dtype: field(dtype, "dtype", "a str")?,
            shape: field(shape, "shape", ints)?,
            strides: if strides.is_none() {
                None
            } else {
                Some(field(strides, "strides", ints)?)
            },
            flags: field(flags, "flags", "an integer in the uint64 range")?,
            memory: field(memory, "memory", "a str")?,
        })
    }
}

/// `Tensor._rebuild(buffer, dtype, shape, strides, flags, memory)`: a view of `buffer`.
pub fn rebuild(buffer: &Bound<'_, PyAny>, fields: &Fields) -> PyResult<PyTensor> {
    let storage = BufferStorage::acquire(buffer)?;
    let reduced = Reduced {
        dtype: &fields.dtype,
        shape: &fields.shape,
        strides: fields.strides.as_deref(),
        flags: fields.flags,
        memory: &fields.memory,
    };
    let (tensor, origin) = adapter::rebuild(storage, &reduced).map_err(|f| Failure {
        kind: Kind::Value,
        message: format!("unpickling a dlport.Tensor: {}", f.message),
        ..f
    })?;
    Ok(PyTensor::new(tensor, None).with_origin(origin))
}

/// A view of a Python object's buffer, released once, when dropped.
struct BufferStorage {
    view: Box<PyBuffer>,
    writable: bool,
}

// SAFETY: the view is only released attached to the interpreter (`Drop`); its memory stays
// valid and in place until then, from any thread.
unsafe impl Send for BufferStorage {}

impl BufferStorage {
    /// The buffer of `obj`: writable where it gives one, read-only otherwise (Ray's object
    /// store refuses a writable request with `BufferError`); C-contiguous either way.
    fn acquire(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        let view = match get_buffer(obj, PY_BUF_WRITABLE) {
            Ok(view) => {
                return Ok(Self {
                    view,
                    writable: true,
                });
            }
            Err(e) if e.is_instance_of::<PyBufferError>(py) => get_buffer(obj, PY_BUF_SIMPLE),
            Err(e) => Err(e),
        };
        let view = view.map_err(|err| -> PyErr {
            Failure::new(
                Kind::Value,
                format!(
                    "unpickling a dlport.Tensor: pickle.buffer must give a C-contiguous buffer, \
                     and {} refused: {err}",
                    crate::capsule::type_name(obj)
                ),
            )
            .into()
        })?;
        Ok(Self {
            view,
            writable: false,
        })
    }
}

/// `PyObject_GetBuffer(obj, flags)` into a new boxed view (it must not move until released).
fn get_buffer(obj: &Bound<'_, PyAny>, flags: std::ffi::c_int) -> PyResult<Box<PyBuffer>> {
    // SAFETY: every field of Py_buffer is a pointer or an integer, for which zero is a valid
    // value; GetBuffer fills it before anything reads it.
    let mut view: Box<PyBuffer> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: attached; `obj` is live; `view` is writable and boxed.
    if unsafe { cpython::PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) } == 0 {
        Ok(view)
    } else {
        Err(PyErr::fetch(obj.py()))
    }
}

// SAFETY: `buf` is the first of `len` bytes the exporter keeps valid and in place until the
// view is released (PEP 3118), which happens only when this value is dropped. Writable views
// may be written by other holders of the exporter (Shared); read-only views are never written
// through this storage (ReadOnly makes the tensor READ_ONLY).
unsafe impl TensorStorage for BufferStorage {
    fn data_ptr(&mut self) -> *mut c_void {
        self.view.buf
    }
    fn byte_len(&self) -> usize {
        self.view.len.max(0) as usize
    }
    fn access(&self) -> Access {
        if self.writable {
            Access::Shared
        } else {
            Access::ReadOnly
        }
    }
}

impl Drop for BufferStorage {
    fn drop(&mut self) {
        let view: *mut PyBuffer = &mut *self.view;
        // After the interpreter is finalised nothing can be released (nor needs to be): the
        // view is left as it is.
        Python::try_attach(|_| {
            // SAFETY: attached; the view GetBuffer filled, released here, once.
            unsafe { cpython::PyBuffer_Release(view) };
        });
    }
}
