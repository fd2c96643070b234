//! `dlport._native._about()`: what this build is and what it found on this machine, for
//! `python -m dlport`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A dict: `backends` (name and the device types each serves, in registration order), `cuda`
/// (`(found, detail)`: the device count, or the driver loader's error), and the build
/// (`abi3`: the stable-ABI floor or None, `profile`, `features`).
#[pyfunction]
pub fn _about(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    let registry = crate::adapter::registry();
    let backends: Vec<(&'static str, Vec<String>)> = registry
        .names()
        .map(|name| {
            let types = registry
                .get(name)
                .map(|b| b.device_types().iter().map(|t| t.to_string()).collect())
                .unwrap_or_default();
            (name, types)
        })
        .collect();
    out.set_item("backends", backends)?;
    let cuda = match dlport_native::cuda::CudaBackend::new() {
        Ok(b) => (true, format!("{} device(s)", b.device_count())),
        Err(e) => (false, e.to_string()),
    };
    out.set_item("cuda", cuda)?;
    let abi3: Option<&str> = if cfg!(feature = "abi3-py39") {
        Some("3.9")
    } else if cfg!(feature = "abi3-py310") {
        Some("3.10")
    } else {
        None
    };
    out.set_item("abi3", abi3)?;
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    out.set_item("profile", profile)?;
    let mut features = Vec::new();
    if cfg!(feature = "abi3-py310") {
        features.push("abi3-py310");
    }
    if cfg!(feature = "abi3-py39") {
        features.push("abi3-py39");
    }
    if cfg!(feature = "bench") {
        features.push("bench");
    }
    out.set_item("features", features)?;
    Ok(out)
}
