//! The Python package `dlport` (module `dlport._native`): DLPack import from any producer,
//! `dlport.Tensor` as a producer, and the DLPack 1.3 C exchange API both ways, over
//! dlport-native's registry.
//!
//! - [`adapter`]: the one module that calls dlport's Rust API;
//! - [`import`]: `from_dlpack` (capsules, the exchange API, `__dlpack__`);
//! - [`tensor`]: `dlport.Tensor`; [`buffer`]: its buffer protocol;
//! - [`exchange`]: the `DLPackExchangeAPI` table, as producer and consumer;
//! - [`capsule`]: DLPack capsules and their destructor; [`errors`]: exceptions;
//! - [`cpython`]: the CPython declarations pyo3's abi3 bindings lack;
//! - [`about`]: `_about()`, the build and the backends found, for `python -m dlport`;
//! - [`share`]: tensors shared with another process (`share`, `Shared`, `open_shared`);
//! - `bench` (cargo feature `bench`, off in the wheel): timing loops for `bench/python`.
#![deny(unsafe_op_in_unsafe_fn)]

mod about;
mod adapter;
mod args;
#[cfg(feature = "bench")]
mod bench;
mod buffer;
mod capsule;
mod cpython;
mod errors;
mod exchange;
mod import;
mod plugin;
mod share;
mod tensor;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<tensor::PyTensor>()?;
    m.add_function(wrap_pyfunction!(import::from_dlpack, m)?)?;
    m.add_class::<share::PyShared>()?;
    m.add_function(wrap_pyfunction!(share::share, m)?)?;
    m.add_function(wrap_pyfunction!(share::open_shared, m)?)?;
    m.add_function(wrap_pyfunction!(about::_about, m)?)?;
    m.add_function(wrap_pyfunction!(import::_route, m)?)?;
    plugin::add(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "__dlpack_version__",
        (
            dlport_core::abi::DLPACK_MAJOR_VERSION,
            dlport_core::abi::DLPACK_MINOR_VERSION,
        ),
    )?;
    let ty = py.get_type::<tensor::PyTensor>();
    cpython::check(&ty)?;
    buffer::install(&ty)?;
    #[cfg(feature = "bench")]
    bench::add(m)?;
    Ok(())
}
