//! C plugins from Python: `load_plugin(path)`, `unload_plugin(name)` and `backends()`, over
//! dlport-native's plugin table (the same one `dlport_load_plugin` fills).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::adapter::Failure;

/// Loads a plugin library by path (`dlopen` and its `dlport_plugin_init`) into the process-wide
/// registry and returns its name. Errors name the path and the missing symbol or failing call.
/// Loading runs the library's code: load only plugins you trust.
#[pyfunction]
pub fn load_plugin(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    // The path's bytes exactly as the OS names the file (`os.fsencode`'s): no lossy
    // conversion, which would open another file name. Plugins initialise devices (seconds,
    // sometimes): without the GIL.
    let name = py.detach(|| {
        crate::adapter::registry();
        // SAFETY: the caller trusts the library (documented: loading runs its code).
        unsafe { dlport_native::plugin::load_into_default(&path) }.map_err(Failure::from)
    })?;
    Ok(name.to_owned())
}

/// Removes a plugin by name. Its tensors stay valid, and it stays loaded until the last is
/// released; new exports and copies of them fail.
#[pyfunction]
pub fn unload_plugin(name: &str) -> PyResult<()> {
    drop(dlport_native::plugin::unregister_global(name).map_err(Failure::from)?);
    Ok(())
}

/// The backends of the registry: dicts with `name`, `kind` (`"builtin"`, `"plugin"` or
/// `"pjrt"`, a client `dlport.pjrt.load` registered), `device_types` (DLPack codes), `origin`
/// (a plugin's path) and `callbacks`.
#[pyfunction]
pub fn backends(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    crate::adapter::registry();
    dlport_native::plugin::backends()
        .into_iter()
        .map(|b| {
            let d = PyDict::new(py);
            d.set_item("name", b.name)?;
            d.set_item("kind", b.kind)?;
            d.set_item("device_types", b.device_types)?;
            d.set_item("origin", b.origin)?;
            d.set_item("callbacks", b.callbacks)?;
            Ok(d)
        })
        .collect()
}

/// Adds the plugin functions to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(unload_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    Ok(())
}
