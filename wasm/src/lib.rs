//! # dlport-wasm
//!
//! dlport's WebGPU device: `kDLWebGPU` (15) tensors in wgpu buffers, behind the core
//! [`Backend`](dlport_core::backend::Backend) trait. The same code runs natively (Vulkan or GL,
//! lavapipe in CI) and in the browser (the WebGPU API).
//!
//! On wasm32 the backend is always built. On the host it is built with the `native` feature
//! (wgpu's Vulkan and GL backends); without it the crate is empty there, so that a workspace
//! build on the host compiles no native graphics stack.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(target_arch = "wasm32")]
mod foreign_buffer;
#[cfg(any(target_arch = "wasm32", feature = "native"))]
pub mod gpu;
#[cfg(target_arch = "wasm32")]
pub mod js;

#[cfg(any(target_arch = "wasm32", feature = "native"))]
pub use gpu::{GpuDevice, KernelError, Normalize, OnRelease, WebGpuBackend};

#[cfg(any(target_arch = "wasm32", feature = "native"))]
use dlport_core::{Error, Registry, backend::CpuBackend};

/// A registry of the CPU backend (wasm or host memory) and `webgpu`, for callers that keep a
/// registry of their own.
#[cfg(any(target_arch = "wasm32", feature = "native"))]
pub fn registry(webgpu: WebGpuBackend) -> Result<Registry, Error> {
    let mut r = Registry::new();
    r.register(std::sync::Arc::new(CpuBackend))?;
    r.register(std::sync::Arc::new(webgpu))?;
    Ok(r)
}

/// Installs, once, the process-wide default registry that `dlport_core::from_dlpack` and
/// `to_dlpack` use: the CPU backend and `webgpu` (open it first with
/// [`WebGpuBackend::new`]). Call it before the first `from_dlpack` / `to_dlpack`: a default is
/// never replaced, and a second install fails with `DispatchError::DefaultInstalled`, naming
/// the backends in force.
#[cfg(any(target_arch = "wasm32", feature = "native"))]
pub fn install(webgpu: WebGpuBackend) -> Result<&'static Registry, Error> {
    registry(webgpu)?.install_default()
}
