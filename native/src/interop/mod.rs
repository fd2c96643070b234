//! Adapters to the device crates Rust users hold their tensors in, each behind its own cargo
//! feature (off by default). dlport-core's crate page has the table of every adapter.

#[cfg(feature = "cudarc")]
pub mod cudarc;
#[cfg(feature = "pjrt")]
pub mod pjrt;
