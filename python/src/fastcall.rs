//! `dlport.from_dlpack` through CPython's vectorcall convention (`METH_FASTCALL |
//! METH_KEYWORDS`) where the running interpreter's stable ABI has it (3.10 and later).
//!
//! The wheel is abi3 for CPython 3.9, where the stable ABI's only convention with keywords is
//! `METH_VARARGS | METH_KEYWORDS`: every call packs its arguments into a new tuple (and keywords
//! into a dict), which cost about 900 instructions per `from_dlpack` call, as much as
//! dlport-core's whole import. pyo3 picks the convention at build time, from the abi3 floor. So
//! at import, on 3.10 and later, the module's `from_dlpack` is replaced by a function object
//! over [`call`], which reads the arguments from the caller's array and calls the same
//! [`import::from_dlpack`] as pyo3's entry does on 3.9. Same arguments, defaults, errors,
//! `__doc__` and `__text_signature__`.

use std::ffi::{CString, c_int};
use std::ptr::null_mut;
use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyModule, PyString, PyTuple};

use crate::import;

/// `METH_FASTCALL` (`methodobject.h`; in the limited API from 3.10, which is when it is used).
const METH_FASTCALL: c_int = 0x0080;

/// `PyCFunctionFastWithKeywords` (declared by pyo3 only for abi3 ≥ 3.10).
type FastWithKeywords = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// The `PyMethodDef` CPython's function object points to for as long as the process lives.
struct Def(ffi::PyMethodDef);

// SAFETY: written once, before it is published through `DEF`, and never again; CPython only
// reads it.
unsafe impl Sync for Def {}
// SAFETY: as above; it holds pointers to 'static data only.
unsafe impl Send for Def {}

/// The method definition and its `ml_doc` (kept alongside: the definition points into it).
static DEF: OnceLock<(CString, Def)> = OnceLock::new();

/// On CPython 3.10 and later, replaces `m.from_dlpack` (pyo3's entry, already added) by the
/// vectorcall entry; its documentation and signature are taken from pyo3's. Earlier versions
/// keep pyo3's entry. Returns whether the vectorcall entry is installed.
pub fn install(m: &Bound<'_, PyModule>) -> PyResult<bool> {
    let py = m.py();
    if py.version_info() < (3, 10) {
        return Ok(false);
    }
    let pyo3_entry = m.getattr(intern!(py, "from_dlpack"))?;
    // CPython's `__text_signature__` comes from `ml_doc`'s first line, "name(sig)\n--\n\n".
    let signature: Option<String> = pyo3_entry
        .getattr(intern!(py, "__text_signature__"))?
        .extract()?;
    let doc: Option<String> = pyo3_entry.getattr(intern!(py, "__doc__"))?.extract()?;
    let text = match signature {
        Some(sig) => format!("from_dlpack{sig}\n--\n\n{}", doc.unwrap_or_default()),
        None => doc.unwrap_or_default(),
    };
    let doc = CString::new(text).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let (_, def) = DEF.get_or_init(|| {
        let def = ffi::PyMethodDef {
            ml_name: c"from_dlpack".as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                // SAFETY: the union's other members are gated off under abi3 < 3.10; a C caller
                // casts function pointers the same way, and CPython calls it as
                // `PyCFunctionFastWithKeywords` because of METH_FASTCALL | METH_KEYWORDS.
                PyCFunction: unsafe {
                    std::mem::transmute::<FastWithKeywords, ffi::PyCFunction>(ENTRY)
                },
            },
            ml_flags: METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        };
        (doc, Def(def))
    });
    let module_name = m.name()?;
    // SAFETY: attached; `def` lives for the rest of the process and is never written again
    // (CPython takes `*mut` but only reads); `module_name` is a str, borrowed for the call.
    let f = unsafe {
        ffi::PyCFunction_NewEx(
            std::ptr::from_ref(&def.0).cast_mut(),
            null_mut(),
            module_name.as_ptr(),
        )
    };
    if f.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, owned here.
    let f = unsafe { Bound::from_owned_ptr(py, f) };
    m.setattr(intern!(py, "from_dlpack"), f)?;
    Ok(true)
}

/// The function CPython calls: pyo3's own trampoline for `METH_FASTCALL | METH_KEYWORDS`
/// functions (what `#[pyfunction]` uses when built for abi3 ≥ 3.10), over [`call`]. It marks
/// the thread attached for pyo3 without `PyGILState_Ensure` (about 300 instructions a call),
/// turns a panic into `pyo3_runtime.PanicException` and an error into a raised exception, as
/// for every other function of the module. It lives in pyo3's `impl_` module, which has no
/// stability promise: pyo3 is pinned to one version in Cargo.toml for that reason.
const ENTRY: FastWithKeywords =
    pyo3::get_trampoline_function!(fastcall_cfunction_with_keywords, call);

/// `from_dlpack(x, /, *, device=None, copy=None)` as CPython calls a `METH_FASTCALL |
/// METH_KEYWORDS` function: `args[..nargs]` positional, then one value per name in `kwnames`.
/// Returns a new reference.
///
/// # Safety
/// Called through [`ENTRY`] by CPython, attached, with `args` holding `nargs` positional
/// arguments followed by `len(kwnames)` keyword values (all borrowed for the call) and
/// `kwnames` a tuple of str or NULL.
unsafe fn call(
    py: Python<'_>,
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    // The messages are pyo3's, so that both entries raise the same errors.
    let names = if kwnames.is_null() {
        None
    } else {
        // SAFETY: a tuple of str (contract), borrowed for the call.
        Some(unsafe { Bound::from_borrowed_ptr(py, kwnames) }.cast_into::<PyTuple>()?)
    };
    if nargs > 1 {
        return Err(PyTypeError::new_err(format!(
            "from_dlpack() takes 1 positional arguments but {nargs} were given"
        )));
    }
    if nargs < 1 {
        let x_by_name = match &names {
            Some(names) => names
                .iter()
                .any(|n| is(&n, intern!(py, "x")).unwrap_or(false)),
            None => false,
        };
        return Err(PyTypeError::new_err(if x_by_name {
            "from_dlpack() got some positional-only arguments passed as keyword arguments: 'x'"
        } else {
            "from_dlpack() missing 1 required positional argument: 'x'"
        }));
    }
    // SAFETY: `args[0]` is a borrowed, live object for the call (contract).
    // Borrowed, not counted: an owned `Bound` would cost a `Py_IncRef` and a `Py_DecRef` call
    // (functions, under the stable ABI) for nothing.
    let x = unsafe { Borrowed::from_ptr(py, *args) };
    let (mut device, mut copy) = (None, None);
    if let Some(names) = names {
        for (i, name) in names.iter().enumerate() {
            // SAFETY: the keyword values follow the one positional argument (contract).
            let value = unsafe { Borrowed::from_ptr(py, *args.add(1 + i)) };
            let slot = if is(&name, intern!(py, "device"))? {
                &mut device
            } else if is(&name, intern!(py, "copy"))? {
                &mut copy
            } else {
                return Err(PyTypeError::new_err(format!(
                    "from_dlpack() got an unexpected keyword argument {}",
                    name.repr()?
                )));
            };
            if slot.replace(value).is_some() {
                return Err(PyTypeError::new_err(format!(
                    "from_dlpack() got multiple values for argument {}",
                    name.repr()?
                )));
            }
        }
    }
    Ok(import::from_dlpack(&x, device.as_deref(), copy.as_deref())?.into_ptr())
}

/// `name` is the keyword `expected`: the same interned string (every keyword written in
/// Python source is interned), else equal text.
fn is(name: &Bound<'_, PyAny>, expected: &Bound<'_, PyString>) -> PyResult<bool> {
    Ok(name.is(expected) || name.eq(expected)?)
}
