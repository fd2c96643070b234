//! `dlport.pjrt.probe`'s native half, `_pjrt_probe(path)`: dlport-native's one PJRT probe
//! (`dlport_native::pjrt::probe`), its report as text (`python -m dlport pjrt` prints it).

use dlport_pyo3::internal::adapter::Failure;
use pyo3::prelude::*;

/// The probe's report on the PJRT plugin library at `path` (a file; `dlport.pjrt.probe` finds
/// a plugin package's library by name first). Loading runs the library's code.
#[pyfunction]
#[pyo3(signature = (path, /))]
pub fn _pjrt_probe(py: Python<'_>, path: &str) -> PyResult<String> {
    let report = py.detach(|| dlport_native::pjrt::probe(path));
    Ok(report.map_err(Failure::from)?.to_string())
}

/// Adds `_pjrt_probe` to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_pjrt_probe, m)?)?;
    Ok(())
}
