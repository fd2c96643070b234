//! The package's keyword arguments, read one way everywhere (`from_dlpack`, `__dlpack__`,
//! `share`): each bad value is a `TypeError` (wrong kind) or `ValueError` (out of range) whose
//! message names the argument and shows the value.

use dlport_core::abi::{DLPackVersion, DeviceType};
use dlport_core::backend::{LayoutNeed, ViewRequirements};
use dlport_core::{CopyPolicy, Device, ExportOptions};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::adapter;
use crate::capsule::type_name;

/// `repr(value)`, cut to a line's worth (the value is the caller's and may be anything).
pub fn shown(value: &Bound<'_, PyAny>) -> String {
    let text = value
        .repr()
        .map_or_else(|_| format!("<{}>", type_name(value)), |r| r.to_string());
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The array API's `copy`: `True`, `False` or `None` (also NumPy's `bool_`).
pub fn copy(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    value.extract::<bool>().map(Some).map_err(|_| {
        crate::errors::type_error(format!(
            "copy must be True, False or None, got {}",
            shown(value)
        ))
    })
}

/// A `True`/`False` argument named `what` (absent or `None`: `False`; NumPy's `bool_` too).
pub fn flag(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<bool> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(false);
    };
    value.extract::<bool>().map_err(|_| {
        crate::errors::type_error(format!(
            "{what} must be True or False, got {}",
            shown(value)
        ))
    })
}

/// Why a value is not the int asked for.
enum Bad {
    /// Not an int at all (`TypeError`).
    Kind,
    /// An int outside the range (`ValueError`).
    Range,
}

/// A Python int (or an object with `__index__`, as NumPy's integers) that fits `T`.
fn int<T: TryFrom<i64>>(value: &Bound<'_, PyAny>) -> Result<T, Bad> {
    match value.extract::<i64>() {
        Ok(v) => T::try_from(v).map_err(|_| Bad::Range),
        Err(e) if e.is_instance_of::<PyOverflowError>(value.py()) => Err(Bad::Range),
        Err(_) => Err(Bad::Kind),
    }
}

/// The error for `value`, given as `what`, which should be `wants`.
fn bad(why: Bad, what: &str, wants: &str, value: &Bound<'_, PyAny>) -> PyErr {
    match why {
        Bad::Kind => {
            crate::errors::type_error(format!("{what} must be {wants}, got {}", shown(value)))
        }
        Bad::Range => crate::errors::value_error(format!(
            "{what} = {} is out of range: it must be {wants}",
            shown(value)
        )),
    }
}

/// A pair of ints `(a, b)`, or the error naming `what`.
fn pair<A: TryFrom<i64>, B: TryFrom<i64>>(
    value: &Bound<'_, PyAny>,
    what: &str,
    wants: &str,
) -> PyResult<(A, B)> {
    let read = || {
        let items = value
            .cast::<PyTuple>()
            .ok()
            .filter(|t| t.len() == 2)
            .ok_or(Bad::Kind)?;
        let a = int::<A>(&items.get_item(0).map_err(|_| Bad::Kind)?)?;
        let b = int::<B>(&items.get_item(1).map_err(|_| Bad::Kind)?)?;
        Ok((a, b))
    };
    read().map_err(|why| bad(why, what, wants, value))
}

/// `__dlpack__`'s `max_version`: `None` or a `(major, minor)` pair.
pub fn max_version(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(u32, u32)>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| {
            pair(
                v,
                "max_version",
                "a (major, minor) pair of ints from 0 to 2**32 - 1",
            )
        })
        .transpose()
}

/// `__dlpack__`'s `stream`: `None` or an int.
pub fn stream(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| {
            let wants = "None or an int from -2**63 to 2**63 - 1";
            int(v).map_err(|why| bad(why, "stream", wants, v))
        })
        .transpose()
}

/// `__dlpack__`'s four arguments as the export's options: `stream`, `max_version` (`None` or
/// major 0: the legacy form), `dl_device` and `copy`, each checked as above; every exporter's
/// `__dlpack__` reads them here.
pub fn export_options(
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<&Bound<'_, PyAny>>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<&Bound<'_, PyAny>>,
) -> PyResult<ExportOptions> {
    Ok(ExportOptions {
        stream: self::stream(stream)?,
        max_version: self::max_version(max_version)?
            .map(|(major, minor)| DLPackVersion::new(major, minor)),
        dl_device: self::dl_device(dl_device)?,
        copy: CopyPolicy::from_copy(self::copy(copy)?),
        ..ExportOptions::default()
    })
}

/// A `(device_type, device_id)` pair, as `__dlpack_device__` returns (`what` names it).
pub fn device_pair(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Device> {
    let (device_type, device_id) = pair::<i32, i32>(
        value,
        what,
        "a (device_type, device_id) pair of ints, as __dlpack_device__ returns",
    )?;
    if device_type <= 0 {
        return Err(crate::errors::value_error(format!(
            "{what} = ({device_type}, {device_id}): the device type must be a DLDeviceType \
             (1 = kDLCPU, 2 = kDLCUDA, ...)"
        )));
    }
    Ok(Device::new(DeviceType(device_type), device_id))
}

/// `__dlpack__`'s `dl_device`: `None` or a `(device_type, device_id)` pair.
pub fn dl_device(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Device>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| device_pair(v, "dl_device"))
        .transpose()
}

/// `from_dlpack`'s `device`: `None`, a name dlport parses (`cpu`, `cuda:1`, `cuda_host`), or a
/// `(device_type, device_id)` pair.
pub fn device(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Device>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(name) = value.cast::<PyString>() {
        let name = name.to_cow().map_err(|_| {
            crate::errors::value_error(format!(
                "device = {} is not valid text (a lone surrogate)",
                shown(value)
            ))
        })?;
        return Ok(Some(adapter::parse_device(&name)?));
    }
    if value.is_instance_of::<PyTuple>() {
        return device_pair(value, "device").map(Some);
    }
    Err(crate::errors::type_error(format!(
        "device must be a name such as \"cpu\" or \"cuda:0\", or a (device_type, device_id) \
         pair as __dlpack_device__ returns; got {}",
        shown(value)
    )))
}

/// `from_dlpack`'s `layout` and `align`: `None` each, `layout="compact"` (row-major compact) or
/// `"any"`, `align` a power of two from 1 to 2^30 bytes (core's range). Both absent: no requirement.
pub fn requirements(
    layout: Option<&Bound<'_, PyAny>>,
    align: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<ViewRequirements>> {
    let layout = layout.filter(|v| !v.is_none());
    let align = alignment(align)?;
    let compact = match layout {
        None => false,
        Some(v) => match v
            .cast::<PyString>()
            .ok()
            .and_then(|s| s.to_cow().ok())
            .as_deref()
        {
            Some("compact") => true,
            Some("any") => false,
            Some(_) => {
                return Err(crate::errors::value_error(format!(
                    "layout = {} is not a layout dlport knows: it must be \"compact\" (row-major \
                     compact, as JAX and TensorFlow need), \"any\" or None",
                    shown(v)
                )));
            }
            None => {
                return Err(crate::errors::type_error(format!(
                    "layout must be \"compact\", \"any\" or None, got {}",
                    shown(v)
                )));
            }
        },
    };
    if layout.is_none() && align.is_none() {
        return Ok(None);
    }
    Ok(Some(ViewRequirements {
        layout: if compact {
            LayoutNeed::RowMajor
        } else {
            LayoutNeed::Any
        },
        alignment: align.unwrap_or(1),
    }))
}

/// A `max_alloc` argument: `None`, or the most bytes (an int from 1) a copy made for the call
/// may allocate. It lowers the process's limit (`dlport.set_alloc_limit`), never raises it:
/// core decides the limit in force, the lowest of the call's, the registry's and the process's,
/// and refuses 0 (`OptionRule::MaxAlloc`: 0 means "none of its own" wherever a limit is a
/// number, `set_alloc_limit(0)` included, so it is never a zero-byte limit).
pub fn max_alloc(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let wants = "a number of bytes from 1 to 2**64 - 1, or None";
    match value.extract::<u64>() {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.is_instance_of::<PyOverflowError>(value.py()) => {
            Err(bad(Bad::Range, "max_alloc", wants, value))
        }
        Err(_) => Err(bad(Bad::Kind, "max_alloc", wants, value)),
    }
}

/// An `align` argument: `None`, or what core's one check takes
/// ([`check_alignment`](dlport_core::backend::check_alignment): a power of two from 1 to
/// [`MAX_ALIGNMENT`](dlport_core::backend::MAX_ALIGNMENT) bytes, as in every door).
pub fn alignment(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let wants = dlport_core::error::OptionRule::Alignment.expected();
    let n = int::<u64>(value).map_err(|why| bad(why, "align", wants, value))?;
    let n = dlport_core::backend::check_alignment(n)
        .map_err(|_| bad(Bad::Range, "align", wants, value))?;
    Ok(Some(n))
}
