//! # dlport-native
//!
//! dlport's native backends, registered into the core [`Registry`](dlport_core::Registry):
//! - the core's `CpuBackend`: 64-byte-aligned host memory and
//!   the strided → compact copies of
//!   [`copy_to_compact`](dlport_core::TensorRef::copy_to_compact) (SIMD kernels included);
//! - [`pinned::PinnedBackend`]: page-locked host memory (CUDA-pinned with a driver, `mlock`
//!   otherwise);
//! - `cuda::CudaBackend` (feature `cuda`): device memory, H2D/D2H through pinned staging, the
//!   DLPack stream hand-off. The driver is loaded at run time; its absence is an error, not a
//!   panic.
//!
//! [`install()`] makes every backend that really works on this machine the process-wide default
//! (the one `dlport_core::from_dlpack` / `to_dlpack` and the C ABI, dlport-capi, use); [`registry()`] returns
//! the same backends as a registry of your own.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(feature = "arrow")]
pub mod arrow;
#[cfg(feature = "cuda")]
pub mod cuda;
mod install;
pub mod interop;
mod names;
pub mod pinned;
#[cfg(feature = "pjrt")]
pub mod pjrt;
pub mod plugin;
pub mod share;
mod sync;

pub use dlport_core;
pub use install::{install, install_or_default, machine_memory, registry, registry_with_report};
pub use sync::sync_managed;

/// The crate README's Rust examples (`native/README.md`), compiled and run as doc tests (the
/// PJRT program, which needs a plugin's path and the `pjrt` feature, is built and run by the
/// README snippet test, `scripts/snippets-test.sh`, with the plugin installed as it says).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
