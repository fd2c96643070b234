//! The PyCapsule destructor (`dlport_capsule_destructor`), which finds CPython in the running
//! process instead of linking it.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::{NonNull, null_mut};
use std::sync::OnceLock;

use super::status::entry;
use super::tracker::release_any;

// ── PyCapsule destructor ──

pub(crate) type PyObject = c_void;
pub(crate) type IsValidFn = unsafe extern "C" fn(*mut PyObject, *const c_char) -> c_int;
pub(crate) type GetPointerFn = unsafe extern "C" fn(*mut PyObject, *const c_char) -> *mut c_void;
pub(crate) type ErrFetchFn =
    unsafe extern "C" fn(*mut *mut PyObject, *mut *mut PyObject, *mut *mut PyObject);
pub(crate) type ErrRestoreFn = unsafe extern "C" fn(*mut PyObject, *mut PyObject, *mut PyObject);

/// The few CPython functions the destructor needs, looked up in the running process (no link
/// dependency on libpython: the library also loads into plain C programs).
pub(crate) struct PyApi {
    is_valid: IsValidFn,
    get_pointer: GetPointerFn,
    err_fetch: ErrFetchFn,
    err_restore: ErrRestoreFn,
}

pub(crate) fn py_api() -> Option<&'static PyApi> {
    static API: OnceLock<Option<PyApi>> = OnceLock::new();
    API.get_or_init(|| {
        let sym = python_symbol;
        // SAFETY: each symbol, when present, is the CPython function of that exact signature.
        unsafe {
            Some(PyApi {
                is_valid: std::mem::transmute::<*mut c_void, IsValidFn>(sym(c"PyCapsule_IsValid")?),
                get_pointer: std::mem::transmute::<*mut c_void, GetPointerFn>(sym(
                    c"PyCapsule_GetPointer",
                )?),
                err_fetch: std::mem::transmute::<*mut c_void, ErrFetchFn>(sym(c"PyErr_Fetch")?),
                err_restore: std::mem::transmute::<*mut c_void, ErrRestoreFn>(sym(
                    c"PyErr_Restore",
                )?),
            })
        }
    })
    .as_ref()
}

/// Looks a CPython function up in the running process: every loaded module on Unix (`dlsym`
/// with `RTLD_DEFAULT`), the already-loaded `python3X.dll` on Windows (`GetModuleHandleA`, which
/// loads nothing, then `GetProcAddress`). `None` outside Python.
#[cfg(unix)]
pub(crate) fn python_symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a symbol up.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// As the Unix `python_symbol`, through the CPython DLL that is loaded (3.8 to 3.29, then the
/// stable-ABI `python3.dll`).
#[cfg(windows)]
pub(crate) fn python_symbol(name: &CStr) -> Option<*mut c_void> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    let dlls = (8..30)
        .map(|minor| format!("python3{minor}.dll\0"))
        .chain(std::iter::once("python3.dll\0".to_owned()));
    for dll in dlls {
        // SAFETY: a NUL-terminated name; GetModuleHandleA only looks a loaded module up.
        let module = unsafe { GetModuleHandleA(dll.as_ptr()) };
        if module.is_null() {
            continue;
        }
        // SAFETY: a loaded module and a NUL-terminated name; only looks the symbol up.
        if let Some(f) = unsafe { GetProcAddress(module, name.as_ptr().cast()) } {
            return Some(f as *mut c_void);
        }
    }
    None
}

/// Neither Unix nor Windows: no way to find CPython, so the destructor does nothing.
#[cfg(not(any(unix, windows)))]
pub(crate) fn python_symbol(_name: &CStr) -> Option<*mut c_void> {
    None
}

/// A `PyCapsule_Destructor` for DLPack capsules, safe to run while an exception is set: it
/// calls the tensor's deleter only while the capsule still bears its unconsumed name
/// (`"dltensor"` or `"dltensor_versioned"`); a consumer that renamed it to `used_*` owns the
/// tensor. The pending exception, if any, is preserved. CPython's functions are looked up in
/// the running process (no link dependency on libpython); outside Python it does nothing.
///
/// Ownership: takes the capsule's tensor while the capsule is unconsumed; the capsule itself
/// stays CPython's.
///
/// # Safety
/// Called by CPython with the GIL held, with a capsule object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_capsule_destructor(capsule: *mut c_void) {
    let _ = entry(|| {
        let Some(py) = py_api() else { return Ok(()) };
        if capsule.is_null() {
            return Ok(());
        }
        let (mut t, mut v, mut tb) = (null_mut(), null_mut(), null_mut());
        let mut released = Ok(());
        // SAFETY: GIL held (contract); saves any pending exception.
        unsafe { (py.err_fetch)(&mut t, &mut v, &mut tb) };
        for (name, versioned) in [(c"dltensor_versioned", true), (c"dltensor", false)] {
            // SAFETY: a capsule object, GIL held; IsValid never raises.
            if unsafe { (py.is_valid)(capsule, name.as_ptr()) } == 1 {
                // SAFETY: valid with this name, so GetPointer succeeds without raising.
                let p = unsafe { (py.get_pointer)(capsule, name.as_ptr()) };
                if let Some(p) = NonNull::new(p) {
                    // SAFETY: an unconsumed capsule owns its tensor; it is released once, here.
                    released = unsafe { release_any(p, c_int::from(versioned)) };
                }
                break;
            }
        }
        // SAFETY: restores exactly what was fetched (steals the references back).
        unsafe { (py.err_restore)(t, v, tb) };
        released
    });
}
