//! Typed arrays in and out: `new Tensor(array, shape?, dtype?)`, `toBytes()` and `toArray()`.

use dlport_core::backend::{Backend, CpuBackend, compact_bytes};
use dlport_core::{DataType, Device, ExportBuilder};
use wasm_bindgen::prelude::*;

use super::args::{self, refuse};
use super::{Tensor, js_err};

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

/// The dtype of a typed array's elements, by its `Symbol.toStringTag` (a subclass has its
/// base's).
fn natural_dtype(name: &str) -> Option<DataType> {
    Some(match name {
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
        _ => return None,
    })
}

const NEW: &str = "new Tensor";

#[wasm_bindgen]
impl Tensor {
    /// Copies a typed array into wasm memory as a compact tensor of `shape` (default: 1-d, all
    /// the elements); the shape covers exactly the array's bytes. `dtype` overrides the
    /// element type ("bfloat16" over a Uint16Array, say). Every argument is read before
    /// anything is allocated, and any bad one (a detached buffer, a throwing getter, a Proxy,
    /// more than 64 axes) is an `Error` naming it.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "TensorData")] array: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string")] dtype: JsValue,
    ) -> Result<Tensor, JsValue> {
        // The caller's code (getters, traps) runs while dtype and shape are read; the array is
        // read after them, through the engine's own getters, and copied at once, so nothing
        // can detach or shrink it in between.
        let dtype = args::name(NEW, "dtype", &dtype, true)?;
        let given = !(shape.is_undefined() || shape.is_null());
        let shape = if given {
            Some(args::extents(NEW, "shape", &shape)?)
        } else {
            None
        };
        let array = args::typed_array(NEW, &array)?;
        let dtype = match dtype {
            Some(name) => name
                .parse::<DataType>()
                .map_err(|e| refuse(NEW, format_args!("dtype = {name:?}: {e}")))?,
            None => natural_dtype(&array.name).ok_or_else(|| {
                refuse(
                    NEW,
                    format_args!("a {} has no dtype dlport knows", array.name),
                )
            })?,
        };
        let shape = shape.unwrap_or_else(|| {
            let bits = u64::from(dtype.storage_bits(false).max(1));
            vec![i64::try_from(array.byte_length * 8 / bits).unwrap_or(i64::MAX)]
        });
        // The sizes agree before a byte is copied.
        let needed = compact_bytes(dtype, &shape).map_err(|e| refuse(NEW, e))?;
        if needed as u64 != array.byte_length && !given {
            return Err(refuse(
                NEW,
                format_args!(
                    "the array's {} bytes are not a whole number of {dtype} elements; pass a shape",
                    array.byte_length
                ),
            ));
        }
        if needed as u64 != array.byte_length {
            return Err(refuse(
                NEW,
                format_args!(
                    "shape {shape:?} of {dtype} covers {needed} bytes, and the array has {} (its byteLength); give a shape of exactly the array's elements",
                    array.byte_length
                ),
            ));
        }
        let bytes = args::copy_in(NEW, &array)?;
        let m = ExportBuilder::new(bytes, dtype, &shape)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::cpu()).map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// The bytes of a host tensor, in row-major order, as a new Uint8Array.
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsError> {
        let guard = self.inner.view().map_err(js_err)?;
        let view = guard.tensor_ref();
        let mut out = vec![0u8; compact_bytes(view.dtype(), view.shape()).map_err(js_err)?];
        view.copy_to_compact(&mut out).map_err(js_err)?;
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
