#![doc = include_str!("../README.md")]
#![no_std]
// The README (the crate's front page) shows complete programs that compile when pasted into
// `main.rs`, so its examples keep their `fn main`.
#![allow(clippy::needless_doctest_main)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

// The rooms, each below the ones that use it (DESIGN.md draws the map). The public ones are
// the API's chapters: `abi` (the C structs), `dtype`, `layout`, `error` (every error's
// payloads), `backend` (what a backend author uses) and `interop` (the adapters); `internal`
// is for dlport's own fuzz targets, test kit and benches, and is not API.
pub mod abi;
mod access;
pub mod backend;
#[cfg(feature = "alloc")]
mod buffer;
#[cfg(feature = "alloc")]
mod copy;
mod device;
#[cfg(feature = "alloc")]
mod dims;
pub mod dtype;
pub mod error;
#[cfg(feature = "alloc")]
mod export;
#[doc(hidden)]
pub mod internal;
#[cfg(feature = "alloc")]
pub mod interop;
pub mod layout;
mod limit;
mod managed;
#[cfg(feature = "alloc")]
mod options;
#[cfg(feature = "alloc")]
mod registry;
#[cfg(feature = "alloc")]
mod storage;
#[cfg(feature = "alloc")]
mod tensor;
mod view;

// The front door: the two entry points, the tensor types, the builder, the options, the
// allocation limit, and the three types every signature names.
pub use device::Device;
pub use dtype::DataType;
pub use error::Error;
#[cfg(feature = "alloc")]
pub use export::ExportBuilder;
pub use limit::set_alloc_limit;
pub use managed::ManagedTensor;
#[cfg(feature = "alloc")]
pub use options::{CopyPolicy, ExportOptions, ImportOptions};
#[cfg(feature = "alloc")]
pub use registry::{Registry, from_dlpack, to_dlpack};
#[cfg(feature = "alloc")]
pub use tensor::{Tensor, TensorView};
pub use view::TensorRef;
