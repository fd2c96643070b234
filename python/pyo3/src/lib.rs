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
//! The package's own rooms are private; what the package (`python/src`) calls of them is
//! re-exported in one place, the hidden module `internal`, which is not part of this crate's
//! API.
#![deny(unsafe_op_in_unsafe_fn)]

mod adapter;
mod args;
mod buffer;
mod capsule;
mod cpython;
mod dlpack_tensor;
mod errors;
mod exchange;
mod geometry;
mod import;
mod jax;
mod methods;
mod pickle;
mod pjrt;
mod ready;
mod reduce;
mod tensor;

pub use dlpack_tensor::DLPackTensor;
pub use errors::error;
pub use ready::ready;
pub use tensor::PyTensor;

/// What the Python package `dlport` (`python/src`, the crate `dlport-python`) calls of these
/// rooms, and nothing else: the crate's only door to them beside the items above. Not part of
/// this crate's API: it changes with the package, in any release.
#[doc(hidden)]
pub mod internal {
    /// The registry and the errors' classes (`crate::adapter`).
    pub mod adapter {
        #[cfg(feature = "bench")]
        pub use crate::adapter::validate_and_release;
        pub use crate::adapter::{Failure, Kind, import, registry};
    }

    /// Keyword arguments (`crate::args`).
    pub mod args {
        pub use crate::args::{copy, flag};
    }

    /// Capsules and type names (`crate::capsule`).
    pub mod capsule {
        pub use crate::capsule::type_name;
    }

    /// The binding's own exceptions (`crate::errors`).
    pub mod errors {
        pub use crate::errors::{type_error, value_error};
    }

    /// The DLPack exchange API as a consumer (`crate::exchange`).
    pub mod exchange {
        pub use crate::exchange::{Route, route, take_from};
    }

    /// `dlport.from_dlpack` and `dlport._route` (`crate::import`).
    pub mod import {
        pub use crate::import::{_route, from_dlpack};
    }

    /// `dlport.jax`'s native functions (`crate::jax`).
    pub mod jax {
        pub use crate::jax::add;
    }

    /// `dlport.pjrt`'s classes (`crate::pjrt`).
    pub mod pjrt {
        pub use crate::pjrt::add;
    }
}
