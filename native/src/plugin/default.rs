//! The plugin table of dlport-native's default registry, as the C ABI and the Python package
//! reach it: adding and loading plugins into it, and listing its backends. A room of its own
//! above both the host ([`super::host`]) and the installation (`crate::install`, which
//! registers the host), so that neither names the other's room back.

use std::sync::Arc;

use dlport_core::Error;
use dlport_core::backend::Backend;
use dlport_core::error::BackendError;

use super::backend::PluginBackend;
use super::host::{PLUGIN_HOST_NAME, plugins, register_global};

/// Adds a plugin to the process-wide table of dlport-native's default registry (installed
/// first if no default is in force). If `keep_state`, a refused plugin drops without
/// `destroy` (its registrant keeps the state); otherwise it is destroyed.
pub fn add_to_default(plugin: Arc<PluginBackend>, keep_state: bool) -> Result<(), Error> {
    let r = crate::install_or_default();
    if keep_state {
        // Disarmed until registered: a refused plugin drops without `destroy`.
        plugin.disarm();
    }
    if r.get(PLUGIN_HOST_NAME).is_none() {
        return Err(Error::Backend(BackendError::unsupported(
            plugin.name(),
            "registration in the process-wide registry: it was installed by other code without \
             dlport-native's `plugins` backend (register the plugin in that registry instead)",
        )));
    }
    let names: Vec<&'static str> = r.names().collect();
    let p = plugin.clone();
    register_global(plugin, &names)?;
    p.arm();
    Ok(())
}

/// Loads a plugin library from `path` and adds it to the default registry's plugin table
/// ([`PluginBackend::load`], then [`add_to_default`]); returns its name.
///
/// # Safety
/// As for [`PluginBackend::load`]: the library's code runs, and its callbacks are trusted.
pub unsafe fn load_into_default(path: impl AsRef<std::path::Path>) -> Result<&'static str, Error> {
    // SAFETY: forwarded contract.
    let p = unsafe { PluginBackend::load(path) }?;
    let name = p.name();
    add_to_default(p, false)?;
    Ok(name)
}

/// A backend of the default registry as listed by `dlport_backends` and `dlport.backends()`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BackendInfo {
    /// Its name.
    pub name: &'static str,
    /// `"builtin"`, `"plugin"` or `"pjrt"` (a PJRT client).
    pub kind: &'static str,
    /// The DLPack device types it serves.
    pub device_types: Vec<i32>,
    /// A plugin's or PJRT plugin's library path, or `"dlport_register_backend"`; `None` for
    /// built-in backends.
    pub origin: Option<&'static str>,
    /// The plugin callbacks given (empty for built-in backends).
    pub callbacks: Vec<&'static str>,
}

/// Whether `name` is the default registry's door to its PJRT clients (listed one by one).
fn is_pjrt_host(name: &str) -> bool {
    #[cfg(feature = "pjrt")]
    return name == crate::interop::pjrt::PJRT_HOST_NAME;
    #[cfg(not(feature = "pjrt"))]
    return {
        let _ = name;
        false
    };
}

/// The backends of the default registry (without the `plugins` and `pjrt` hosts themselves), the plugins of
/// its table and its PJRT clients, in registration order.
pub fn backends() -> Vec<BackendInfo> {
    let r = crate::install_or_default();
    let mut list: Vec<BackendInfo> = r
        .names()
        .filter(|n| *n != PLUGIN_HOST_NAME && !is_pjrt_host(n))
        .filter_map(|n| r.get(n))
        .map(|b| BackendInfo {
            name: b.name(),
            kind: "builtin",
            device_types: b.device_types().iter().map(|t| t.0).collect(),
            origin: None,
            callbacks: Vec::new(),
        })
        .collect();
    list.extend(plugins().iter().map(|p| BackendInfo {
        name: p.name(),
        kind: "plugin",
        device_types: p.device_types().iter().map(|t| t.0).collect(),
        origin: Some(p.origin()),
        callbacks: p.callbacks(),
    }));
    // The PJRT clients of the default registry's `pjrt` backend (`register_default`).
    #[cfg(feature = "pjrt")]
    use crate::interop::pjrt::registered;
    #[cfg(feature = "pjrt")]
    list.extend(registered().iter().map(|b| BackendInfo {
        name: b.name(),
        kind: "pjrt",
        device_types: b.device_types().iter().map(|t| t.0).collect(),
        origin: Some(b.client().plugin().origin()),
        callbacks: Vec::new(),
    }));
    list
}
