//! DLPack for PyO3 extensions, and the code of the Python package `dlport`.
//!
//! An extension function takes [`DLPackTensor`] as an argument to accept any DLPack producer
//! (NumPy, JAX, PyTorch, CuPy, tvm-ffi, `dlport.Tensor`, a bare capsule) and returns one (or a
//! [`PyTensor`]) to hand a tensor back to Python as an object with `__dlpack__`,
//! `__dlpack_device__` and the DLPack 1.3 C exchange API:
//!
//! ```no_run
//! use dlport_pyo3::DLPackTensor;
//! use pyo3::prelude::*;
//!
//! /// The same memory, held by dlport: no copy.
//! #[pyfunction]
//! fn passthrough(x: DLPackTensor) -> DLPackTensor {
//!     x
//! }
//! ```
//!
//! The import is the package's `dlport.from_dlpack`, the same code: the producer type's C
//! exchange API where it has one (`__dlpack_c_exchange_api__`), `__dlpack__(max_version=(1, 3))`
//! otherwise (and `__dlpack__()` for a producer from before DLPack 1.0), or a bare capsule; the
//! tensor is validated, and imported as a view (or copied where [`ImportOptions`](dlport_core::ImportOptions) ask for a
//! device, layout or alignment the memory lacks and `copy` allows). Errors are the package's:
//! `dlport.DLPackBufferError` (a `BufferError`) and its siblings when the package `dlport` is
//! installed, the builtin classes otherwise, each naming the field and the value.
//!
//! The modules below [`DLPackTensor`] and [`PyTensor`] are the package's own rooms, public for
//! the package (`python/src`) and hidden from these docs.
#![deny(unsafe_op_in_unsafe_fn)]

#[doc(hidden)]
pub mod adapter;
#[doc(hidden)]
pub mod args;
mod buffer;
#[doc(hidden)]
pub mod capsule;
mod cpython;
mod dlpack_tensor;
#[doc(hidden)]
pub mod errors;
#[doc(hidden)]
pub mod exchange;
#[doc(hidden)]
pub mod import;
mod pickle;
#[doc(hidden)]
pub mod pjrt;
mod ready;
mod reduce;
#[doc(hidden)]
pub mod tensor;

pub use dlpack_tensor::DLPackTensor;
pub use errors::error;
pub use ready::ready;
pub use tensor::PyTensor;
