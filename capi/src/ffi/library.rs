//! Library-level entries: version, last error, strings, limits, counters and `dlport_describe`.

use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use dlport_core::abi::RawManaged;
use dlport_core::error::LayoutError;
use dlport_core::layout::TensorInfo;
use dlport_core::{Error, TensorRef};

use super::args::{c_string, out_ptr, registry, to_json};
use super::status::{Failure, entry, last_error_message};
use super::tracker::{EXPORTED, RELEASED, refuse_released};

/// The library version (the crate's, e.g. "0.1.0"), a static NUL-terminated string.
///
/// Ownership: the string is dlport's, static; never free it.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}

/// The last error message on this thread, or NULL after a success. Valid until the next dlport
/// call on this thread (at most 2047 bytes; a longer message is cut and ends in "..."). Like
/// every entry, it also works while the thread or the process shuts down: from an `atexit`
/// handler, a C++ static destructor or a pthread-key destructor (the message lives in a
/// thread-local without a destructor).
///
/// Ownership: the string is dlport's (per thread); never free it.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_last_error() -> *const c_char {
    last_error_message()
}

/// Frees a string returned by dlport (NULL is ignored).
///
/// Ownership: takes `s`, which must not be used again.
///
/// # Safety
/// `s` is NULL or a string from a dlport function, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: created by CString::into_raw in `c_string` (contract).
        drop(unsafe { CString::from_raw(s) });
    }
}

/// Sets the process's allocation limit: the most bytes any copy or allocation dlport makes may
/// take, in this ABI and in every other door of the process (it is dlport-core's limit,
/// `dlport_core::set_alloc_limit`). 0 restores the default: the machine's memory (the smallest
/// of physical memory, the cgroup's memory.max and RLIMIT_AS / RLIMIT_DATA), which no registry
/// keeps as a limit of its own, so a limit set above it is the one in force. A call's
/// `max_alloc_bytes` can lower it, never raise it (0 there, too, means none of its own). Above
/// the limit a call fails with `DLPORT_ERR_ALLOCATION_LIMIT`, naming the size and the limit,
/// before anything is allocated.
///
/// Ownership: nothing is transferred.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_set_alloc_limit(bytes: u64) {
    // The native default first, so that 0 restores the machine's memory (install() gives it).
    let _ = registry();
    dlport_core::set_alloc_limit(bytes);
}

/// The allocation limit in force for calls that give none of their own.
///
/// Ownership: nothing is transferred.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_alloc_limit() -> u64 {
    registry().alloc_limit(None)
}

/// How many DLPack tensors this C ABI has handed out, and how many of them consumers released
/// (their deleter ran). Either pointer may be NULL.
///
/// Ownership: nothing is transferred.
///
/// # Safety
/// Non-NULL pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_export_counts(exported: *mut u64, released: *mut u64) {
    // SAFETY: NULL or writable (contract).
    unsafe {
        if let Some(p) = exported.as_mut() {
            *p = EXPORTED.load(Ordering::SeqCst);
        }
        if let Some(p) = released.as_mut() {
            *p = RELEASED.load(Ordering::SeqCst);
        }
    }
}

#[derive(serde::Serialize)]
pub(crate) struct Description {
    #[serde(flatten)]
    info: TensorInfo,
    host_accessible: bool,
    alignment: Option<usize>,
    read_only: bool,
    copied: bool,
}

impl Description {
    pub(crate) fn of(view: &TensorRef<'_>) -> Self {
        Self {
            info: TensorInfo::from(view),
            host_accessible: view.device().is_host_accessible(),
            alignment: view.alignment(),
            read_only: view.is_read_only(),
            copied: view.is_copied(),
        }
    }
}

pub(crate) fn describe(view: &TensorRef<'_>) -> Result<String, Failure> {
    to_json(&Description::of(view))
}

/// Validates a managed tensor WITHOUT taking ownership and describes it as JSON, one object
/// with exactly these keys:
/// - `"shape"`, `"strides"`: arrays of integers (strides in elements, computed when NULL);
/// - `"dtype"`: string (`"float32"`, `"int4"`, `"float32x4"`, ...);
/// - `"device"`: string (`"cpu"`, `"cuda:0"`, `"cuda_host"`, ...);
/// - `"byte_offset"`, `"flags"`, `"numel"`: integers (`flags` 0 for legacy);
/// - `"version"`: `{"major": integer, "minor": integer}`, or null for legacy;
/// - `"contiguity"`: one of `"both"`, `"row_major"`, `"column_major"`, `"permuted"`,
///   `"strided"`;
/// - `"byte_span"`: `[lo, hi]` integers, the bytes touched relative to the first element;
/// - `"host_accessible"`, `"read_only"`, `"copied"`: booleans;
/// - `"alignment"`: integer (the first element's address alignment in bytes) or null.
///
/// Ownership: `managed` stays the caller's on every path. On success `*json_out` is a new
/// string the caller frees with `dlport_string_free`; on error it is untouched.
///
/// # Safety
/// `managed` is NULL or a live managed tensor of the form `versioned` says, readable for the
/// duration of the call; `json_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_describe(
    managed: *const c_void,
    versioned: c_int,
    json_out: *mut *mut c_char,
) -> c_int {
    entry(|| {
        let out = out_ptr(json_out, "json_out")?;
        let Some(ptr) = NonNull::new(managed.cast_mut()) else {
            return Err(Error::Layout(LayoutError::NullManagedTensor).into());
        };
        refuse_released(managed)?;
        let raw = if versioned != 0 {
            RawManaged::Versioned(ptr.cast())
        } else {
            RawManaged::Legacy(ptr.cast())
        };
        // SAFETY: a live managed tensor of the form `versioned` says, readable during the call
        // (contract): the versioned header is read first, and the DLTensor only at its 1.x
        // place for major version 1; the view does not outlive the call, and nothing is
        // released.
        let text = describe(&unsafe { raw.validate() }?)?;
        c_string(text, out)
    })
}
