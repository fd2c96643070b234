//! The error text of plugins: what a plugin says about a failure (`message_of`, through its
//! `last_error` callback) and how dlport reports it (`plugin_error`, an error that owns its
//! text), with the bounded table of plugin names (`intern`).

use std::collections::BTreeSet;
use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

use dlport_core::Error;
use dlport_core::error::{BackendError, BackendReport};

use super::interface::DlportPluginLastError;

/// The longest plugin message kept, in bytes.
const MESSAGE_CAP: usize = 1023;
/// How many distinct plugin names (and their origins, for registered plugins) dlport keeps;
/// past it a name is replaced by a fixed text, so a plugin cannot grow dlport's memory without
/// bound. Messages and paths of failed loads never enter it.
const INTERNED_CAP: usize = 4096;

/// Returns a `'static` copy of `s`, shared by equal texts (errors carry `&'static str`s).
pub(crate) fn intern(s: &str) -> &'static str {
    static TEXTS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut texts = TEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(t) = texts.get(s) {
        return t;
    }
    if texts.len() >= INTERNED_CAP {
        return "(message not kept: dlport keeps at most 4096 distinct plugin texts)";
    }
    let t: &'static str = Box::leak(s.to_owned().into_boxed_str());
    texts.insert(t);
    t
}

/// The message a plugin's `last_error` gives for `state`, copied (at most `MESSAGE_CAP` bytes).
///
/// # Safety
/// `last_error` is NULL or a callback following its contract for `state`.
pub(crate) unsafe fn message_of(last_error: DlportPluginLastError, state: *mut c_void) -> String {
    let Some(last) = last_error else {
        return "the plugin gives no message (no last_error callback)".into();
    };
    // SAFETY: plugin contract: NULL or a NUL-terminated string valid during this call.
    let p = unsafe { last(state) };
    if p.is_null() {
        return "the plugin gives no message".into();
    }
    let mut bytes = Vec::new();
    for i in 0..MESSAGE_CAP {
        // SAFETY: NUL-terminated (contract): reads stop at the NUL or the cap.
        let b = unsafe { p.add(i).cast::<u8>().read() };
        if b == 0 {
            break;
        }
        bytes.push(b);
    }
    if bytes.is_empty() {
        return "the plugin gives no message".into();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A plugin error (`DLPORT_ERR_BACKEND`, code 32), shown as
/// `backend "NAME": OPERATION failed with code N: DETAIL (plugin "NAME" from ORIGIN)`: the
/// plugin, the callback or step, the plugin's status and what it or dlport says. The detail is
/// owned by the error (a plugin's messages and paths are never kept past it); the name is
/// interned (a backend's name is `&'static str`), or `plugin` where the plugin has no name yet
/// than its path.
pub(crate) fn plugin_error(
    name: &str,
    origin: &str,
    operation: &'static str,
    code: i32,
    detail: &str,
) -> Error {
    let (backend, detail) = if name == origin {
        ("plugin", format!("{detail} (plugin library {origin})"))
    } else {
        (
            intern(name),
            format!("{detail} (plugin \"{name}\" from {origin})"),
        )
    };
    Error::Backend(BackendError::Failed {
        code,
        report: BackendReport::owned(backend, operation, detail),
    })
}
