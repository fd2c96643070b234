//! The head of CPython's `PyTypeObject`, mirrored once for the two things the binding writes
//! into `dlport.Tensor`'s heap type after pyo3 made it: the buffer protocol ([`crate::buffer`])
//! and the object allocator ([`crate::freelist`]). The layout, up to `tp_free`, is unchanged
//! from 3.8 to 3.14 in every build an abi3 module loads into; every member is pointer-sized
//! (`tp_flags`, an `unsigned long`, sits in a pointer-sized, pointer-aligned place). Nothing is
//! written through it before what it reads agrees with CPython's own answers
//! (`__basicsize__`, `__itemsize__`, `PyType_GetSlot`).

use std::ffi::{c_char, c_void};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// `PyTypeObject` from its start to `tp_free`.
#[repr(C)]
pub struct TypeHead {
    ob_refcnt: isize,
    ob_type: *mut c_void,
    ob_size: isize,
    tp_name: *const c_char,
    pub tp_basicsize: isize,
    pub tp_itemsize: isize,
    /// `tp_dealloc` to `tp_setattro`.
    slots_before_buffer: [*mut c_void; 14],
    pub tp_as_buffer: *mut c_void,
    /// `tp_flags` to `tp_init`.
    slots_before_alloc: [*mut c_void; 17],
    pub tp_alloc: *mut c_void,
    tp_new: *mut c_void,
    pub tp_free: *mut c_void,
}

const _: () = assert!(std::mem::offset_of!(TypeHead, tp_as_buffer) == 20 * size_of::<usize>());
const _: () = assert!(std::mem::offset_of!(TypeHead, tp_alloc) == 38 * size_of::<usize>());
const _: () = assert!(std::mem::offset_of!(TypeHead, tp_free) == 40 * size_of::<usize>());

/// `ty`'s head, where `ty` is a heap type whose size fields read through the head as CPython
/// reports them; `None` otherwise (then nothing may be written).
pub fn head(ty: &Bound<'_, PyType>) -> PyResult<Option<*mut TypeHead>> {
    let basicsize: isize = ty.getattr("__basicsize__")?.extract()?;
    let itemsize: isize = ty.getattr("__itemsize__")?.extract()?;
    let tp = ty.as_type_ptr();
    // SAFETY: a live type object; PyType_GetFlags only reads it.
    let heap = unsafe { ffi::PyType_GetFlags(tp) } & ffi::Py_TPFLAGS_HEAPTYPE != 0;
    let head = tp.cast::<TypeHead>();
    // SAFETY: every type object starts with the object header and these two sizes.
    let sizes = unsafe { ((*head).tp_basicsize, (*head).tp_itemsize) };
    Ok((heap && sizes == (basicsize, itemsize)).then_some(head))
}
