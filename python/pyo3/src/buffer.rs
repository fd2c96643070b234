//! The buffer protocol (PEP 3118) for tensors in host-accessible memory: `memoryview(t)`,
//! `bytes(t)`, `numpy.asarray(t)`, `array`, `struct` — without a copy.
//!
//! pyo3 generates `__getbuffer__` only where the limited API has `Py_buffer` (3.11 and later),
//! and the wheel is abi3 for CPython 3.9. So, as pyo3 itself does for static types under
//! abi3 < 3.10, the binding writes its two functions into the heap type's own `PyBufferProcs`
//! once, at import, through the declarations of [`crate::cpython`], after they agreed with
//! what CPython reports; if they do not, nothing is written and importing dlport warns
//! (`RuntimeWarning`) that `dlport.Tensor` has no buffer protocol on this interpreter.

use std::ffi::{c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;

use pyo3::exceptions::{PyRuntimeError, PyRuntimeWarning};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::cpython::{
    self, BufferProcs, GetBuffer, PY_BF_GETBUFFER, PY_BUF_ANY_CONTIGUOUS, PY_BUF_C_CONTIGUOUS,
    PY_BUF_F_CONTIGUOUS, PY_BUF_FORMAT, PY_BUF_ND, PY_BUF_STRIDES, PY_BUF_WRITABLE, PyBuffer,
};
use crate::errors::buffer_error;
use crate::geometry;
use crate::tensor::PyTensor;

/// Installs the buffer protocol on `dlport.Tensor` (after [`cpython::check`]); where the
/// type does not look as CPython's do, warns instead and writes nothing.
pub fn install(ty: &Bound<'_, PyType>) -> PyResult<()> {
    let py = ty.py();
    let unsupported = |what: &str| {
        let message = format!(
            "dlport.Tensor has no buffer protocol on this interpreter ({what}): take its \
             memory through DLPack instead (numpy.from_dlpack(t))"
        );
        let category = py.get_type::<PyRuntimeWarning>();
        PyErr::warn(py, &category, &std::ffi::CString::new(message)?, 1)
    };
    let tp = ty.as_type_ptr();
    let Some(head) = cpython::head(ty) else {
        return unsupported("its type objects do not have the layout of CPython 3.9 to 3.14");
    };
    // SAFETY: a type object whose head agrees with CPython's (checked by `cpython::check`).
    let procs: *mut BufferProcs = unsafe { (*head).tp_as_buffer };
    // A heap type's PyBufferProcs sits inside its own (larger) allocation.
    let inside = (procs as usize) > (tp as usize) && (procs as usize) < (tp as usize) + 4096;
    if !inside {
        return unsupported("the type's PyBufferProcs is not its own");
    }
    // SAFETY: PyType_GetSlot reads the slot through tp_as_buffer; for a heap type it does not
    // raise for a slot number it knows.
    if !unsafe { ffi::PyType_GetSlot(tp, PY_BF_GETBUFFER) }.is_null() {
        return unsupported("the type has a buffer protocol already");
    }
    // SAFETY: `procs` is the type's own PyBufferProcs (checked above), written once, at import,
    // before any instance exists; PyType_Modified drops CPython's caches of the type.
    unsafe {
        (*procs).bf_getbuffer = Some(get_buffer);
        (*procs).bf_releasebuffer = Some(release_buffer);
        ffi::PyType_Modified(tp);
    }
    // SAFETY: as above.
    let seen = unsafe { ffi::PyType_GetSlot(tp, PY_BF_GETBUFFER) };
    if seen != get_buffer as GetBuffer as *mut c_void {
        return Err(PyRuntimeError::new_err(
            "dlport could not install the buffer protocol on dlport.Tensor",
        ));
    }
    Ok(())
}

/// `bf_getbuffer`.
///
/// # Safety
/// Called by CPython, attached, with an instance of the type and a writable view.
unsafe extern "C" fn get_buffer(
    obj: *mut ffi::PyObject,
    view: *mut PyBuffer,
    flags: c_int,
) -> c_int {
    Python::attach(|py| {
        // SAFETY: forwarded contract.
        let outcome = catch_unwind(AssertUnwindSafe(|| unsafe { fill(py, obj, view, flags) }))
            .unwrap_or_else(|_| Err(PyRuntimeError::new_err("dlport panicked in getbuffer")));
        match outcome {
            Ok(()) => 0,
            Err(e) => {
                if !view.is_null() {
                    // SAFETY: writable (contract); CPython requires obj = NULL on failure.
                    unsafe { (*view).obj = null_mut() };
                }
                e.restore(py);
                -1
            }
        }
    })
}

/// Fills `view` for a tensor in host memory, honouring the consumer's flags.
///
/// # Safety
/// As [`get_buffer`].
unsafe fn fill(
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    view: *mut PyBuffer,
    flags: c_int,
) -> PyResult<()> {
    if view.is_null() {
        return Err(buffer_error("getbuffer: the view is NULL"));
    }
    // SAFETY: a live instance (contract), borrowed for the call.
    let any = unsafe { Borrowed::from_ptr(py, obj) };
    let h = any.cast::<PyTensor>()?.get().tensor();
    let Some(address) = h.first_element_address() else {
        return Err(buffer_error(format!(
            "the tensor is in {} memory, which the buffer protocol cannot reach: copy it to the \
             host with dlport.from_dlpack(t, device=\"cpu\")",
            h.device()
        )));
    };
    if flags & PY_BUF_WRITABLE != 0 && h.is_read_only() {
        return Err(buffer_error(
            "the tensor is read-only (READ_ONLY): ask for a read-only buffer",
        ));
    }
    let geometry = geometry::buffer(h.dtype(), h.shape(), h.strides()).map_err(buffer_error)?;
    let contiguity = h.contiguity();
    let c_ok = contiguity.is_row_major();
    let strided = flags & PY_BUF_STRIDES == PY_BUF_STRIDES;
    let need = if !strided || flags & PY_BUF_C_CONTIGUOUS == PY_BUF_C_CONTIGUOUS {
        Some(("C-contiguous", c_ok))
    } else if flags & PY_BUF_F_CONTIGUOUS == PY_BUF_F_CONTIGUOUS {
        Some(("Fortran-contiguous", contiguity.is_column_major()))
    } else if flags & PY_BUF_ANY_CONTIGUOUS == PY_BUF_ANY_CONTIGUOUS {
        Some(("contiguous", c_ok || contiguity.is_column_major()))
    } else {
        None
    };
    if let Some((what, false)) = need {
        return Err(buffer_error(format!(
            "the consumer needs a {what} buffer and the tensor's strides are {:?} (elements): \
             t.compact() gives a row-major copy",
            h.strides()
        )));
    }
    let ndim = h.shape().len();
    let (itemsize, len, fmt) = (geometry.itemsize, geometry.len, geometry.format);
    let internal = Box::into_raw(Box::new(geometry.dims));
    // SAFETY: `internal` is ours until release_buffer; its elements do not move.
    let base = unsafe { (*internal).as_mut_ptr() };
    // SAFETY: `base + ndim` is inside (or one past the end of) the 2 × ndim elements.
    let strides = unsafe { base.add(ndim) };
    let with_nd = flags & PY_BUF_ND == PY_BUF_ND;
    let filled = PyBuffer {
        buf: address as *mut c_void,
        obj: new_ref(obj),
        len,
        itemsize,
        readonly: c_int::from(h.is_read_only()),
        ndim: ndim as c_int,
        format: if flags & PY_BUF_FORMAT != 0 {
            fmt.as_ptr().cast_mut()
        } else {
            null_mut()
        },
        shape: if with_nd { base } else { null_mut() },
        strides: if strided { strides } else { null_mut() },
        suboffsets: null_mut(),
        internal: internal.cast(),
    };
    // SAFETY: writable (contract).
    unsafe { view.write(filled) };
    Ok(())
}

/// A new strong reference to a live object (`Py_NewRef`, which the 3.9 limited API lacks).
fn new_ref(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: `obj` is the live instance `get_buffer` was called with; the view holds this
    // reference until PyBuffer_Release drops it.
    unsafe { ffi::Py_IncRef(obj) };
    obj
}

/// `bf_releasebuffer`: frees the shape and strides of a view `fill` made.
///
/// # Safety
/// Called by CPython once per successful `get_buffer`, with that view.
unsafe extern "C" fn release_buffer(_obj: *mut ffi::PyObject, view: *mut PyBuffer) {
    // SAFETY: the view `fill` wrote (contract).
    let internal = unsafe { (*view).internal }.cast::<Vec<isize>>();
    if !internal.is_null() {
        // SAFETY: made by Box::into_raw in `fill`, released once (contract).
        drop(unsafe { Box::from_raw(internal) });
        // SAFETY: as above.
        unsafe { (*view).internal = null_mut() };
    }
}
