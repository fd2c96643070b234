//! `dlport.jax`'s native half: the interposed `PJRT_Api` table (dlport-native's
//! `pjrt::interpose`) as a `pjrt_c_api` capsule JAX registers in the vendor's place, and the
//! export of a `jax.Array`'s own `PJRT_Buffer`, learnt through that table. The JAX surfaces
//! themselves are named in the Python half (`python/dlport/jax.py`).

use std::ffi::{CStr, c_void};

use dlport_core::CopyPolicy;
use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DeviceType, RawManaged};
use dlport_native::pjrt::interpose::{self, Interposition};
use dlport_native::pjrt::{ClientOptions, PjrtClient, PjrtPlugin};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::adapter::Failure;
use crate::pjrt::PyPjrtClient;
use crate::{capsule, errors};

/// The name JAX gives a capsule holding a `PJRT_Api*`.
const PJRT_C_API: &CStr = c"pjrt_c_api";

/// The `PJRT_Api*` in a `pjrt_c_api` capsule; anything else is a `TypeError`.
fn table_of(obj: &Bound<'_, PyAny>) -> PyResult<*const c_void> {
    // SAFETY: a live object; IsValid checks the type and the name, and never raises.
    if unsafe { ffi::PyCapsule_IsValid(obj.as_ptr(), PJRT_C_API.as_ptr()) } != 1 {
        return Err(errors::type_error(format!(
            "expected a \"pjrt_c_api\" capsule (a PJRT_Api*, as \
             jax._src.lib._jax.get_pjrt_plugin returns), got {}",
            capsule::type_name(obj)
        )));
    }
    // SAFETY: a valid capsule of this name: GetPointer returns its (non-NULL) pointer.
    Ok(unsafe { ffi::PyCapsule_GetPointer(obj.as_ptr(), PJRT_C_API.as_ptr()) }.cast_const())
}

/// Interposes dlport's table over the vendor's (`vendor`, a `pjrt_c_api` capsule) and returns
/// it as a `pjrt_c_api` capsule. `device_type` is the DLPack code of the platform's memory
/// (kDLExtDev when `None`); `rename` makes the table answer that platform name;
/// `hooks=False` interposes the renaming alone (a stand-in vendor for tests), `stubs` names
/// functions the table leaves NULL (a stand-in for plugins that lack them). The same vendor
/// and arguments give the same table.
#[pyfunction]
#[pyo3(signature = (vendor, /, *, origin, device_type=None, rename=None, hooks=true, stubs=Vec::new()))]
pub fn _jax_interpose<'py>(
    py: Python<'py>,
    vendor: &Bound<'py, PyAny>,
    origin: &str,
    device_type: Option<i32>,
    rename: Option<String>,
    hooks: bool,
    stubs: Vec<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let table = table_of(vendor)?;
    let what = Interposition {
        rename,
        hooks,
        stubs,
        device_type: device_type.map(DeviceType),
    };
    // SAFETY: JAX's capsule holds the vendor's loaded PJRT_Api, which stays loaded for the
    // process (JAX never unloads plugins).
    let ours = unsafe { interpose::interpose(table, &what, origin) }.map_err(Failure::from)?;
    // SAFETY: a non-NULL pointer that lives for the process, a static name, no destructor.
    let cap = unsafe { ffi::PyCapsule_New(ours.cast_mut(), PJRT_C_API.as_ptr(), None) };
    if cap.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference we own.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) })
}

/// Exports the `PJRT_Buffer` that `learn()` makes JAX touch through an interposed table (JAX's
/// `unsafe_buffer_pointer()`, called on this thread) as a DLPack capsule: readiness awaited,
/// its layout asked, the buffer pinned (JAX's `Destroy`/`Delete` of it wait) and an external
/// reference held until the capsule's consumer releases it. `versioned` gives DLPack 1.x with
/// READ_ONLY. Where the plugin lacks what a view needs, or `copy=True`, the export is one host
/// copy (`PJRT_Buffer_ToHostBuffer`, IS_COPIED) where `copy` allows; `copy=False` refuses,
/// naming the missing function. Returns the capsule and its `(device_type, device_id)`. When
/// no interposed table saw a buffer, a `BufferError` says so, with `learn()`'s
/// own error if it raised.
#[pyfunction]
#[pyo3(signature = (learn, /, *, versioned=true, copy=None))]
pub fn _jax_export<'py>(
    py: Python<'py>,
    learn: &Bound<'py, PyAny>,
    versioned: bool,
    copy: Option<bool>,
) -> PyResult<(Bound<'py, PyAny>, (i32, i32))> {
    let policy = CopyPolicy::from_copy(copy);
    let (called, learnt) = interpose::learn(|| learn.call0());
    let Some(learnt) = learnt else {
        let why = match called {
            Err(e) => format!(" (it raised: {e})"),
            Ok(_) => String::new(),
        };
        return Err(errors::buffer_error(format!(
            "dlport's interposed PJRT table saw no buffer of this array{why}: the array must \
             be on a platform that dlport.jax.install(platform) interposed before JAX made its \
             backend, and not deleted"
        )));
    };
    let m = py
        .detach(move || interpose::export(learnt, versioned, policy))
        .map_err(Failure::from)?;
    let device = m.view().device();
    let raw: RawManaged = m.into_raw();
    Ok((
        capsule::wrap(py, raw)?,
        (device.device_type.0, device.device_id),
    ))
}

/// How many exports pin the `PJRT_Buffer*` at `address` (0: none), for tests.
#[pyfunction]
pub fn _jax_pins(address: usize) -> usize {
    interpose::pins(address as *const c_void)
}

/// JAX's own client of the platform interposed by `table` (a `pjrt_c_api` capsule), borrowed
/// as a `dlport.pjrt.PjrtClient`: a counted reference, so neither JAX's `Destroy` of its
/// client nor this value's end destroys it while the other holds it. `device_type` is the
/// platform's DLPack device type. Registered as a backend of the package's registry, as
/// `dlport.pjrt.load`'s clients are. A `BufferError` before JAX made the backend.
#[pyfunction]
#[pyo3(signature = (table, /, *, origin, device_type))]
pub fn _jax_borrow_client(
    table: &Bound<'_, PyAny>,
    origin: &str,
    device_type: i32,
) -> PyResult<PyPjrtClient> {
    let table = table_of(table)?;
    let raw = interpose::borrow_client(table).ok_or_else(|| {
        errors::buffer_error(format!(
            "dlport.jax.client({origin:?}): JAX has no live client made through dlport's table \
             (its backend is not made yet, or was destroyed)"
        ))
    })?;
    let options = ClientOptions {
        device_type: Some(DeviceType(device_type)),
        ..ClientOptions::default()
    };
    // SAFETY: dlport's interposed table, over the vendor's table JAX loaded and initialized,
    // both kept for the process.
    let client = match unsafe { PjrtPlugin::initialized(table, origin) } {
        // SAFETY: a counted reference to JAX's live client of this table, handed over.
        Ok(plugin) => unsafe { PjrtClient::adopt(&plugin, raw, &options) },
        Err(e) => {
            // SAFETY: the reference borrow_client gave, given back once.
            unsafe { interpose::give_back_client(table, raw) };
            Err(e)
        }
    };
    let client = client.map_err(Failure::from)?;
    // A backend of the package's registry like every loaded client, so that its buffers'
    // exports and imports follow that registry's rules.
    crate::adapter::registry();
    dlport_native::interop::pjrt::register_default(&client).map_err(Failure::from)?;
    Ok(PyPjrtClient::of(client))
}

/// What `dlport.jax.from_dlpack` checks of a producer's capsule on a device dlport has no
/// backend for, read without consuming it: `(device_type, device_id, flags, address,
/// row_major)`, where `address` is `data + byte_offset` and `row_major` says the strides are
/// absent or compact row-major. A capsule that is not an unconsumed DLPack one, or whose shape
/// is unreadable, is a `ValueError`.
#[pyfunction]
pub fn _jax_capsule_facts(obj: &Bound<'_, PyAny>) -> PyResult<(i32, i32, u64, usize, bool)> {
    let (tensor, flags) = [(c"dltensor_versioned", true), (c"dltensor", false)]
        .into_iter()
        .find_map(|(name, versioned)| {
            // SAFETY: a live object; IsValid checks type and name and never raises.
            if unsafe { ffi::PyCapsule_IsValid(obj.as_ptr(), name.as_ptr()) } != 1 {
                return None;
            }
            // SAFETY: valid with this name: its pointer, non-NULL.
            let p = unsafe { ffi::PyCapsule_GetPointer(obj.as_ptr(), name.as_ptr()) };
            Some(if versioned {
                let m = p.cast::<DLManagedTensorVersioned>();
                // SAFETY: an unconsumed versioned capsule holds a live managed tensor.
                unsafe { (std::ptr::addr_of!((*m).dl_tensor), (*m).flags) }
            } else {
                let m = p.cast::<DLManagedTensor>();
                // SAFETY: an unconsumed legacy capsule holds a live managed tensor.
                unsafe { (std::ptr::addr_of!((*m).dl_tensor), 0) }
            })
        })
        .ok_or_else(|| errors::value_error("expected an unconsumed DLPack capsule"))?;
    // SAFETY: the producer's live DLTensor, read field by field.
    let t = unsafe { &*tensor };
    let ndim = usize::try_from(t.ndim)
        .ok()
        .filter(|&n| n <= 64 && (n == 0 || !t.shape.is_null()))
        .ok_or_else(|| errors::value_error(format!("ndim {} is unreadable", t.ndim)))?;
    let shape = if ndim == 0 {
        &[][..]
    } else {
        // SAFETY: `ndim` dims (checked non-NULL), the producer's for the tensor's life.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let row_major = t.strides.is_null() || {
        // SAFETY: `ndim` strides, the producer's for the tensor's life.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut want = 1i64;
        let mut ok = true;
        for (&n, &st) in shape.iter().zip(strides).rev() {
            if n != 1 && st != want {
                ok = false;
            }
            want = want.saturating_mul(n.max(0));
        }
        ok
    };
    let address = (t.data as usize).wrapping_add(t.byte_offset as usize);
    Ok((
        t.device.device_type.0,
        t.device.device_id,
        flags,
        address,
        row_major,
    ))
}

/// How many host copies `dlport.jax` exports made in this process.
#[pyfunction]
pub fn _jax_host_copies() -> usize {
    interpose::host_copies()
}

/// The `PJRT_Client*` JAX created through the interposed table `table` (a `pjrt_c_api`
/// capsule), as an address; 0 before JAX made the backend.
#[pyfunction]
pub fn _jax_client(table: &Bound<'_, PyAny>) -> PyResult<usize> {
    Ok(interpose::host_client(table_of(table)?) as usize)
}

/// The DLPack device type of an interposed table's platform (a `pjrt_c_api` capsule that
/// `_jax_interpose` returned).
#[pyfunction]
pub fn _jax_device_type(table: &Bound<'_, PyAny>) -> PyResult<i32> {
    interpose::table_device_type(table_of(table)?)
        .map(|t| t.0)
        .ok_or_else(|| errors::value_error("the capsule is not one of dlport's interposed tables"))
}

/// Adds `dlport.jax`'s native functions to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_jax_interpose, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_export, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_pins, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_host_copies, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_borrow_client, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_capsule_facts, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_client, m)?)?;
    m.add_function(wrap_pyfunction!(_jax_device_type, m)?)?;
    Ok(())
}
