//! The host's clients, counted: the host holds one reference from `PJRT_Client_Create`, and
//! each [`borrow`] one more; `PJRT_Client_Destroy` through the interposed table gives one back,
//! and only the last reaches the vendor. So a client dlport borrows outlives the host's
//! `Destroy` (`jax.clear_backends()`), and the host's outlives dlport's.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::super::sys;

static CLIENTS: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut HashMap<usize, usize>) -> R) -> R {
    let mut g = CLIENTS.lock().unwrap_or_else(PoisonError::into_inner);
    f(g.get_or_insert_with(HashMap::new))
}

/// A client the vendor just created: one reference, the creator's.
pub(super) fn created(client: *mut sys::PJRT_Client) {
    with(|m| m.insert(client as usize, 1));
}

/// One more reference to a live `client`; `false` when the table holds none (destroyed, or
/// not created through it).
pub(super) fn borrow(client: *mut sys::PJRT_Client) -> bool {
    with(|m| match m.get_mut(&(client as usize)) {
        Some(n) => {
            *n += 1;
            true
        }
        None => false,
    })
}

/// Gives one reference back; `true` when it was the last (the vendor's `Destroy` runs now),
/// or the client is not counted (created elsewhere: passed through).
pub(super) fn release(client: *mut sys::PJRT_Client) -> bool {
    with(|m| {
        let key = client as usize;
        match m.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                m.remove(&key);
                true
            }
            None => true,
        }
    })
}

/// The references `client` has (0: destroyed, or not counted).
pub(super) fn holders(client: *mut sys::PJRT_Client) -> usize {
    with(|m| m.get(&(client as usize)).copied().unwrap_or(0))
}
