//! The Python package `dlport` (module `dlport._native`): DLPack import from any producer,
//! `dlport.Tensor` as a producer, and the DLPack 1.3 C exchange API both ways, over
//! dlport-native's registry.
//!
//! - [`adapter`]: the one module that calls dlport's Rust API;
//! - [`import`]: `from_dlpack` (capsules, the exchange API, `__dlpack__`); [`fastcall`]: its
//!   vectorcall entry on CPython 3.10 and later;
//! - [`tensor`]: `dlport.Tensor`; [`buffer`]: its buffer protocol; [`freelist`]: its objects'
//!   allocator; [`heaptype`]: the head of its type object, which those two write into;
//! - [`exchange`]: the `DLPackExchangeAPI` table, as producer and consumer;
//! - [`capsule`]: DLPack capsules and their destructor; [`errors`]: exceptions;
//! - [`share`]: tensors shared with another process (`share`, `Shared`, `open_shared`).
#![deny(unsafe_op_in_unsafe_fn)]

mod adapter;
mod args;
mod bench;
mod buffer;
mod capsule;
mod errors;
mod exchange;
mod fastcall;
mod freelist;
mod heaptype;
mod import;
mod share;
mod tensor;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<tensor::PyTensor>()?;
    m.add_function(wrap_pyfunction!(import::from_dlpack, m)?)?;
    let fast = fastcall::install(m)?;
    m.add("_vectorcall_from_dlpack", fast)?;
    m.add_class::<share::PyShared>()?;
    m.add_function(wrap_pyfunction!(share::share, m)?)?;
    m.add_function(wrap_pyfunction!(share::open_shared, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_exchange_loop, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "__dlpack_version__",
        (
            dlport_core::abi::DLPACK_MAJOR_VERSION,
            dlport_core::abi::DLPACK_MINOR_VERSION,
        ),
    )?;
    let ty = py.get_type::<tensor::PyTensor>();
    m.add("_buffer_protocol", buffer::install(&ty)?)?;
    m.add("_freelist", freelist::install(&ty)?)?;
    m.add_function(wrap_pyfunction!(kept_tensors, m)?)?;
    Ok(())
}

/// How many dead `dlport.Tensor` objects the free list keeps now (for tests).
#[pyfunction]
#[pyo3(name = "_kept_tensors")]
fn kept_tensors(py: Python<'_>) -> usize {
    freelist::kept(py)
}
