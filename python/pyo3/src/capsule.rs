//! DLPack capsules: taking the tensor out of one (and marking it used), making one around an
//! export, and the destructor that releases an export nobody consumed.

use std::ffi::CStr;
use std::ptr::{NonNull, null_mut};

use dlport_core::abi::RawManaged;
use pyo3::ffi;
use pyo3::prelude::*;

/// Unconsumed and consumed names, by form. Capsules keep a pointer to their name: these are
/// statics.
const VERSIONED: &CStr = c"dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";

/// Whether `obj` is a PyCapsule (of any name).
pub fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a live object; the check only reads its type.
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) != 0 }
}

/// Takes the managed tensor out of a DLPack capsule and renames the capsule `used_*`, so that
/// neither its destructor nor another consumer touches the tensor again: from here on the caller
/// owns it. A consumed capsule or any other name is a `ValueError` that says which; anything
/// but a capsule is a `TypeError`.
pub fn take(obj: &Bound<'_, PyAny>) -> PyResult<RawManaged> {
    if !is_capsule(obj) {
        return Err(crate::errors::type_error(format!(
            "expected a DLPack capsule or an object with __dlpack__, got {}",
            type_name(obj)
        )));
    }
    let capsule = obj.as_ptr();
    // SAFETY: a capsule; GetName returns its name (NULL for an unnamed one) without raising.
    let name = unsafe { ffi::PyCapsule_GetName(capsule) };
    // SAFETY: a capsule's name is a NUL-terminated string that outlives the capsule.
    let text = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
    let (used, versioned) = match text {
        Some(t) if t == VERSIONED => (USED_VERSIONED, true),
        Some(t) if t == LEGACY => (USED_LEGACY, false),
        _ => return Err(misnamed(text)),
    };
    // SAFETY: a capsule with this very name, so GetPointer returns its pointer (never NULL: a
    // capsule cannot hold NULL) without raising.
    let ptr = unsafe { ffi::PyCapsule_GetPointer(capsule, name) };
    let ptr = NonNull::new(ptr).ok_or_else(|| crate::errors::value_error("capsule holds NULL"))?;
    // SAFETY: a capsule and a static name; renaming only fails for non-capsules.
    if unsafe { ffi::PyCapsule_SetName(capsule, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    Ok(if versioned {
        RawManaged::Versioned(ptr.cast())
    } else {
        RawManaged::Legacy(ptr.cast())
    })
}

/// The error for a capsule whose name (`None`: NULL) is not an unconsumed DLPack one.
fn misnamed(name: Option<&CStr>) -> PyErr {
    let name = name.map_or_else(
        || "NULL".to_owned(),
        |n| format!("{:?}", n.to_string_lossy()),
    );
    if name.starts_with("\"used_") {
        return crate::errors::value_error(format!(
            "the DLPack capsule was already consumed (its name is {name}): a capsule can be \
             imported once; ask the producer for a new one"
        ));
    }
    crate::errors::value_error(format!(
        "the capsule's name is {name}, not \"dltensor_versioned\" or \"dltensor\": it does not \
         hold a DLPack tensor"
    ))
}

/// Wraps an export in a new, unconsumed capsule that owns it; if the capsule cannot be made,
/// the export is released.
pub fn wrap(py: Python<'_>, raw: RawManaged) -> PyResult<Bound<'_, PyAny>> {
    let (ptr, name) = match raw {
        RawManaged::Versioned(p) => (p.as_ptr().cast(), VERSIONED),
        RawManaged::Legacy(p) => (p.as_ptr().cast(), LEGACY),
    };
    // SAFETY: a non-NULL pointer, a static name and a destructor of the right signature.
    let capsule = unsafe { ffi::PyCapsule_New(ptr, name.as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so the export is still ours alone.
        unsafe { raw.release() };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference we own.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// The destructor of dlport's capsules: releases the tensor only while the capsule still bears
/// its unconsumed name (a consumer that renamed it owns the tensor). CPython may run it while an
/// exception is set (a temporary capsule dropped during unwinding); that exception is kept.
///
/// # Safety
/// Called by CPython, attached to the interpreter, with a capsule made by [`wrap`].
unsafe extern "C" fn destructor(capsule: *mut ffi::PyObject) {
    let (mut kind, mut value, mut traceback) = (null_mut(), null_mut(), null_mut());
    // SAFETY: attached (contract); saves any pending exception.
    unsafe { ffi::PyErr_Fetch(&mut kind, &mut value, &mut traceback) };
    for (name, versioned) in [(VERSIONED, true), (LEGACY, false)] {
        // SAFETY: a capsule (contract); IsValid never raises.
        if unsafe { ffi::PyCapsule_IsValid(capsule, name.as_ptr()) } != 1 {
            continue;
        }
        // SAFETY: valid with this name: GetPointer returns its pointer without raising.
        let ptr = unsafe { ffi::PyCapsule_GetPointer(capsule, name.as_ptr()) };
        if let Some(ptr) = NonNull::new(ptr) {
            let raw = if versioned {
                RawManaged::Versioned(ptr.cast())
            } else {
                RawManaged::Legacy(ptr.cast())
            };
            // SAFETY: an unconsumed capsule owns its tensor, released once, here.
            unsafe { raw.release() };
        }
        break;
    }
    // SAFETY: restores exactly what was fetched (the references are handed back).
    unsafe { ffi::PyErr_Restore(kind, value, traceback) };
}

/// `module.qualname` of an object's type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    let ty = obj.get_type();
    let module = ty
        .module()
        .map(|m| m.to_string())
        .unwrap_or_else(|_| "?".into());
    let name = ty
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    if module == "builtins" {
        name
    } else {
        format!("{module}.{name}")
    }
}
