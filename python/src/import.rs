//! `dlport.from_dlpack`: a tensor from any DLPack producer.

use dlport_core::abi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
use dlport_core::{Device, DeviceType, RawManaged};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use crate::adapter::{self, Import};
use crate::capsule::{self, type_name};
use crate::exchange;
use crate::tensor::PyTensor;

/// Imports `x` — any object with `__dlpack__`, or a bare DLPack capsule of either kind — as a
/// `dlport.Tensor`, validated by dlport.
///
/// - Where `type(x)` has `__dlpack_c_exchange_api__` (DLPack 1.3), its C function exports the
///   tensor; nothing Python-level is called.
/// - Otherwise `x.__dlpack_device__()` is asked first, then `x.__dlpack__(max_version=(1, 3))`,
///   and `x.__dlpack__()` where the producer refuses `max_version` (a `TypeError`): a legacy
///   capsule. The capsule's device is reconciled with the advertised one (PyTorch's pinned
///   tensors say `cpu` in the capsule and `cuda_host` in `__dlpack_device__`).
/// - `device` (a name such as `"cpu"` or `"cuda:0"`, or a `(device_type, device_id)` tuple) and
///   `copy` follow the array API: `device="cpu"` shows pinned or managed memory without a copy;
///   device memory is copied to the host where `copy` allows (`None`: if needed; `True`:
///   always; `False`: never, else `BufferError`).
#[pyfunction]
#[pyo3(signature = (x, /, *, device=None, copy=None))]
pub fn from_dlpack(
    x: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<PyTensor> {
    let target = device.map(device_arg).transpose()?;
    let (raw, advertised) = produce(x)?;
    let how = Import {
        device: target,
        advertised,
        copy,
    };
    // SAFETY: `raw` was just handed over by its producer and is owned by nobody else.
    let held = unsafe { adapter::import(raw, &how) }?;
    Ok(PyTensor::new(held, target))
}

/// The managed tensor of `x`, owned by the caller, and the device its producer advertised.
fn produce(x: &Bound<'_, PyAny>) -> PyResult<(RawManaged, Option<Device>)> {
    if capsule::is_capsule(x) {
        return Ok((capsule::take(x)?, None));
    }
    if let Some(api) = exchange::lookup(&x.get_type())? {
        // The table's tensor carries its device; the exchange API has no second opinion.
        return Ok((exchange::take_from(api, x)?, None));
    }
    let py = x.py();
    let Some(dlpack) = x.getattr_opt(intern!(py, "__dlpack__"))? else {
        return Err(PyTypeError::new_err(format!(
            "from_dlpack() takes an object with __dlpack__ or a DLPack capsule, got {}",
            type_name(x)
        )));
    };
    let advertised = match x.getattr_opt(intern!(py, "__dlpack_device__"))? {
        Some(f) => Some(device_tuple(x, &f.call0()?)?),
        None => None,
    };
    let capsule = match dlpack.call((), Some(max_version_kwargs(py))) {
        Ok(c) => c,
        // A producer from before DLPack 1.0 does not know `max_version`: legacy.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => dlpack.call0()?,
        Err(e) => return Err(e),
    };
    Ok((capsule::take(&capsule)?, advertised))
}

/// `{"max_version": (1, 3)}`, made once.
fn max_version_kwargs(py: Python<'_>) -> &Bound<'_, PyDict> {
    static KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    KWARGS
        .get_or_init(py, || {
            let d = PyDict::new(py);
            d.set_item("max_version", (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION))
                .expect("a new dict takes a str key");
            d.unbind()
        })
        .bind(py)
}

/// `__dlpack_device__()`'s answer as a device.
fn device_tuple(x: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Device> {
    let (device_type, device_id) = value.extract::<(i32, i32)>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{}.__dlpack_device__() returned {}, not a (device_type, device_id) pair of ints",
            type_name(x),
            value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    })?;
    Ok(Device::new(DeviceType(device_type), device_id))
}

/// The `device` argument: a name dlport parses (`cpu`, `cuda:1`, `cuda_host`), or a
/// `(device_type, device_id)` tuple as `__dlpack_device__` returns.
pub fn device_arg(value: &Bound<'_, PyAny>) -> PyResult<Device> {
    if let Ok(name) = value.cast::<PyString>() {
        return Ok(adapter::parse_device(&name.to_cow()?)?);
    }
    if let Ok((device_type, device_id)) = value.extract::<(i32, i32)>() {
        if device_type <= 0 {
            return Err(PyValueError::new_err(format!(
                "device = ({device_type}, {device_id}): the device type must be a DLDeviceType \
                 (1 = kDLCPU, 2 = kDLCUDA, ...)"
            )));
        }
        return Ok(Device::new(DeviceType(device_type), device_id));
    }
    Err(PyTypeError::new_err(format!(
        "device must be a name such as \"cpu\" or \"cuda:0\", or a (device_type, device_id) \
         tuple as __dlpack_device__ returns; got {}",
        type_name(value)
    )))
}
