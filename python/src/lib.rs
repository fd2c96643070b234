//! The Python package `dlport` (module `dlport._native`): DLPack import from any producer,
//! `dlport.Tensor` as a producer, and the DLPack 1.3 C exchange API both ways, over
//! dlport-native's registry.
//!
//! The import, `dlport.Tensor`, the exchange API, capsules, errors and argument parsing are
//! dlport-pyo3's (python/pyo3), the crate PyO3 extensions use: the package calls the same code.
//! What only the package has lives here:
//!
//! - this `#[pymodule]`;
//! - [`about`]: `_about()`, the build and the backends found, for `python -m dlport`;
//! - [`share`]: tensors shared with another process (`share`, `Shared`, `open_shared`);
//! - [`plugin`]: C plugins (`load_plugin`, `unload_plugin`, `backends`);
//! - [`limit`]: the process's allocation limit (`set_alloc_limit`, `alloc_limit`);
//! - [`pjrt_probe`]: the PJRT capability probe's report (`_pjrt_probe`, for `dlport.pjrt.probe`);
//! - `bench` (cargo feature `bench`, off in the wheel): timing loops for `bench/python`.
#![deny(unsafe_op_in_unsafe_fn)]

mod about;
#[cfg(feature = "bench")]
mod bench;
mod limit;
mod pjrt_probe;
mod plugin;
mod share;

use dlport_pyo3::PyTensor;
#[cfg(feature = "bench")]
use dlport_pyo3::internal::exchange;
use dlport_pyo3::internal::{adapter, args, capsule, errors, import, jax, pjrt};
use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyTensor>()?;
    m.add_function(wrap_pyfunction!(import::from_dlpack, m)?)?;
    m.add_class::<share::PyShared>()?;
    m.add_function(wrap_pyfunction!(share::share, m)?)?;
    m.add_function(wrap_pyfunction!(share::open_shared, m)?)?;
    m.add_function(wrap_pyfunction!(about::_about, m)?)?;
    m.add_function(wrap_pyfunction!(import::_route, m)?)?;
    plugin::add(m)?;
    pjrt::add(m)?;
    pjrt_probe::add(m)?;
    jax::add(m)?;
    limit::add(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "__dlpack_version__",
        (
            dlport_core::abi::DLPACK_MAJOR_VERSION,
            dlport_core::abi::DLPACK_MINOR_VERSION,
        ),
    )?;
    dlport_pyo3::ready(py)?;
    #[cfg(feature = "bench")]
    bench::add(m)?;
    Ok(())
}
