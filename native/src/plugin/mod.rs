//! C plugins: device backends written in C (or anything with a C ABI) and registered at run
//! time, without recompiling dlport.
//!
//! A plugin is a [`DlportPlugin`]: a versioned struct of callbacks (see `docs/plugins.md` and
//! the header's comments for every callback's contract). [`PluginBackend`] implements the core
//! [`Backend`](dlport_core::backend::Backend) trait by calling them, so a plugin goes into any
//! [`Registry`](dlport_core::Registry) beside the Rust backends and resolves by the same rules.
//!
//! The process-wide default registry is fixed once installed, so the C ABI and the Python
//! package reach plugins through [`PluginHost`], a backend of dlport-native's default registry
//! that serves the device types of the plugins in its table (registered with
//! `dlport_register_backend` or loaded with `dlport_load_plugin`).
//!
//! Whatever a plugin does, dlport keeps its own guarantees: a failing callback is an error
//! naming the plugin and the callback; a callback that reports success but returns nothing (a
//! NULL view, reference or allocation) is refused and what dlport holds is released; every
//! handle a plugin returns is given back to it exactly once; and a plugin stays loaded (its
//! `destroy` callback not yet called, its library not closed) while any tensor or export that
//! uses it lives.

mod backend;
mod default;
mod described;
mod error;
mod export;
mod host;
mod import;
mod interface;
mod load;
mod memory;
mod owners;
pub mod rule;

pub use backend::PluginBackend;
pub use default::{BackendInfo, add_to_default, backends, load_into_default};
/// The error texts the PJRT backend shares with C plugins.
#[cfg(feature = "pjrt")]
pub(crate) use error::plugin_error;
pub use host::{PLUGIN_HOST_NAME, PluginHost, plugins, register_global, unregister_global};
pub use interface::*;
pub use load::Library;
