//! The JavaScript API (wasm32 only; generated TypeScript types come with wasm-bindgen).
//!
//! First slice of the npm package `dlport`: `init()` opens the one shared WebGPU device,
//! `device()` returns its `GPUDevice`, and `Tensor` wraps typed arrays (kDLCPU in wasm memory)
//! and WebGPU buffers, with `toDevice("webgpu")`, `toHost()` (a Promise), `gpuBuffer`, getters
//! for shape, strides, dtype and device, and `toArray()`. Errors are JS `Error`s carrying
//! dlport's message.

use std::cell::RefCell;

use dlport_core::device::{Backend, CpuBackend, Tensor as CoreTensor};
use dlport_core::device::{ExportOptions, ImportOptions, Registry};
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor, RawManaged};
use wasm_bindgen::prelude::*;

use crate::WebGpuBackend;

thread_local! {
    static BACKEND: RefCell<Option<WebGpuBackend>> = const { RefCell::new(None) };
}

fn backend() -> Result<WebGpuBackend, JsError> {
    BACKEND
        .with(|b| b.borrow().clone())
        .ok_or_else(|| JsError::new("dlport: call `await init()` before using WebGPU tensors"))
}

/// The registry of this module: the CPU backend (wasm memory) and, after `init()`, WebGPU.
fn registry() -> Result<Registry, JsError> {
    let mut r = Registry::with_cpu();
    if let Some(b) = BACKEND.with(|b| b.borrow().clone()) {
        r.register(std::sync::Arc::new(b)).map_err(js_err)?;
    }
    Ok(r)
}

fn js_err(e: dlport_core::Error) -> JsError {
    JsError::new(&e.to_string())
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

/// The one shared `GPUDevice` (after `init()`), to hand to TF.js or onnxruntime-web.
#[wasm_bindgen]
pub fn device() -> Result<JsValue, JsError> {
    let b = backend()?;
    let d = b
        .gpu()
        .device()
        .as_webgpu()
        .ok_or_else(|| JsError::new("dlport: not on the WebGPU backend"))?;
    Ok(JsValue::from(d.clone()))
}

/// The dtype that a typed array's elements have.
fn dtype_of(array: &JsValue) -> Result<DataType, JsError> {
    let name = js_sys::Reflect::get(
        &js_sys::Object::get_prototype_of(array),
        &"constructor".into(),
    )
    .and_then(|c| js_sys::Reflect::get(&c, &"name".into()))
    .ok()
    .and_then(|n| n.as_string())
    .unwrap_or_default();
    Ok(match name.as_str() {
        "Float32Array" => DataType::FLOAT32,
        "Float64Array" => DataType::FLOAT64,
        "Int8Array" => DataType::INT8,
        "Int16Array" => DataType::INT16,
        "Int32Array" => DataType::INT32,
        "BigInt64Array" => DataType::INT64,
        "Uint8Array" | "Uint8ClampedArray" => DataType::UINT8,
        "Uint16Array" => DataType::UINT16,
        "Uint32Array" => DataType::UINT32,
        "BigUint64Array" => DataType::UINT64,
        "Float16Array" => DataType::FLOAT16,
        other => {
            return Err(JsError::new(&format!(
                "dlport: {other:?} is not a typed array dlport knows"
            )));
        }
    })
}

/// A tensor held by dlport: in wasm memory (`cpu`) or in a WebGPU buffer (`webgpu:0`).
#[wasm_bindgen]
pub struct Tensor {
    inner: CoreTensor,
}

#[wasm_bindgen]
impl Tensor {
    /// Copies a typed array into wasm memory as a compact tensor of `shape` (default: 1-d).
    /// `dtype` overrides the element type ("bfloat16" over a Uint16Array, say).
    #[wasm_bindgen(constructor)]
    pub fn new(
        array: JsValue,
        shape: Option<Vec<f64>>,
        dtype: Option<String>,
    ) -> Result<Tensor, JsError> {
        let natural = dtype_of(&array)?;
        let dtype = match dtype {
            Some(name) => name.parse::<DataType>().map_err(js_err)?,
            None => natural,
        };
        let get = |key: &str| js_sys::Reflect::get(&array, &key.into()).ok();
        let buffer =
            get("buffer").ok_or_else(|| JsError::new("dlport: the array has no buffer"))?;
        let off = get("byteOffset").and_then(|v| v.as_f64()).unwrap_or(0.0) as u32;
        let len = get("byteLength").and_then(|v| v.as_f64()).unwrap_or(0.0) as u32;
        let bytes = js_sys::Uint8Array::new_with_byte_offset_and_length(&buffer, off, len).to_vec();
        let numel = bytes.len() as i64 * 8 / i64::from(dtype.storage_bits(false).max(1));
        let shape: Vec<i64> = shape
            .map(|s| s.into_iter().map(|x| x as i64).collect())
            .unwrap_or(vec![numel]);
        let m = ExportBuilder::new(bytes, dtype, &shape)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::CPU).map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// Extents.
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Vec<f64> {
        self.inner.shape().iter().map(|&x| x as f64).collect()
    }

    /// Strides in elements.
    #[wasm_bindgen(getter)]
    pub fn strides(&self) -> Vec<f64> {
        self.inner.strides().iter().map(|&x| x as f64).collect()
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

    /// Moves the tensor to a device: "webgpu" uploads (no copy if it is already there).
    #[wasm_bindgen(js_name = toDevice)]
    pub fn to_device(&self, device: &str) -> Result<Tensor, JsError> {
        match device {
            "webgpu" | "webgpu:0" => {
                if self.inner.device() == Device::webgpu(0) {
                    return Ok(Tensor {
                        inner: self.inner.clone(),
                    });
                }
                let b = backend()?;
                let guard = self.inner.read().map_err(js_err)?;
                let t = b.gpu().upload(&guard.view(), 0).map_err(js_err)?;
                Ok(Tensor { inner: t })
            }
            "cpu" => Err(JsError::new(
                "dlport: use `await tensor.toHost()` to read a tensor back",
            )),
            other => Err(JsError::new(&format!(
                "dlport: unknown device {other:?}; use \"webgpu\" or toHost()"
            ))),
        }
    }

    /// Reads a WebGPU tensor back into wasm memory (a Promise); a host tensor resolves to
    /// itself.
    #[wasm_bindgen(js_name = toHost)]
    pub async fn to_host(&self) -> Result<Tensor, JsError> {
        if self.inner.device().is_host_accessible() {
            return Ok(Tensor {
                inner: self.inner.clone(),
            });
        }
        let b = backend()?;
        let bytes = {
            let guard = self.inner.read().map_err(js_err)?;
            let view = guard.view();
            b.gpu().download(&view).await.map_err(js_err)?
        };
        let m = ExportBuilder::new(bytes, self.inner.dtype(), self.inner.shape())
            .copied(true)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::CPU).map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// The `GPUBuffer` behind a WebGPU tensor (its data starts at `byteOffset`).
    #[wasm_bindgen(getter, js_name = gpuBuffer)]
    pub fn gpu_buffer(&self) -> Result<JsValue, JsError> {
        let b = backend()?;
        let buffer = b
            .gpu()
            .lookup(self.inner.buffer().ptr() as usize)
            .ok_or_else(|| JsError::new("dlport: this tensor is not in a WebGPU buffer"))?;
        let js = buffer
            .as_webgpu()
            .ok_or_else(|| JsError::new("dlport: not on the WebGPU backend"))?;
        Ok(JsValue::from(js.clone()))
    }

    /// Exports a DLPack 1.3 `DLManagedTensorVersioned` in this wasm module's memory and returns
    /// its address, for another wasm module (or JS glue) to consume with its deleter. The
    /// tensor's memory stays alive until that deleter runs.
    #[wasm_bindgen(js_name = toDLPack)]
    pub fn to_dlpack(&self) -> Result<u32, JsError> {
        let registry = registry()?;
        let m = registry
            .to_dlpack(&self.inner, &ExportOptions::versioned())
            .map_err(js_err)?;
        match m.into_raw() {
            RawManaged::Versioned(p) => Ok(p.as_ptr() as usize as u32),
            RawManaged::Legacy(p) => Ok(p.as_ptr() as usize as u32),
        }
    }

    /// Takes ownership of a DLPack tensor at `address` in this module's memory (versioned by
    /// default; `legacy = true` for a `DLManagedTensor`), validated, without a copy.
    ///
    /// The address must come from a DLPack producer in this wasm module (such as `toDLPack`)
    /// and be handed over exactly once; anything else is undefined behaviour, as in C.
    #[wasm_bindgen(js_name = fromDLPack)]
    pub fn from_dlpack(address: u32, legacy: Option<bool>) -> Result<Tensor, JsError> {
        let ptr = address as usize as *mut core::ffi::c_void;
        // SAFETY: the caller hands over an owned DLPack tensor of this module (documented); a
        // NULL address is refused by the importer.
        let m = unsafe {
            if legacy.unwrap_or(false) {
                ManagedTensor::from_raw_legacy(ptr.cast())
            } else {
                ManagedTensor::from_raw_versioned(ptr.cast())
            }
        }
        .map_err(js_err)?;
        let inner = registry()?
            .from_dlpack(m, &ImportOptions::default())
            .map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// The bytes of a host tensor, in row-major order, as a new Uint8Array.
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsError> {
        let guard = self.inner.read().map_err(js_err)?;
        let view = guard.view();
        let mut out = vec![
            0u8;
            dlport_core::device::compact_bytes(view.dtype(), view.shape())
                .map_err(js_err)?
        ];
        dlport_core::device::copy_to_compact(&view, &mut out).map_err(js_err)?;
        Ok(out)
    }
}
