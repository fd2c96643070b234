//! The JavaScript API (wasm32 only; generated TypeScript types come with wasm-bindgen).
//!
//! The npm package `dlport`: `init()` opens the one shared WebGPU device, `device()` returns
//! its `GPUDevice` (hand it to TF.js and onnxruntime-web), and `Tensor` wraps typed arrays
//! (kDLCPU in wasm memory), dlport's own WebGPU buffers and foreign `GPUBuffer`s
//! (`Tensor.fromGpuBuffer`, released through the owner's callback), with `toDevice("webgpu")`,
//! `toHost()` (a Promise), `gpuBuffer`, `normalize()` (a WGSL kernel), DLPack export and import
//! within the wasm heap, and getters for shape, strides, dtype and device. Errors are JS
//! `Error`s carrying dlport's message.
//!
//! Every value a caller passes is read through `args` (its readers in `js/args.js`, imported
//! with `catch`) before it is used: a throwing getter, a Proxy or a detached buffer is a
//! refusal naming the argument, and no JS exception unwinds through wasm frames.
//!
//! The modules: this one holds the shared device, `Tensor` and its getters; `args` the
//! readers of caller values; `arrays` typed arrays in and out; `device` moves between devices and the GPU kernels; `gpu_buffer` foreign
//! `GPUBuffer`s; `dlpack` DLPack export and take-back, with the registry of live exports.

use std::cell::RefCell;

use dlport_core::{Registry, Tensor as CoreTensor};
use wasm_bindgen::prelude::*;

use crate::WebGpuBackend;

mod args;
mod arrays;
mod device;
mod dlpack;
mod gpu_buffer;

pub use dlpack::live_exports;

thread_local! {
    static BACKEND: RefCell<Option<WebGpuBackend>> = const { RefCell::new(None) };
}

fn backend() -> Result<WebGpuBackend, JsError> {
    BACKEND
        .with(|b| b.borrow().clone())
        .ok_or_else(|| JsError::new("dlport: call `await init()` before using WebGPU tensors"))
}

/// The registry of the JS layer: the CPU backend (wasm memory) and, after `init()`, WebGPU.
/// Its own, not the process-wide default: JS may use CPU tensors before `init()` adds the
/// device, and a default is installed once.
fn registry() -> Result<Registry, JsError> {
    match BACKEND.with(|b| b.borrow().clone()) {
        Some(b) => crate::registry(b).map_err(js_err),
        None => Ok(Registry::with_cpu()),
    }
}

fn js_err(e: dlport_core::Error) -> JsError {
    JsError::new(&e.to_string())
}

/// Runs when the module is instantiated: guards `Tensor.prototype`'s methods and getters, so
/// that a freed tensor, the prototype itself or any other `this` is refused in JavaScript
/// (`free()` of a freed tensor does nothing) instead of reaching wasm-bindgen's null check,
/// which throws from inside wasm.
#[wasm_bindgen(start, skip_typescript)]
fn guard_tensor_methods() -> Result<(), JsValue> {
    let m = dlport_core::ExportBuilder::new(Vec::<u8>::new(), dlport_core::DataType::UINT8, &[0])
        .build()
        .map_err(js_err)?;
    let inner = dlport_core::backend::Backend::view_external(
        &dlport_core::backend::CpuBackend,
        m,
        dlport_core::Device::cpu(),
    )
    .map_err(js_err)?;
    args::guard_tensor(&JsValue::from(Tensor { inner }))
}

/// Opens the shared WebGPU device (idempotent).
#[wasm_bindgen]
pub async fn init() -> Result<(), JsError> {
    if BACKEND.with(|b| b.borrow().is_some()) {
        return Ok(());
    }
    let b = WebGpuBackend::new().await.map_err(js_err)?;
    BACKEND.with(|slot| *slot.borrow_mut() = Some(b));
    Ok(())
}

/// Which of the package's two wasm builds is running: `"simd128"` (`dlport_bg.wasm`, built
/// with WebAssembly SIMD; the default initialisation loads it where `WebAssembly.validate`
/// accepts a SIMD module) or `"scalar"` (`dlport_scalar_bg.wasm`, for engines without SIMD).
/// Answered by the module itself, so it is right however the module was loaded.
#[wasm_bindgen(js_name = wasmBuild, unchecked_return_type = "\"simd128\" | \"scalar\"")]
pub fn wasm_build() -> String {
    if cfg!(target_feature = "simd128") {
        "simd128"
    } else {
        "scalar"
    }
    .to_string()
}

/// The one shared `GPUDevice` (after `init()`), to hand to TF.js or onnxruntime-web.
#[wasm_bindgen(unchecked_return_type = "GPUDevice")]
pub fn device() -> Result<JsValue, JsError> {
    let b = backend()?;
    let d = b
        .gpu()
        .device()
        .as_webgpu()
        .ok_or_else(|| JsError::new("dlport: not on the WebGPU backend"))?;
    Ok(JsValue::from(d.clone()))
}

/// A tensor held by dlport: in wasm memory (`cpu`) or in a WebGPU buffer (`webgpu:0`).
#[wasm_bindgen]
pub struct Tensor {
    inner: CoreTensor,
}

#[wasm_bindgen]
impl Tensor {
    /// Extents, as a new array of numbers.
    #[wasm_bindgen(getter, unchecked_return_type = "number[]")]
    pub fn shape(&self) -> js_sys::Array {
        numbers(self.inner.shape())
    }

    /// Strides in elements, as a new array of numbers.
    #[wasm_bindgen(getter, unchecked_return_type = "number[]")]
    pub fn strides(&self) -> js_sys::Array {
        numbers(self.inner.strides())
    }

    /// The dtype name ("float32", "bfloat16", …).
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        self.inner.dtype().to_string()
    }

    /// The device ("cpu", "webgpu:0").
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        self.inner.device().to_string()
    }

    /// Bytes from the buffer's start to the first element.
    #[wasm_bindgen(getter, js_name = byteOffset)]
    pub fn byte_offset(&self) -> f64 {
        self.inner.byte_offset() as f64
    }
}

/// Extents or strides as a JS array of numbers.
fn numbers(values: &[i64]) -> js_sys::Array {
    values
        .iter()
        .map(|&x| JsValue::from_f64(x as f64))
        .collect()
}
