//! The CPython declarations the binding needs beyond pyo3's abi3 bindings, in one place: the
//! head of `PyTypeObject` (for the buffer protocol's slot and the type version tag), and
//! `Py_buffer` with `PyBufferProcs`.
//!
//! The wheel is abi3 for CPython 3.9, where the limited API keeps `PyTypeObject` opaque and
//! has no `Py_buffer`. These layouts are the same from 3.9 to 3.14 in every build an abi3
//! module loads into (`Py_buffer` and `PyBufferProcs` since 3.3; the type object's head up to
//! `tp_version_tag` since 3.8; every member before `tp_flags` is pointer-sized, and `tp_flags`
//! sits in a pointer-aligned place). [`check`] compares what the mirror reads with CPython's
//! own answers once, at import; nothing reads through the mirror before it agreed.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

/// `PyTypeObject` from its start to `tp_version_tag`.
#[repr(C)]
pub struct TypeHead {
    ob_refcnt: isize,
    ob_type: *mut TypeHead,
    ob_size: isize,
    tp_name: *const c_char,
    tp_basicsize: isize,
    tp_itemsize: isize,
    /// `tp_dealloc` to `tp_setattro`.
    _dealloc_to_setattro: [*mut c_void; 14],
    /// The type's `PyBufferProcs` (a heap type's sits inside its own allocation).
    pub tp_as_buffer: *mut BufferProcs,
    tp_flags: c_ulong,
    /// `tp_doc` to `tp_del`.
    _doc_to_del: [*mut c_void; 26],
    tp_version_tag: c_uint,
}

const _: () = assert!(std::mem::offset_of!(TypeHead, tp_as_buffer) == 20 * size_of::<usize>());
const _: () = assert!(std::mem::offset_of!(TypeHead, tp_flags) == 21 * size_of::<usize>());
const _: () = assert!(std::mem::offset_of!(TypeHead, tp_version_tag) == 48 * size_of::<usize>());

/// `Py_buffer`.
#[repr(C)]
pub struct PyBuffer {
    pub buf: *mut c_void,
    pub obj: *mut ffi::PyObject,
    pub len: isize,
    pub itemsize: isize,
    pub readonly: c_int,
    pub ndim: c_int,
    pub format: *mut c_char,
    pub shape: *mut isize,
    pub strides: *mut isize,
    pub suboffsets: *mut isize,
    pub internal: *mut c_void,
}

// `PyObject_GetBuffer` and `PyBuffer_Release`: exported by every CPython 3 (named in the
// limited headers from 3.11, where pyo3's abi3 bindings take them from).
unsafe extern "C" {
    /// `PyObject_GetBuffer`: fills `view` from `obj`'s buffer protocol; -1 with an exception
    /// set on failure.
    pub fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut PyBuffer, flags: c_int) -> c_int;
    /// `PyBuffer_Release`: releases a view `PyObject_GetBuffer` filled, once.
    pub fn PyBuffer_Release(view: *mut PyBuffer);
}

/// `PyBUF_SIMPLE`: a C-contiguous block of bytes, no format, shape or strides.
pub const PY_BUF_SIMPLE: c_int = 0;

/// `getbufferproc`.
pub type GetBuffer = unsafe extern "C" fn(*mut ffi::PyObject, *mut PyBuffer, c_int) -> c_int;
/// `releasebufferproc`.
pub type ReleaseBuffer = unsafe extern "C" fn(*mut ffi::PyObject, *mut PyBuffer);

/// `PyBufferProcs`.
#[repr(C)]
pub struct BufferProcs {
    pub bf_getbuffer: Option<GetBuffer>,
    pub bf_releasebuffer: Option<ReleaseBuffer>,
}

/// `Py_bf_getbuffer`, the slot number (stable ABI; named in the limited headers from 3.11).
pub const PY_BF_GETBUFFER: c_int = 1;
pub const PY_BUF_WRITABLE: c_int = 0x0001;
pub const PY_BUF_FORMAT: c_int = 0x0004;
pub const PY_BUF_ND: c_int = 0x0008;
pub const PY_BUF_STRIDES: c_int = 0x0010 | PY_BUF_ND;
pub const PY_BUF_C_CONTIGUOUS: c_int = 0x0020 | PY_BUF_STRIDES;
pub const PY_BUF_F_CONTIGUOUS: c_int = 0x0040 | PY_BUF_STRIDES;
pub const PY_BUF_ANY_CONTIGUOUS: c_int = 0x0080 | PY_BUF_STRIDES;

/// `Py_TPFLAGS_VALID_VERSION_TAG`: before 3.13, `PyType_Modified` clears it (3.9 leaves the old
/// tag's number in place); 3.13 and later zero the tag and never set the flag.
const VALID_VERSION_TAG: c_ulong = 1 << 19;

/// What [`check`] found: not checked yet, the head disagrees, or it agrees and version tags
/// behave as on 3.9–3.12 (the flag marks a current tag) or as on 3.13 and later (a current tag
/// is non-zero).
static STATE: AtomicU8 = AtomicU8::new(UNCHECKED);
const UNCHECKED: u8 = 0;
const UNUSABLE: u8 = 1;
const TAG_AND_FLAG: u8 = 2;
const TAG_ONLY: u8 = 3;

/// Checks the mirror against CPython once (at import, attached): `ty`'s and `type`'s sizes,
/// flags and metatype as the head reads them against `__basicsize__`, `__itemsize__`,
/// `PyType_GetFlags` and `type(ty)`; then version tags on a new class of its own: current after
/// an attribute lookup, not current after an attribute is set, current again and different
/// after the next lookup. Returns whether the head may be read ([`head`], [`versions`]).
pub fn check(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    let py = ty.py();
    let agree = |t: &Bound<'_, PyType>| -> PyResult<bool> {
        let basicsize: isize = t.getattr("__basicsize__")?.extract()?;
        let itemsize: isize = t.getattr("__itemsize__")?.extract()?;
        let tp = t.as_type_ptr();
        // SAFETY: a live type object; PyType_GetFlags only reads it.
        let flags = unsafe { ffi::PyType_GetFlags(tp) } as c_ulong;
        let head = tp.cast::<TypeHead>();
        // SAFETY: every type object starts with the object header and these two sizes; the
        // other members are read only where those agreed.
        let read = unsafe {
            ((*head).tp_basicsize, (*head).tp_itemsize) == (basicsize, itemsize)
                && (*head).tp_flags == flags
                && (*head).ob_type.cast() == ffi::Py_TYPE(tp.cast())
        };
        Ok(read)
    };
    let mut state = UNUSABLE;
    if agree(ty)? && agree(&py.get_type::<PyType>())? {
        let probe = new_class(py)?;
        state = tag_semantics(&probe)?;
    }
    STATE.store(state, Ordering::Relaxed);
    Ok(state != UNUSABLE)
}

/// How version tags behave, tried on `probe` (a new class nothing else uses).
fn tag_semantics(probe: &Bound<'_, PyType>) -> PyResult<u8> {
    let name = "_dlport_attribute";
    let raw = |t: &Bound<'_, PyType>| {
        let head = t.as_type_ptr().cast::<TypeHead>();
        // SAFETY: the head agreed with CPython (checked by the caller); attached.
        unsafe {
            (
                (*head).tp_version_tag,
                (*head).tp_flags & VALID_VERSION_TAG != 0,
            )
        }
    };
    let _ = probe.getattr_opt(name)?;
    let (first, first_flag) = raw(probe);
    probe.setattr(name, 1)?;
    let (modified, modified_flag) = raw(probe);
    let _ = probe.getattr(name)?;
    let (second, second_flag) = raw(probe);
    let moved = first != 0 && second != 0 && first != second;
    Ok(if moved && first_flag && second_flag && !modified_flag {
        TAG_AND_FLAG
    } else if moved && modified == 0 && !first_flag && !second_flag {
        TAG_ONLY
    } else {
        UNUSABLE
    })
}

/// A new, empty class of its own for [`check`]'s probe: `type("_dlport_probe", (), {})`.
fn new_class(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    let args = ("_dlport_probe", PyTuple::empty(py), PyDict::new(py));
    Ok(py.get_type::<PyType>().call1(args)?.cast_into::<PyType>()?)
}

/// `ty`'s head, once [`check`] found the mirror agrees with CPython; `None` otherwise.
pub fn head(ty: &Bound<'_, PyType>) -> Option<*mut TypeHead> {
    (STATE.load(Ordering::Relaxed) > UNUSABLE).then_some(ty.as_type_ptr().cast())
}

/// The current version tags of `ty` and of its metatype, as one value; `None` when either has
/// no current tag (not looked up since it was last modified, or CPython gave out no more) or
/// the mirror is not usable. CPython gives a type a new tag whenever it was modified (an
/// attribute set or deleted, on it, a base or, for the metatype's tag, the metaclass) and the
/// next lookup finds it, and never gives one number to two types while they could both be
/// looked at: a pair of tags names the type and its attributes as they are now.
#[inline]
pub fn versions(ty: Borrowed<'_, '_, PyType>) -> Option<u64> {
    let state = STATE.load(Ordering::Relaxed);
    if state <= UNUSABLE {
        return None;
    }
    let current = |head: *const TypeHead| {
        // SAFETY: a live type object (`ty`, or its metatype, which it keeps alive) whose head
        // agrees with CPython (checked); attached, so nothing writes it meanwhile.
        let (tag, flags) = unsafe { ((*head).tp_version_tag, (*head).tp_flags) };
        let valid = tag != 0 && (state == TAG_ONLY || flags & VALID_VERSION_TAG != 0);
        valid.then_some(tag)
    };
    let head = ty.as_type_ptr().cast::<TypeHead>();
    // SAFETY: as above: the head agrees, so `ob_type` is the metatype.
    let meta = unsafe { (*head).ob_type };
    Some(u64::from(current(head)?) << 32 | u64::from(current(meta)?))
}
