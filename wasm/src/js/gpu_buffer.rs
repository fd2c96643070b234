//! `Tensor.fromGpuBuffer`: someone else's `GPUBuffer` (TF.js, onnxruntime-web) as a WebGPU
//! tensor, without a copy, with the owner's release callback as its deleter.

use dlport_core::DataType;
use dlport_core::Tensor as CoreTensor;
use dlport_core::backend::Buffer;
use wasm_bindgen::prelude::*;

use super::{Tensor, backend, extents_of, shown};
use crate::gpu::NAME as WEBGPU;

#[wasm_bindgen(typescript_custom_section)]
const TS_GPU_BUFFER: &'static str = r#"
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

/// What `fromGpuBuffer` reads from its arguments, checked.
struct Checked {
    size: u64,
    dtype: DataType,
    shape: Vec<i64>,
    byte_offset: u64,
}

fn get(o: &JsValue, key: &str) -> Option<JsValue> {
    js_sys::Reflect::get(o, &key.into()).ok()
}

/// Checks the buffer and the options; the message names the field and the value.
fn check(buffer: &JsValue, options: &JsValue) -> Result<Checked, String> {
    let size = get(buffer, "size").and_then(|v| v.as_f64());
    let usage = get(buffer, "usage").and_then(|v| v.as_f64());
    let (Some(size), Some(usage)) = (size, usage) else {
        return Err(format!(
            "expected a GPUBuffer, got {}",
            buffer.js_typeof().as_string().unwrap_or_default()
        ));
    };
    if (usage as u32) & USAGE_NEEDED != USAGE_NEEDED {
        return Err(format!(
            "the buffer's usage is {:#x}; dlport needs STORAGE | COPY_SRC (0x84) to read it",
            usage as u32
        ));
    }
    if let Some(state) = get(buffer, "mapState").and_then(|v| v.as_string()) {
        if state != "unmapped" {
            return Err(format!(
                "the buffer is {state}; unmap it before handing it over"
            ));
        }
    }
    let dtype = match get(options, "dtype").and_then(|v| v.as_string()) {
        Some(name) => name.parse::<DataType>().map_err(|e| e.to_string())?,
        None => DataType::FLOAT32,
    };
    let Some(shape) = get(options, "shape").filter(js_sys::Array::is_array) else {
        return Err("options.shape must be an array of extents".into());
    };
    let shape = extents_of(&js_sys::Array::from(&shape), "shape")?;
    let offset_value = get(options, "byteOffset").filter(|v| !v.is_undefined());
    let offset = offset_value
        .as_ref()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .unwrap_or(0.0);
    if !(offset.is_finite() && offset.fract() == 0.0 && offset >= 0.0) {
        let value = offset_value.as_ref().map(shown).unwrap_or_default();
        return Err(format!(
            "byteOffset = {value} is not a non-negative integer"
        ));
    }
    Ok(Checked {
        size: size as u64,
        dtype,
        shape,
        byte_offset: offset as u64,
    })
}

#[wasm_bindgen]
impl Tensor {
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
        let checked = check(&buffer, &options).and_then(|c| {
            let b = backend().map_err(|_| "call `await init()` first".to_string())?;
            Ok((b, c))
        });
        let (b, c) = match checked {
            Ok(v) => v,
            Err(message) => {
                release();
                return Err(JsError::new(&format!("dlport: fromGpuBuffer: {message}")));
            }
        };
        let storage =
            b.gpu()
                .adopt_webgpu(buffer.unchecked_into(), c.size, Some(Box::new(release)));
        // A refusal here drops the storage, which runs onRelease.
        let inner = CoreTensor::new(
            Buffer::new(Box::new(storage)),
            WEBGPU,
            c.dtype,
            &c.shape,
            None,
            c.byte_offset,
            0,
        )
        .map_err(|e| JsError::new(&format!("dlport: fromGpuBuffer: {e}")))?;
        Ok(Tensor { inner })
    }
}
