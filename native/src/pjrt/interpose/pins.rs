//! The buffers exports pin, and the host's `Destroy` / `Delete` of them, deferred until the
//! last pin goes. One map for the process, keyed by `PJRT_Buffer*` (unique among live
//! buffers; a pinned buffer stays live, so its address is not reused while in the map).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::super::result::Api;
use super::super::sys;
use super::clients;

/// What the host asked for while the buffer was pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Deferred {
    Delete,
    Destroy,
}

struct Pin {
    count: usize,
    /// The vendor's table, which runs the deferred call.
    api: Api,
    /// The host's client, borrowed while the buffer is pinned (NULL: none counted), so the
    /// host's `PJRT_Client_Destroy` cannot free the buffer under an export either.
    client: *mut sys::PJRT_Client,
    deleted: bool,
    destroyed: bool,
}

static PINS: Mutex<Option<HashMap<usize, Pin>>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut HashMap<usize, Pin>) -> R) -> R {
    let mut g = PINS.lock().unwrap_or_else(PoisonError::into_inner);
    f(g.get_or_insert_with(HashMap::new))
}

// SAFETY: the pointers are only handed back to the vendor, from any thread (PJRT's contract).
unsafe impl Send for Pin {}

/// Pins `buffer` once more; the first pin borrows `client`, the host's client of it.
pub(super) fn pin(buffer: *mut sys::PJRT_Buffer, api: Api, client: *mut sys::PJRT_Client) {
    with(|m| {
        m.entry(buffer as usize)
            .or_insert_with(|| Pin {
                count: 0,
                api,
                client: if clients::borrow(client) {
                    client
                } else {
                    std::ptr::null_mut()
                },
                deleted: false,
                destroyed: false,
            })
            .count += 1;
    });
}

/// Records the host's `what` on `buffer` when it is pinned (the call then waits for the last
/// pin); `false` when it is not pinned (the call goes to the vendor now).
pub(super) fn defer(buffer: *mut sys::PJRT_Buffer, what: Deferred) -> bool {
    with(|m| match m.get_mut(&(buffer as usize)) {
        Some(p) => {
            match what {
                Deferred::Delete => p.deleted = true,
                Deferred::Destroy => p.destroyed = true,
            }
            true
        }
        None => false,
    })
}

/// Whether the host deleted (or destroyed) the pinned `buffer`.
pub(super) fn is_deleted(buffer: *mut sys::PJRT_Buffer) -> bool {
    with(|m| {
        m.get(&(buffer as usize))
            .is_some_and(|p| p.deleted || p.destroyed)
    })
}

/// The number of pins on `buffer` (0: none), for tests and diagnostics.
pub fn pins(buffer: *const std::ffi::c_void) -> usize {
    with(|m| m.get(&(buffer as usize)).map_or(0, |p| p.count))
}

/// Drops one pin of `buffer`; the last one runs what the host deferred (`Destroy`, else
/// `Delete`) on the vendor's table, on this thread, once, then gives the client back (the
/// vendor's `PJRT_Client_Destroy` when the host had destroyed it).
pub(super) fn unpin(buffer: *mut sys::PJRT_Buffer) {
    let last = with(|m| {
        let key = buffer as usize;
        let p = m.get_mut(&key)?;
        p.count -= 1;
        if p.count > 0 {
            return None;
        }
        m.remove(&key)
    });
    let Some(p) = last else { return };
    // The host asked for this call and it waited for the last pin, which is gone: it runs
    // once, here. An error cannot be reported to anyone (the host's call already returned
    // success).
    if p.destroyed {
        let mut a = sys::Buffer_Destroy_Args::new();
        a.buffer = buffer;
        // SAFETY: a live buffer of this plugin, destroyed once (above).
        let _ = unsafe { p.api.buffer_destroy(&mut a) };
    } else if p.deleted {
        let mut a = sys::Buffer_Delete_Args::new();
        a.buffer = buffer;
        // SAFETY: a live buffer of this plugin, deleted once (above).
        let _ = unsafe { p.api.buffer_delete(&mut a) };
    }
    if !p.client.is_null() && clients::release(p.client) {
        let mut d = sys::Client_Destroy_Args::new();
        d.client = p.client;
        // SAFETY: the host destroyed its client while this pin borrowed it: the vendor's
        // Destroy runs once, here, after the buffer's.
        let _ = unsafe { p.api.client_destroy(&mut d) };
    }
}
