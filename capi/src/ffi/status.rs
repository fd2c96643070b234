//! Status plumbing: every entry runs behind `catch_unwind`, returns a status code and leaves
//! its message in a destructor-free thread-local for `dlport_last_error`.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{CStr, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use dlport_core::Error;

use crate::cabi::{DLPORT_INVALID_ARGUMENT, DLPORT_OK, DLPORT_PANIC};

/// The longest error message kept, in bytes (without the NUL); a longer one is cut at a
/// character boundary and ends in "...".
pub(crate) const MESSAGE_CAP: usize = 2047;

/// A thread's last error, stored inline: no heap block and no destructor. A thread-local
/// without a destructor is never torn down, so an entry called while its thread or the process
/// shuts down (an `atexit` handler, a C++ static destructor or a pthread-key destructor: glibc
/// runs them after the thread's TLS destructors) still records and returns its message.
pub(crate) struct LastError {
    set: Cell<bool>,
    text: UnsafeCell<[u8; MESSAGE_CAP + 1]>,
}

// No destructor, hence no "destroyed" state in which the thread-local can no longer be reached.
const _: () = assert!(!std::mem::needs_drop::<LastError>());

thread_local! {
    static LAST_ERROR: LastError = const {
        LastError {
            set: Cell::new(false),
            text: UnsafeCell::new([0; MESSAGE_CAP + 1]),
        }
    };
}

/// What `dlport_last_error` returns if this thread's error state cannot be reached (not
/// expected: the thread-local has no destructor; this only keeps the entry total).
pub(crate) static UNREACHABLE_ERROR: &CStr =
    c"dlport: the last error message of this thread cannot be \
    read (its thread-local storage is gone); check the status code instead";

/// Records `message` as this thread's last error (NUL bytes become spaces; cut to
/// `MESSAGE_CAP` bytes). Never panics and never touches a thread-local that can be destroyed.
pub(crate) fn set_last_error(message: &str) {
    let _ = LAST_ERROR.try_with(|e| {
        let cut = if message.len() <= MESSAGE_CAP {
            message.len()
        } else {
            let mut end = MESSAGE_CAP - "...".len();
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            end
        };
        // SAFETY: only this thread reaches its own buffer, and no reference into it outlives
        // this call (C receives a raw pointer, valid until its next dlport call).
        let text = unsafe { &mut *e.text.get() };
        let mut n = 0;
        let tail = if cut < message.len() { "..." } else { "" };
        for b in message.as_bytes()[..cut].iter().chain(tail.as_bytes()) {
            text[n] = if *b == 0 { b' ' } else { *b };
            n += 1;
        }
        text[n] = 0;
        e.set.set(true);
    });
}

pub(crate) fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|e| e.set.set(false));
}

/// What an entry point can fail with.
pub(crate) enum Failure {
    Dlport(Error),
    Argument(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Dlport(e)
    }
}

pub(crate) fn arg(message: impl Into<String>) -> Failure {
    Failure::Argument(message.into())
}

/// Runs an entry point: catches panics, records the error message, returns the status.
pub(crate) fn entry(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    run(true, f)
}

/// As `entry`; `clear_on_success` false leaves the last error alone on success (for callbacks
/// such as deleters, which the caller does not see as dlport calls).
pub(crate) fn run(clear_on_success: bool, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            if clear_on_success {
                clear_last_error();
            }
            DLPORT_OK
        }
        Ok(Err(Failure::Dlport(e))) => {
            set_last_error(&e.to_string());
            e.code() as c_int
        }
        Ok(Err(Failure::Argument(m))) => {
            set_last_error(&m);
            DLPORT_INVALID_ARGUMENT
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("unknown panic");
            set_last_error(&format!(
                "internal error (panic caught at the C boundary): {what}"
            ));
            // The payload is dropped here, inside the entry: a payload whose drop panics
            // would otherwise unwind across `extern "C"`.
            let _ = catch_unwind(AssertUnwindSafe(|| drop(panic)));
            DLPORT_PANIC
        }
    }
}

/// This thread's last error message (NULL after a success), or a static message where the
/// thread-local cannot be reached.
pub(crate) fn last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|e| {
            if e.set.get() {
                e.text.get().cast::<c_char>().cast_const()
            } else {
                std::ptr::null()
            }
        })
        .unwrap_or(UNREACHABLE_ERROR.as_ptr())
}
