//! # dlport-wasm
//!
//! dlport's WebGPU device: `kDLWebGPU` (15) tensors in wgpu buffers, behind the core
//! [`Backend`](dlport_core::backend::Backend) trait. The same code runs natively (Vulkan or GL,
//! lavapipe in CI) and in the browser (the WebGPU API).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod gpu;
#[cfg(target_arch = "wasm32")]
pub mod js;
#[cfg(target_arch = "wasm32")]
mod raw;

pub use gpu::{GpuDevice, KernelError, Normalize, OnRelease, WebGpuBackend};
