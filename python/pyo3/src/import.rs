//! `dlport.from_dlpack`: a tensor from any DLPack producer.

use dlport_core::abi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DeviceType, RawManaged};
use dlport_core::{CopyPolicy, Device, ImportOptions, Tensor};
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyException, PyMemoryError, PyTypeError};
#[cfg(unix)]
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
#[cfg(unix)]
use pyo3::sync::PyOnceLock;
#[cfg(not(unix))]
use pyo3::types::PyDict;
use pyo3::types::PyString;
#[cfg(unix)]
use pyo3::types::PyTuple;

use crate::adapter;
use crate::args;
use crate::capsule::{self, type_name};
use crate::exchange;
use crate::tensor::PyTensor;

/// Imports `x` — any object with `__dlpack__`, or a bare DLPack capsule of either kind — as a
/// `dlport.Tensor`, validated by dlport.
///
/// - Where `type(x)` has `__dlpack_c_exchange_api__` (DLPack 1.3), its C function exports the
///   tensor; nothing Python-level is called. PyTorch's table is skipped: it ignores the
///   conjugate and negative bits, sparse and meta layouts, quantized and `requires_grad`
///   tensors, which torch's `__dlpack__` refuses, so a torch tensor goes through `__dlpack__`
///   (below) and dlport gives exactly torch's own values and refusals.
/// - Otherwise `x.__dlpack_device__()` is asked first, then `x.__dlpack__(max_version=(1, 3))`,
///   and `x.__dlpack__()` where the producer refuses `max_version` (a `TypeError`): a legacy
///   capsule. The capsule's device is reconciled with the advertised one (PyTorch's pinned
///   tensors say `cpu` in the capsule and `cuda_host` in `__dlpack_device__`).
/// - `device` (a name such as `"cpu"` or `"cuda:0"`, or a `(device_type, device_id)` tuple) and
///   `copy` follow the array API: device memory is copied to the host where `copy` allows
///   (`None`: if needed; `True`: always; `False`: never, else `BufferError`).
/// - Pinned or managed memory is presented as `cpu` (every consumer takes `kDLCPU`; JAX, torch
///   and TensorFlow refuse the rest) unless `device` names its own class (`"cuda_host"`);
///   `Tensor.memory` says where it is.
/// - `layout="compact"` (row-major) and `align` (a power of two, in bytes; JAX wants 64) give a
///   consumer the layout it takes: a view where the data already has it, else one copy
///   (`Tensor.copied`; exports carry IS_COPIED).
/// - `max_alloc` (bytes) lowers the allocation limit for this call's copy; it never raises the
///   process's (`dlport.set_alloc_limit`).
#[pyfunction]
#[pyo3(signature = (x, /, *, device=None, copy=None, layout=None, align=None, max_alloc=None))]
pub fn from_dlpack<'py>(
    x: &Bound<'py, PyAny>,
    device: Option<&Bound<'py, PyAny>>,
    copy: Option<&Bound<'py, PyAny>>,
    layout: Option<&Bound<'py, PyAny>>,
    align: Option<&Bound<'py, PyAny>>,
    max_alloc: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTensor>> {
    let target = match device {
        None => None,
        Some(d) => args::device(Some(d))?,
    };
    let copy = match copy {
        None => None,
        Some(c) => args::copy(Some(c))?,
    };
    let options = ImportOptions {
        device: target,
        copy: CopyPolicy::from_copy(copy),
        // Most calls pass neither keyword: nothing to parse.
        requirements: match (layout, align) {
            (None, None) => None,
            _ => args::requirements(layout, align)?,
        },
        max_alloc: match max_alloc {
            None => None,
            Some(m) => args::max_alloc(Some(m))?,
        },
        ..ImportOptions::default()
    };
    take(x, &options, |t| {
        Bound::new(x.py(), PyTensor::new(t, target))
    })
}

/// Imports `x` as `from_dlpack` does, under core's `options` (their `advertised` is what the
/// producer's `__dlpack_device__` says, when it was asked), handing the tensor to `make`.
/// `DLPackTensor`'s extraction and `from_dlpack` both take this one path.
#[inline(always)]
pub fn take<R>(
    x: &Bound<'_, PyAny>,
    options: &ImportOptions,
    make: impl FnOnce(Tensor) -> PyResult<R>,
) -> PyResult<R> {
    let (raw, advertised, immutable) = produce(x)?;
    let options = ImportOptions {
        advertised,
        ..*options
    };
    // SAFETY: `raw` was just handed over by its producer and is owned by nobody else.
    let tensor = unsafe { adapter::import(raw, &options, immutable) }?;
    // The result is made here, where the tensor is: a large value moved through fewer results
    // on its way into it.
    make(tensor)
}

/// The managed tensor of `x`, owned by the caller, the device its producer advertised, and
/// whether the producer's arrays are immutable (their memory is then READ_ONLY).
// Inlined into each caller, as it is when `from_dlpack` is its only one: a call here costs
// about 80 instructions per import (callgrind, BENCHMARKS.md's PyO3 section).
#[inline(always)]
fn produce(x: &Bound<'_, PyAny>) -> PyResult<(RawManaged, Option<Device>, bool)> {
    if capsule::is_capsule(x) {
        return Ok((capsule::take(x)?, None, false));
    }
    // SAFETY: the type of a live object, alive (and borrowed) as long as `x` is.
    let ty = unsafe { Borrowed::from_ptr(x.py(), x.get_type_ptr().cast()).cast_unchecked() };
    let (ask_device, immutable) = match exchange::route(ty)? {
        // The table's tensor carries its device; the exchange API has no second opinion.
        exchange::Route::Exchange(api) => return Ok((exchange::take_from(api, x)?, None, false)),
        exchange::Route::Dunder {
            ask_device,
            immutable,
        } => (ask_device, immutable),
    };
    let py = x.py();
    let advertised = if ask_device {
        match x.getattr_opt(intern!(py, "__dlpack_device__"))? {
            Some(f) => match f.call0() {
                Ok(d) => Some(device_tuple(x, &d)?),
                Err(e) if immutable => return jax_export(x, "__dlpack_device__", e),
                Err(e) => return Err(producer_failed(x, "__dlpack_device__", e)),
            },
            None => None,
        }
    } else {
        None
    };
    let capsule = match call_dlpack(x, true) {
        Ok(c) => c,
        Err(e) if immutable && !e.is_instance_of::<PyTypeError>(py) => {
            return jax_export(x, "__dlpack__", e);
        }
        // A producer from before DLPack 1.0 does not know `max_version`: legacy.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            call_dlpack(x, false).map_err(|e| producer_failed(x, "__dlpack__", e))?
        }
        Err(e)
            if e.is_instance_of::<PyAttributeError>(py)
                && x.getattr_opt(intern!(py, "__dlpack__"))?.is_none() =>
        {
            return Err(crate::errors::type_error(format!(
                "from_dlpack() takes an object with __dlpack__ or a DLPack capsule, got {}",
                type_name(x)
            )));
        }
        Err(e) => return Err(producer_failed(x, "__dlpack__", e)),
    };
    Ok((capsule::take(&capsule)?, advertised, immutable))
}

/// A `jax.Array` whose own DLPack refused in `method` (JAX's DLPack serves cpu, cuda, rocm and
/// oneapi only): exported through `dlport.jax`'s interposed PJRT table when the program imported
/// `dlport.jax` and installed it on some platform (`dlport.jax.to_dlpack`: JAX's own buffer, a
/// READ_ONLY view where the plugin allows one). Otherwise, or when the array is on no installed
/// platform, JAX's refusal is reported as every producer's is (with `dlport.jax`'s reason, when
/// it has one, as the error and JAX's as its cause). Only the failure path pays for this.
#[cold]
fn jax_export(
    x: &Bound<'_, PyAny>,
    method: &str,
    refused: PyErr,
) -> PyResult<(RawManaged, Option<Device>, bool)> {
    let py = x.py();
    let jax = py
        .import(intern!(py, "sys"))?
        .getattr(intern!(py, "modules"))?
        .call_method1(intern!(py, "get"), (intern!(py, "dlport.jax"),))?;
    let installed = !jax.is_none() && jax.call_method0(intern!(py, "installed"))?.len()? > 0;
    if !installed {
        return Err(producer_failed(x, method, refused));
    }
    match jax.call_method1(intern!(py, "to_dlpack"), (x,)) {
        Ok(capsule) => Ok((capsule::take(&capsule)?, None, true)),
        Err(e) => {
            e.set_cause(py, Some(refused));
            Err(e)
        }
    }
}

/// A producer's own failure in `method`, as dlport reports every tensor that cannot cross: a
/// `BufferError` (a `DLPackBufferError` naming the producer and the method, the producer's
/// exception as its `__cause__`). The producer's `BufferError`s, `MemoryError`s and exceptions
/// that are not `Exception`s (`KeyboardInterrupt`) pass through unchanged. torch's meta,
/// quantized and sparse tensors fail this way (`ValueError`, `RuntimeError`).
fn producer_failed(x: &Bound<'_, PyAny>, method: &str, e: PyErr) -> PyErr {
    let py = x.py();
    if e.is_instance_of::<PyBufferError>(py)
        || e.is_instance_of::<PyMemoryError>(py)
        || !e.is_instance_of::<PyException>(py)
    {
        return e;
    }
    let what = e
        .value(py)
        .repr()
        .map_or_else(|_| "?".into(), |r| r.to_string());
    let wrapped = crate::errors::buffer_error(format!(
        "{}.{method}() failed, so the tensor cannot cross: {what}",
        type_name(x)
    ));
    wrapped.set_cause(py, Some(e));
    wrapped
}

/// `x.__dlpack__(max_version=(1, 3))`, or `x.__dlpack__()` when not `versioned`.
#[cfg(unix)]
fn call_dlpack<'py>(x: &Bound<'py, PyAny>, versioned: bool) -> PyResult<Bound<'py, PyAny>> {
    // Public CPython API since 3.9 (in the limited API from 3.12): a method call without a bound
    // method object or a keyword dict. Not declared by pyo3 for abi3-py39, hence here.
    unsafe extern "C" {
        fn PyObject_VectorcallMethod(
            name: *mut ffi::PyObject,
            args: *const *mut ffi::PyObject,
            nargsf: usize,
            kwnames: *mut ffi::PyObject,
        ) -> *mut ffi::PyObject;
    }
    static KWNAMES: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
    static VERSION: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
    let py = x.py();
    let name = intern!(py, "__dlpack__");
    let result = if versioned {
        let kwnames = KWNAMES.get_or_init(py, || {
            // Interned, as keywords in Python source are: the producer's argument parser
            // then matches it by address (a text comparison cost about 270 instructions).
            PyTuple::new(py, [PyString::intern(py, "max_version")])
                .expect("a tuple")
                .unbind()
        });
        let version = VERSION.get_or_init(py, || {
            PyTuple::new(py, [DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION])
                .expect("a tuple")
                .unbind()
        });
        let args = [x.as_ptr(), version.as_ptr()];
        // SAFETY: attached; `args` holds the receiver then the one keyword value named by
        // `kwnames`, all borrowed for the call; one positional argument (the receiver).
        unsafe { PyObject_VectorcallMethod(name.as_ptr(), args.as_ptr(), 1, kwnames.as_ptr()) }
    } else {
        let args = [x.as_ptr()];
        // SAFETY: as above, without keywords.
        unsafe { PyObject_VectorcallMethod(name.as_ptr(), args.as_ptr(), 1, std::ptr::null_mut()) }
    };
    if result.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference returned to us.
    Ok(unsafe { Bound::from_owned_ptr(py, result) })
}

/// `x.__dlpack__(max_version=(1, 3))`, or `x.__dlpack__()` when not `versioned`.
#[cfg(not(unix))]
fn call_dlpack<'py>(x: &Bound<'py, PyAny>, versioned: bool) -> PyResult<Bound<'py, PyAny>> {
    let py = x.py();
    let name = intern!(py, "__dlpack__");
    if !versioned {
        return x.call_method0(name);
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION))?;
    x.call_method(name, (), Some(&kwargs))
}

/// `__dlpack_device__()`'s answer as a device.
///
/// A `None` id is read as 0 for host memory (kDLCPU, pinned, managed), the id DLPack gives it:
/// Paddle 3.3 answers `(kDLCPU, None)` and `(kDLCUDAHost, None)`. A device of another type
/// needs its ordinal. The id itself is checked by the rule of device ids on import.
fn device_tuple(x: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Device> {
    let refuse = |why: &str| {
        crate::errors::type_error(format!(
            "{}.__dlpack_device__() returned {}, not a (device_type, device_id) pair of ints{why}",
            type_name(x),
            value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    };
    let (device_type, device_id) = value
        .extract::<(i32, Option<i32>)>()
        .map_err(|_| refuse(""))?;
    let device_type = DeviceType(device_type);
    let device_id = match device_id {
        Some(id) => id,
        None if dlport_core::backend::MemoryClass::of(device_type).is_host_accessible() => 0,
        None => {
            return Err(refuse(
                " (a device id of None is read as 0 only for host memory; a device needs its \
                 ordinal)",
            ));
        }
    };
    Ok(Device::new(device_type, device_id))
}

/// How `from_dlpack` takes a tensor from `x` (for `dlport.explain`): `"capsule"`,
/// `"exchange"` (the type's DLPack 1.3 C exchange API), `"dunder"` (`__dlpack_device__`, then
/// `__dlpack__`), or `"dunder-no-device"` (NumPy's `ndarray`: host memory only, its
/// `__dlpack_device__` adds nothing).
#[pyfunction]
pub fn _route(x: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    if capsule::is_capsule(x) {
        return Ok("capsule");
    }
    // SAFETY: the type of a live object, alive (and borrowed) as long as `x` is.
    let ty = unsafe { Borrowed::from_ptr(x.py(), x.get_type_ptr().cast()).cast_unchecked() };
    Ok(match exchange::route(ty)? {
        exchange::Route::Exchange(_) => "exchange",
        exchange::Route::Dunder {
            ask_device: true, ..
        } => "dunder",
        exchange::Route::Dunder {
            ask_device: false, ..
        } => "dunder-no-device",
    })
}
