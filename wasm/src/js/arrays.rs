//! Typed arrays in and out: `new Tensor(array, shape?, dtype?)`, `toBytes()` and `toArray()`.

use dlport_core::backend::{Backend, CpuBackend, compact_bytes, copy_to_compact};
use dlport_core::{DataType, Device, ExportBuilder};
use wasm_bindgen::prelude::*;

use super::{Tensor, extents_of, js_err};

#[wasm_bindgen(typescript_custom_section)]
const TS_ARRAYS: &'static str = r#"
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
"#;

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
            Some(extents) => extents_of(&extents, "new Tensor: shape")
                .map_err(|message| JsError::new(&format!("dlport: {message}")))?,
        };
        let m = ExportBuilder::new(bytes, dtype, &shape)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::cpu()).map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// The bytes of a host tensor, in row-major order, as a new Uint8Array.
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsError> {
        let view = self.inner.view().map_err(js_err)?;
        let mut out = vec![0u8; compact_bytes(view.dtype(), view.shape()).map_err(js_err)?];
        copy_to_compact(&view, &mut out).map_err(js_err)?;
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
