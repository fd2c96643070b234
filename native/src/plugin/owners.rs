//! Which plugin made each live plugin buffer, so that every operation on an existing tensor goes
//! to the plugin that made it, never to another plugin serving the same device type.
//!
//! A backend's copy receives a view (`TensorRef`), which carries the data handle but not the
//! storage behind it; so every plugin storage (an allocation, an import's view) records its
//! handle here while it lives ([`Record`], removed when the storage drops), and
//! [`owner_of`] answers for a handle: nobody (foreign memory, such as a producer's tensor being
//! copied in), one plugin, or several (two plugins hold live buffers at the same handle value:
//! dlport refuses to guess).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::backend::PluginBackend;

/// Handle address → the plugins holding a live buffer there, each with a count of buffers.
type Table = BTreeMap<usize, Vec<(Weak<PluginBackend>, usize)>>;

static OWNERS: Mutex<Table> = Mutex::new(BTreeMap::new());

/// A plugin storage's entry in the table: recorded when made, removed when dropped.
pub(super) struct Record {
    key: usize,
    plugin: Weak<PluginBackend>,
}

impl Record {
    /// Records that `plugin` holds a live buffer at `handle`.
    pub(super) fn new(handle: *mut c_void, plugin: &Arc<PluginBackend>) -> Self {
        let key = handle as usize;
        let plugin = Arc::downgrade(plugin);
        let mut table = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
        let holders = table.entry(key).or_default();
        match holders.iter_mut().find(|(p, _)| p.ptr_eq(&plugin)) {
            Some((_, n)) => *n += 1,
            None => holders.push((plugin.clone(), 1)),
        }
        Self { key, plugin }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let mut table = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(holders) = table.get_mut(&self.key) {
            if let Some(at) = holders.iter().position(|(p, _)| p.ptr_eq(&self.plugin)) {
                holders[at].1 -= 1;
                if holders[at].1 == 0 {
                    holders.swap_remove(at);
                }
            }
            if holders.is_empty() {
                table.remove(&self.key);
            }
        }
    }
}

/// Who holds a handle.
pub(super) enum Owner {
    /// No plugin buffer lives at it: foreign memory (a producer's tensor).
    Foreign,
    /// The plugin that made the buffer.
    One(Arc<PluginBackend>),
    /// Several plugins hold live buffers at this handle value: their names.
    Several(Vec<&'static str>),
}

/// Who holds a live plugin buffer at `handle`.
pub(super) fn owner_of(handle: *mut c_void) -> Owner {
    let mut live: Vec<Arc<PluginBackend>> = {
        let table = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .get(&(handle as usize))
            .map_or_else(Vec::new, |holders| {
                holders.iter().filter_map(|(p, _)| p.upgrade()).collect()
            })
    };
    // The lock is released before any of these counted handles can drop (a plugin's
    // `destroy` never runs under it).
    match live.len() {
        0 => Owner::Foreign,
        1 => live.pop().map_or(Owner::Foreign, Owner::One),
        _ => Owner::Several(live.iter().map(|p| p.name).collect()),
    }
}

/// The error for a handle at which several plugins hold live buffers (`names`): dlport does
/// not guess which of them made the tensor.
pub(super) fn ambiguous(names: &[&'static str], device: dlport_core::Device) -> dlport_core::Error {
    super::error::plugin_error(
        &names.join(", "),
        "the plugin table",
        "dispatch",
        -1,
        &format!(
            "plugins [{}] each hold a live buffer at the same handle on {device}, so dlport \
             cannot tell which made this tensor; give distinct handles (a plugin's handles \
             are its own allocations or views)",
            names.join(", ")
        ),
    )
}
