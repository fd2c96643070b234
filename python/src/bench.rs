//! `dlport._native._bench`, built only with the cargo feature `bench` (bench/python builds
//! it; the wheel does not): a timing loop for `bench/python/exchange.py`, the per-tensor cost
//! of an import through a type's DLPack exchange API, measured inside native code (a
//! Python-level loop would add a call's overhead to every iteration).

use std::time::Instant;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::adapter;
use crate::exchange;

/// Adds the submodule `_bench` to the extension module `m`.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let bench = PyModule::new(m.py(), "_bench")?;
    bench.add_function(wrap_pyfunction!(exchange_loop, &bench)?)?;
    m.add_submodule(&bench)
}

/// Runs `n` imports of `obj` through `type(obj).__dlpack_c_exchange_api__` and returns the
/// elapsed nanoseconds. Each iteration looks the table up (the per-type cache), exports with
/// `managed_tensor_from_py_object_no_sync`, then either validates and releases the managed
/// tensor (`full=False`: what a kernel library does with an argument) or imports it into a
/// held dlport tensor and drops it (`full=True`: what `dlport.from_dlpack` does, less the
/// Python call and the result object).
#[pyfunction]
#[pyo3(signature = (obj, n, full))]
fn exchange_loop(obj: &Bound<'_, PyAny>, n: u64, full: bool) -> PyResult<u64> {
    let ty = obj.get_type();
    let exchange::Route::Exchange(_) = exchange::route(ty.as_borrowed())? else {
        return Err(PyTypeError::new_err(
            "the object's type has no DLPack exchange API",
        ));
    };
    let start = Instant::now();
    for _ in 0..n {
        let exchange::Route::Exchange(api) = exchange::route(ty.as_borrowed())? else {
            return Err(PyTypeError::new_err(
                "the object's type lost its DLPack exchange API",
            ));
        };
        let raw = exchange::take_from(api, obj)?;
        if full {
            // SAFETY: just handed over by the producer.
            drop(unsafe { adapter::import(raw, &dlport_core::ImportOptions::default(), false) }?);
        } else {
            // SAFETY: just handed over by the producer.
            unsafe { adapter::validate_and_release(raw) }?;
        }
    }
    Ok(start.elapsed().as_nanos() as u64)
}
