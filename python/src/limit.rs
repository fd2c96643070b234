//! `dlport.set_alloc_limit` and `dlport.alloc_limit`: the process's allocation limit, which is
//! dlport-core's (`dlport_core::set_alloc_limit`, the C ABI's `dlport_set_alloc_limit`). The
//! binding only translates: core decides the limit in force, the lowest of a call's
//! `max_alloc`, the registry's and this one.

use dlport_pyo3::internal::{adapter, errors};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;

/// Sets the most bytes any copy dlport makes in this process may allocate, in every door (a
/// call's `max_alloc` can lower it, never raise it), and returns the limit it replaces. 0
/// restores the default: the machine's memory (the smallest of physical memory, the cgroup's
/// limit and RLIMIT_AS / RLIMIT_DATA).
#[pyfunction]
#[pyo3(signature = (bytes, /))]
pub fn set_alloc_limit(bytes: &Bound<'_, PyAny>) -> PyResult<u64> {
    let bytes = match bytes.extract::<u64>() {
        Ok(n) => n,
        Err(e) if e.is_instance_of::<PyOverflowError>(bytes.py()) => {
            return Err(errors::value_error(format!(
                "set_alloc_limit({}) is out of range: give a number of bytes from 0 (the \
                 default) to 2**64 - 1",
                bytes.repr()?
            )));
        }
        Err(_) => {
            return Err(errors::type_error(format!(
                "set_alloc_limit() takes an int (bytes; 0: the default), got {}",
                bytes.get_type().name()?
            )));
        }
    };
    // The native default first: the machine's memory is the default that 0 restores.
    let registry = adapter::registry();
    let before = registry.alloc_limit(None);
    dlport_core::set_alloc_limit(bytes);
    Ok(before)
}

/// The allocation limit in force for a call that gives no `max_alloc`, in bytes.
#[pyfunction]
pub fn alloc_limit() -> u64 {
    adapter::registry().alloc_limit(None)
}

/// Adds the functions to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_alloc_limit, m)?)?;
    m.add_function(wrap_pyfunction!(alloc_limit, m)?)?;
    Ok(())
}
