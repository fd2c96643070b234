//! The JavaScript API (wasm32 only; generated TypeScript types come with wasm-bindgen).
//!
//! The npm package `dlport`: `init()` opens the one shared WebGPU device, `device()` returns
//! its `GPUDevice` (hand it to TF.js and onnxruntime-web), and `Tensor` wraps typed arrays
//! (kDLCPU in wasm memory), dlport's own WebGPU buffers and foreign `GPUBuffer`s
//! (`Tensor.fromGpuBuffer`, released through the owner's callback), with `toDevice("webgpu")`,
//! `toHost()` (a Promise), `gpuBuffer`, `normalize()` (a WGSL kernel), DLPack export and import
//! within the wasm heap, and getters for shape, strides, dtype and device. Errors are JS
//! `Error`s carrying dlport's message.

use std::cell::RefCell;

use dlport_core::Tensor as CoreTensor;
use dlport_core::backend::{Backend, CpuBackend};
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor, RawManaged};
use dlport_core::{ExportOptions, ImportOptions, Registry};
use wasm_bindgen::prelude::*;

use crate::WebGpuBackend;
use crate::gpu::{NAME as WEBGPU, Normalize};

#[wasm_bindgen(typescript_custom_section)]
const TS_OPTIONS: &'static str = r#"
/** The typed arrays a `Tensor` is made from; the dtype follows the array (`Float32Array` →
 *  "float32", `BigInt64Array` → "int64", `Uint8Array` → "uint8", …). */
export type TensorData =
  | Float32Array | Float64Array
  | Int8Array | Int16Array | Int32Array | BigInt64Array
  | Uint8Array | Uint8ClampedArray | Uint16Array | Uint32Array | BigUint64Array;

/** What `toArray()` returns, by dtype: float32 → Float32Array, float64 → Float64Array,
 *  int8/int16/int32 → Int8Array/Int16Array/Int32Array, int64 → BigInt64Array, uint8 and bool →
 *  Uint8Array, uint16 → Uint16Array, uint32 → Uint32Array, uint64 → BigUint64Array, float16
 *  and bfloat16 → Uint16Array of the raw bits, complex64/complex128 → Float32Array/Float64Array
 *  of interleaved (re, im) pairs. Other dtypes (float8, sub-byte): use `toBytes()`. */
export type TensorArray =
  | Float32Array | Float64Array
  | Int8Array | Int16Array | Int32Array | BigInt64Array
  | Uint8Array | Uint16Array | Uint32Array | BigUint64Array;

/** Options of `Tensor.fromGpuBuffer`. */
export interface GpuBufferOptions {
  /** The element type, "float32" by default. */
  dtype?: string;
  /** Extents; the tensor is compact (row-major). */
  shape: number[];
  /** Bytes from the buffer's start to the first element (default 0). */
  byteOffset?: number;
  /** Called exactly once when dlport's last reference goes (also when the call fails):
   *  ORT's `tensor.dispose()`, TF.js's `tensorRef.dispose()`. */
  onRelease?: () => void;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str, error: &JsValue);
}

/// `GPUBufferUsage.COPY_SRC | GPUBufferUsage.STORAGE`.
const USAGE_NEEDED: u32 = 0x04 | 0x80;

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
    /// Copies a typed array into wasm memory as a compact tensor of `shape` (default: 1-d, all
    /// the elements). `dtype` overrides the element type ("bfloat16" over a Uint16Array, say).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "TensorData")] array: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number[]")] shape: Option<js_sys::Array>,
        #[wasm_bindgen(unchecked_optional_param_type = "string")] dtype: Option<String>,
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
        let shape = match shape {
            None => vec![numel],
            Some(extents) => extents_of(&extents, "new Tensor: shape")?,
        };
        let m = ExportBuilder::new(bytes, dtype, &shape)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::CPU).map_err(js_err)?;
        Ok(Tensor { inner })
    }

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
                let guard = self.inner.view().map_err(js_err)?;
                let t = b.gpu().upload(&guard, 0).map_err(js_err)?;
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
            let view = self.inner.view().map_err(js_err)?;
            b.gpu().download(&view).await.map_err(js_err)?
        };
        let m = ExportBuilder::new(bytes, self.inner.dtype(), self.inner.shape())
            .copied(true)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::CPU).map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// The `GPUBuffer` behind a WebGPU tensor (its data starts at `byteOffset`): dlport's own,
    /// or the foreign buffer a `fromGpuBuffer` tensor wraps.
    #[wasm_bindgen(getter, js_name = gpuBuffer, unchecked_return_type = "GPUBuffer")]
    pub fn gpu_buffer(&self) -> Result<JsValue, JsError> {
        let b = backend()?;
        if self.inner.device() != Device::webgpu(0) {
            return Err(JsError::new(&format!(
                "dlport: this tensor is on {}, not in a WebGPU buffer; call toDevice(\"webgpu\")",
                self.inner.device()
            )));
        }
        let buffer = b
            .gpu()
            .js_buffer(self.inner.buffer().ptr() as usize)
            .ok_or_else(|| JsError::new("dlport: the tensor's WebGPU buffer was released"))?;
        Ok(JsValue::from(buffer))
    }

    /// Wraps a `GPUBuffer` made by someone else on `dlport.device()` (TF.js's `dataToGPU()`,
    /// an ORT output with `preferredOutputLocation: "gpu-buffer"`) as a compact WebGPU tensor,
    /// without a copy. `onRelease` is its deleter: it runs exactly once, when `free()` (or the
    /// last DLPack export) lets go, and also when this call throws, since ownership passed at
    /// the call. The buffer needs `STORAGE | COPY_SRC` usage and must not be mapped.
    #[wasm_bindgen(js_name = fromGpuBuffer)]
    pub fn from_gpu_buffer(
        #[wasm_bindgen(unchecked_param_type = "GPUBuffer")] buffer: JsValue,
        #[wasm_bindgen(unchecked_param_type = "GpuBufferOptions")] options: JsValue,
    ) -> Result<Tensor, JsError> {
        let get = |o: &JsValue, key: &str| js_sys::Reflect::get(o, &key.into()).ok();
        let on_release = match get(&options, "onRelease").filter(|v| !v.is_undefined()) {
            None => None,
            Some(f) => Some(f.dyn_into::<js_sys::Function>().map_err(|v| {
                JsError::new(&format!(
                    "dlport: fromGpuBuffer: onRelease must be a function, got {}",
                    v.js_typeof().as_string().unwrap_or_default()
                ))
            })?),
        };
        // From here on the buffer is ours: every refusal runs onRelease once.
        let release = move || {
            if let Some(f) = &on_release {
                if let Err(e) = f.call0(&JsValue::NULL) {
                    console_error("dlport: a fromGpuBuffer onRelease callback threw:", &e);
                }
            }
        };
        let checked = (|| {
            let size = get(&buffer, "size").and_then(|v| v.as_f64());
            let usage = get(&buffer, "usage").and_then(|v| v.as_f64());
            let (Some(size), Some(usage)) = (size, usage) else {
                return Err(format!(
                    "fromGpuBuffer: expected a GPUBuffer, got {}",
                    buffer.js_typeof().as_string().unwrap_or_default()
                ));
            };
            if (usage as u32) & USAGE_NEEDED != USAGE_NEEDED {
                return Err(format!(
                    "fromGpuBuffer: the buffer's usage is {:#x}; dlport needs STORAGE | COPY_SRC (0x84) to read it",
                    usage as u32
                ));
            }
            if let Some(state) = get(&buffer, "mapState").and_then(|v| v.as_string()) {
                if state != "unmapped" {
                    return Err(format!(
                        "fromGpuBuffer: the buffer is {state}; unmap it before handing it over"
                    ));
                }
            }
            let dtype = match get(&options, "dtype").and_then(|v| v.as_string()) {
                Some(name) => name.parse::<DataType>().map_err(|e| e.to_string())?,
                None => DataType::FLOAT32,
            };
            let shape_value = get(&options, "shape").filter(js_sys::Array::is_array);
            let Some(shape_value) = shape_value else {
                return Err("fromGpuBuffer: options.shape must be an array of extents".into());
            };
            let mut shape = Vec::new();
            for (k, v) in js_sys::Array::from(&shape_value).iter().enumerate() {
                let x = v.as_f64().unwrap_or(f64::NAN);
                if !(x.is_finite() && x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15) {
                    let shown = v
                        .as_f64()
                        .map_or_else(|| format!("{v:?}"), |x| x.to_string());
                    return Err(format!(
                        "fromGpuBuffer: shape[{k}] = {shown} is not an integer"
                    ));
                }
                shape.push(x as i64);
            }
            let offset_value = get(&options, "byteOffset").filter(|v| !v.is_undefined());
            let offset = offset_value
                .as_ref()
                .map(|v| v.as_f64().unwrap_or(f64::NAN))
                .unwrap_or(0.0);
            if !(offset.is_finite() && offset.fract() == 0.0 && offset >= 0.0) {
                let shown = offset_value
                    .and_then(|v| js_sys::JSON::stringify(&v).ok())
                    .and_then(|s| s.as_string())
                    .unwrap_or_default();
                return Err(format!(
                    "fromGpuBuffer: byteOffset = {shown} is not a non-negative integer"
                ));
            }
            let b = backend().map_err(|_| "call `await init()` first".to_string())?;
            Ok((b, size as u64, dtype, shape, offset as u64))
        })();
        let (b, size, dtype, shape, offset) = match checked {
            Ok(v) => v,
            Err(message) => {
                release();
                return Err(JsError::new(&format!("dlport: {message}")));
            }
        };
        let storage = b
            .gpu()
            .adopt_webgpu(buffer.unchecked_into(), size, Some(Box::new(release)));
        // A refusal here drops the storage, which runs onRelease.
        let inner = CoreTensor::new(
            dlport_core::backend::Buffer::new(Box::new(storage)),
            WEBGPU,
            dtype,
            &shape,
            None,
            offset,
            0,
        )
        .map_err(|e| JsError::new(&format!("dlport: fromGpuBuffer: {e}")))?;
        Ok(Tensor { inner })
    }

    /// Normalizes on the GPU with a dlport WGSL kernel: `(x · scale − mean[c]) / std[c]`, `c`
    /// the index along the last axis, into a new float32 WebGPU tensor. Reads float32, int32,
    /// uint32 and uint8 tensors; `mean` and `std` hold one value or one per channel.
    pub fn normalize(
        &self,
        mean: Vec<f32>,
        std: Vec<f32>,
        scale: Option<f32>,
    ) -> Result<Tensor, JsError> {
        let b = backend()?;
        let guard = self.inner.view().map_err(js_err)?;
        let inner = b
            .gpu()
            .normalize(
                &guard,
                &Normalize {
                    mean: &mean,
                    std: &std,
                    scale: scale.unwrap_or(1.0),
                },
            )
            .map_err(|e| JsError::new(&format!("dlport: normalize: {e}")))?;
        Ok(Tensor { inner })
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
        let view = self.inner.view().map_err(js_err)?;
        let mut out = vec![
            0u8;
            dlport_core::backend::compact_bytes(view.dtype(), view.shape())
                .map_err(js_err)?
        ];
        dlport_core::backend::copy_to_compact(&view, &mut out).map_err(js_err)?;
        Ok(out)
    }

    /// The elements of a host tensor, row-major, in a new typed array of the dtype's kind (see
    /// `TensorArray`). A WebGPU tensor must be read back first: `await t.toHost()`.
    #[wasm_bindgen(js_name = toArray, unchecked_return_type = "TensorArray")]
    pub fn to_array(&self) -> Result<JsValue, JsError> {
        let dtype = self.inner.dtype();
        if !self.inner.device().is_host_accessible() {
            return Err(JsError::new(&format!(
                "dlport: toArray() reads host tensors, and this one is on {}: call `await tensor.toHost()` first",
                self.inner.device()
            )));
        }
        let bytes = self.to_bytes()?;
        // A fresh ArrayBuffer (offset 0), so every element type is aligned.
        let buffer = js_sys::Uint8Array::from(bytes.as_slice()).buffer();
        let len = |width: usize| (bytes.len() / width) as u32;
        let array: JsValue = match dtype {
            DataType::FLOAT32 | DataType::COMPLEX64 => {
                js_sys::Float32Array::new_with_byte_offset_and_length(&buffer, 0, len(4)).into()
            }
            DataType::FLOAT64 | DataType::COMPLEX128 => {
                js_sys::Float64Array::new_with_byte_offset_and_length(&buffer, 0, len(8)).into()
            }
            DataType::INT8 => {
                js_sys::Int8Array::new_with_byte_offset_and_length(&buffer, 0, len(1)).into()
            }
            DataType::INT16 => {
                js_sys::Int16Array::new_with_byte_offset_and_length(&buffer, 0, len(2)).into()
            }
            DataType::INT32 => {
                js_sys::Int32Array::new_with_byte_offset_and_length(&buffer, 0, len(4)).into()
            }
            DataType::INT64 => {
                js_sys::BigInt64Array::new_with_byte_offset_and_length(&buffer, 0, len(8)).into()
            }
            DataType::UINT8 | DataType::BOOL => js_sys::Uint8Array::new(&buffer).into(),
            DataType::UINT16 | DataType::FLOAT16 | DataType::BFLOAT16 => {
                js_sys::Uint16Array::new_with_byte_offset_and_length(&buffer, 0, len(2)).into()
            }
            DataType::UINT32 => {
                js_sys::Uint32Array::new_with_byte_offset_and_length(&buffer, 0, len(4)).into()
            }
            DataType::UINT64 => {
                js_sys::BigUint64Array::new_with_byte_offset_and_length(&buffer, 0, len(8)).into()
            }
            other => {
                return Err(JsError::new(&format!(
                    "dlport: toArray(): JavaScript has no typed array for {other}; use toBytes()"
                )));
            }
        };
        Ok(array)
    }
}

/// Extents or strides as a JS array of numbers.
fn numbers(values: &[i64]) -> js_sys::Array {
    values
        .iter()
        .map(|&x| JsValue::from_f64(x as f64))
        .collect()
}

/// Reads a JS array of extents: each an integer below 2^53 (the message names the index).
fn extents_of(values: &js_sys::Array, what: &str) -> Result<Vec<i64>, JsError> {
    let mut out = Vec::with_capacity(values.length() as usize);
    for (k, v) in values.iter().enumerate() {
        match v.as_f64() {
            Some(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 => {
                out.push(x as i64)
            }
            _ => {
                let shown = v
                    .as_f64()
                    .map_or_else(|| format!("{v:?}"), |x| x.to_string());
                return Err(JsError::new(&format!(
                    "dlport: {what}[{k}] = {shown} is not an integer"
                )));
            }
        }
    }
    Ok(out)
}
