//! A free list of `dlport.Tensor` objects, guarded by the GIL.
//!
//! Every import makes a `dlport.Tensor` and most programs drop it soon after. pyo3 makes every
//! class a GC type: a new object is zeroed, allocated and tracked by the cycle collector (a
//! tracked object counts towards the next collection). pyo3's own `freelist` option keeps dead
//! objects, but behind a mutex: two locked operations per object made and two per object
//! freed, about 9 ns each on the benchmark's 2-core host, 36 ns of a 400 ns import. Here the
//! list is guarded by what already serialises every `tp_alloc` and `tp_free` of the type: the
//! GIL. At import, the type's `tp_alloc` and `tp_free` (pyo3 leaves CPython's defaults,
//! `PyType_GenericAlloc` and `PyObject_GC_Del`) are replaced by [`alloc`] and [`free`], after
//! the layout is checked as for the buffer protocol ([`crate::heaptype`]); where a check
//! disagrees, or the interpreter runs without the GIL, nothing is written.
//!
//! A kept object is one pyo3's `tp_dealloc` finished with: untracked, its weak references
//! cleared, its Rust value dropped; [`alloc`] gives it a type and a reference count again
//! (`PyObject_Init`, as pyo3's own free list does) and pyo3 writes the value. At most
//! [`CAPACITY`] objects are kept (reachable from a static until the process ends).

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::heaptype;

/// Objects kept at most.
pub const CAPACITY: usize = 64;

/// The kept objects: `objects[..len]`.
struct List {
    len: usize,
    objects: [*mut ffi::PyObject; CAPACITY],
}

/// [`List`], touched only by [`alloc`] and [`free`].
struct Guarded(UnsafeCell<List>);

// SAFETY: only `alloc` and `free` touch the list, and CPython calls a type's `tp_alloc` and
// `tp_free` with the thread attached: the GIL serialises them (an abi3 module only loads into
// builds with a GIL, `install` checks that it is enabled, and pyo3 refuses subinterpreters,
// so there is one GIL).
unsafe impl Sync for Guarded {}

static LIST: Guarded = Guarded(UnsafeCell::new(List {
    len: 0,
    objects: [null_mut(); CAPACITY],
}));

/// `dlport.Tensor`'s type object, once [`install`] replaced its allocator (else NULL).
static TENSOR: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(null_mut());

type Alloc = unsafe extern "C" fn(*mut ffi::PyTypeObject, ffi::Py_ssize_t) -> *mut ffi::PyObject;
type Free = unsafe extern "C" fn(*mut c_void);

/// `tp_alloc`: a kept object if there is one, else `PyType_GenericAlloc`'s.
///
/// # Safety
/// Called by CPython as a `tp_alloc`, attached.
unsafe extern "C" fn alloc(
    subtype: *mut ffi::PyTypeObject,
    nitems: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    if nitems == 0 && std::ptr::eq(subtype, TENSOR.load(Ordering::Relaxed)) {
        // SAFETY: attached (contract): the GIL serialises every access to the list.
        let list = unsafe { &mut *LIST.0.get() };
        if let Some(last) = list.len.checked_sub(1) {
            list.len = last;
            let obj = list.objects[last];
            // SAFETY: a block of this type's basic size from `PyType_GenericAlloc` whose object
            // was deallocated (untracked, weak references cleared, value dropped) and that only
            // the list held; `PyObject_Init` sets its type (a new reference to the heap type)
            // and a reference count of one.
            unsafe { ffi::PyObject_Init(obj, subtype) };
            return obj;
        }
    }
    // SAFETY: forwarded; the type's `tp_alloc` before `install`.
    unsafe { ffi::PyType_GenericAlloc(subtype, nitems) }
}

/// `tp_free`: keeps the object if the list has room, else `PyObject_GC_Del`.
///
/// # Safety
/// Called by CPython (pyo3's `tp_dealloc`) as a `tp_free`, attached, with an object of this
/// type that was deallocated (untracked) and is reachable from nothing else.
unsafe extern "C" fn free(obj: *mut c_void) {
    let object = obj.cast::<ffi::PyObject>();
    // SAFETY: a deallocated object whose header is intact (contract).
    let ty = unsafe { ffi::Py_TYPE(object) };
    if std::ptr::eq(ty, TENSOR.load(Ordering::Relaxed)) {
        // SAFETY: attached (contract): the GIL serialises every access to the list.
        let list = unsafe { &mut *LIST.0.get() };
        if list.len < CAPACITY {
            list.objects[list.len] = object;
            list.len += 1;
            return;
        }
    }
    // SAFETY: forwarded; the type's `tp_free` before `install` (the object came from
    // `PyType_GenericAlloc` of a GC type).
    unsafe { ffi::PyObject_GC_Del(obj) }
}

/// Replaces `ty`'s `tp_alloc` and `tp_free` by [`alloc`] and [`free`]. Returns whether it did
/// (false: the interpreter runs without the GIL, or a layout check disagreed, and nothing was
/// written).
pub fn install(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    let py = ty.py();
    let sys = py.import("sys")?;
    if let Some(enabled) = sys.getattr_opt("_is_gil_enabled")? {
        if !enabled.call0()?.extract::<bool>()? {
            return Ok(false);
        }
    }
    let Some(head) = heaptype::head(ty)? else {
        return Ok(false);
    };
    let tp = ty.as_type_ptr();
    let (generic_alloc, gc_del) = (
        ffi::PyType_GenericAlloc as Alloc as *mut c_void,
        ffi::PyObject_GC_Del as Free as *mut c_void,
    );
    // SAFETY: a heap type whose head agrees with CPython's sizes (checked by `head`);
    // PyType_GetSlot reads a heap type's slots without raising for slot numbers it knows.
    let agree = unsafe {
        (*head).tp_alloc == generic_alloc
            && (*head).tp_free == gc_del
            && ffi::PyType_GetSlot(tp, ffi::Py_tp_alloc) == generic_alloc
            && ffi::PyType_GetSlot(tp, ffi::Py_tp_free) == gc_del
    };
    if !agree || !TENSOR.load(Ordering::Relaxed).is_null() {
        return Ok(false);
    }
    TENSOR.store(tp, Ordering::Relaxed);
    // SAFETY: the type's own slots (checked above), written once, at import, before any
    // instance exists, with the GIL held; PyType_Modified drops CPython's caches of the type.
    unsafe {
        (*head).tp_alloc = alloc as Alloc as *mut c_void;
        (*head).tp_free = free as Free as *mut c_void;
        ffi::PyType_Modified(tp);
    }
    // SAFETY: as above.
    let seen = unsafe {
        (
            ffi::PyType_GetSlot(tp, ffi::Py_tp_alloc),
            ffi::PyType_GetSlot(tp, ffi::Py_tp_free),
        )
    };
    if seen != (alloc as Alloc as *mut c_void, free as Free as *mut c_void) {
        return Err(PyRuntimeError::new_err(
            "dlport could not install its allocator on dlport.Tensor",
        ));
    }
    Ok(true)
}

/// Objects kept now (for tests).
pub fn kept(_py: Python<'_>) -> usize {
    // SAFETY: attached (the token): the GIL serialises every access to the list.
    unsafe { (*LIST.0.get()).len }
}
