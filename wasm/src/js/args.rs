//! What JavaScript callers pass, read through `js/args.js` before it is used.
//!
//! A JS exception that unwinds through wasm frames abandons them: Rust destructors never run,
//! the shadow-stack pointer is never restored, borrows stay taken. So no caller-controlled
//! value is touched by a plain import here. Each is read by a reader in `js/args.js`, imported
//! with `catch`, which hands back plain data (numbers, strings, typed arrays it made) or a
//! dlport `Error` naming the argument or field (as a value, `[error]`, not thrown); that error
//! is the call's refusal. Counts
//! (axes, values, bytes) are checked against their limits before anything is reserved.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/js/args.js")]
extern "C" {
    #[wasm_bindgen(js_name = dlportShow)]
    fn js_show(value: &JsValue) -> String;
    #[wasm_bindgen(js_name = dlportTypedArray, catch)]
    fn js_typed_array(call: &str, array: &JsValue) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportCopyIn, catch)]
    fn js_copy_in(
        call: &str,
        bytes: &JsValue,
        memory: &JsValue,
        at: u32,
        length: u32,
    ) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportExtents, catch)]
    fn js_extents(call: &str, what: &str, value: &JsValue) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportNumbers, catch)]
    fn js_numbers(
        call: &str,
        what: &str,
        value: &JsValue,
        max: u32,
    ) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportName, catch)]
    fn js_name(
        call: &str,
        what: &str,
        value: &JsValue,
        optional: bool,
    ) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportOnRelease, catch)]
    fn js_on_release(call: &str, options: &JsValue) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportGpuBufferArgs, catch)]
    fn js_gpu_buffer_args(
        call: &str,
        buffer: &JsValue,
        options: &JsValue,
    ) -> Result<js_sys::Array, JsValue>;
    #[wasm_bindgen(js_name = dlportGuardTensor, catch)]
    fn js_guard_tensor(instance: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(js_name = dlportRelease, catch)]
    fn js_release(callback: &JsValue) -> Result<(), JsValue>;
}

/// What a reader settled to: its result (`[undefined, result]`), or its refusal (`[error]`).
fn settled(outcome: Result<js_sys::Array, JsValue>) -> Result<JsValue, JsValue> {
    let pair = outcome?;
    let error = pair.get(0);
    if error.is_undefined() {
        Ok(pair.get(1))
    } else {
        Err(error)
    }
}

/// A refusal of `call`: a JS `Error` saying "dlport: {call}: {message}".
pub(super) fn refuse(call: &str, message: impl core::fmt::Display) -> JsValue {
    JsError::new(&format!("dlport: {call}: {message}")).into()
}

/// `value` as a message shows it (at most about 60 characters), without running any of the
/// caller's code.
pub(super) fn show(value: &JsValue) -> String {
    js_show(value)
}

/// A typed array's element type name (its `Symbol.toStringTag`, e.g. "Float32Array"), its
/// byte length, and a `Uint8Array` over its bytes, for [`copy_in`].
pub(super) struct TypedArray {
    pub name: String,
    pub byte_length: u64,
    bytes: JsValue,
}

/// Reads `array` as a typed array (refusing a detached buffer, a Proxy, anything else).
pub(super) fn typed_array(call: &str, array: &JsValue) -> Result<TypedArray, JsValue> {
    let parts: js_sys::Array = settled(js_typed_array(call, array))?.unchecked_into();
    Ok(TypedArray {
        name: parts.get(0).as_string().unwrap_or_default(),
        // An integer below 2^53: a typed array's byteLength.
        byte_length: parts.get(1).as_f64().unwrap_or(0.0) as u64,
        bytes: parts.get(2),
    })
}

/// Copies the array's bytes into a new vector: the allocation limit first, then a fallible
/// reservation, so a refused or impossible size grows nothing and traps nowhere.
pub(super) fn copy_in(call: &str, array: &TypedArray) -> Result<Vec<u8>, JsValue> {
    let len = array.byte_length;
    dlport_core::backend::check_alloc(u128::from(len), None).map_err(|e| refuse(call, e))?;
    let len =
        usize::try_from(len).map_err(|_| refuse(call, "the array is larger than wasm memory"))?;
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        refuse(
            call,
            format_args!("wasm memory cannot grow by the array's {len} bytes"),
        )
    })?;
    settled(js_copy_in(
        call,
        &array.bytes,
        &wasm_bindgen::memory(),
        out.as_mut_ptr().addr() as u32,
        len as u32,
    ))?;
    // SAFETY: `dlportCopyIn` succeeded, so it wrote exactly `len` bytes (it checks that its
    // view still has them) at the start of `out`'s reserved capacity of `len`; every byte
    // pattern is a valid u8.
    unsafe { out.set_len(len) };
    Ok(out)
}

/// Extents from a JS array (at most 64, each an integer of magnitude below 2^53).
pub(super) fn extents(call: &str, what: &str, value: &JsValue) -> Result<Vec<i64>, JsValue> {
    let values: js_sys::Float64Array = settled(js_extents(call, what, value))?.unchecked_into();
    Ok(values.to_vec().into_iter().map(|x| x as i64).collect())
}

/// At most `max` numbers from an array or a typed array, as f32.
pub(super) fn numbers(
    call: &str,
    what: &str,
    value: &JsValue,
    max: usize,
) -> Result<Vec<f32>, JsValue> {
    let values: js_sys::Float32Array =
        settled(js_numbers(call, what, value, max as u32))?.unchecked_into();
    Ok(values.to_vec())
}

/// A name (dtype, device) of at most 64 characters; `None` for undefined or null when
/// `optional`.
pub(super) fn name(
    call: &str,
    what: &str,
    value: &JsValue,
    optional: bool,
) -> Result<Option<String>, JsValue> {
    Ok(settled(js_name(call, what, value, optional))?.as_string())
}

/// A boolean flag: `false` when undefined or null, else it must be a boolean.
pub(super) fn flag(call: &str, what: &str, value: &JsValue) -> Result<bool, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(false);
    }
    value.as_bool().ok_or_else(|| {
        refuse(
            call,
            format_args!("{what} must be a boolean, got {}", show(value)),
        )
    })
}

/// An optional number: `None` when undefined or null, else it must be a number.
pub(super) fn number(call: &str, what: &str, value: &JsValue) -> Result<Option<f64>, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    value.as_f64().map(Some).ok_or_else(|| {
        refuse(
            call,
            format_args!("{what} must be a number, got {}", show(value)),
        )
    })
}

/// A release callback, owned from the moment it is read: dropping it calls it, once (a throw
/// is reported on the console). Moved into the tensor's storage, it runs when the last
/// reference goes; on every refusal before that, it runs as the refusal returns.
pub(super) struct Release(Option<JsValue>);

impl Release {
    /// Reads `options.onRelease` (before anything else of `options`).
    pub(super) fn read(call: &str, options: &JsValue) -> Result<Release, JsValue> {
        let f = settled(js_on_release(call, options))?;
        Ok(Release((!f.is_undefined()).then_some(f)))
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            // `dlportRelease` catches and reports what the callback throws; the `catch` here
            // covers a console that throws as well.
            let _ = js_release(&f);
        }
    }
}

/// What `Tensor.fromGpuBuffer` reads besides the callback, type-checked.
pub(super) struct GpuBufferArgs {
    pub size: u64,
    pub usage: u64,
    pub map_state: Option<String>,
    pub dtype: Option<String>,
    pub shape: Vec<i64>,
    pub byte_offset: u64,
}

/// Reads the buffer's `size`, `usage` and `mapState` and `options`' `dtype`, `shape` and
/// `byteOffset`, each guarded.
pub(super) fn gpu_buffer_args(
    call: &str,
    buffer: &JsValue,
    options: &JsValue,
) -> Result<GpuBufferArgs, JsValue> {
    let parts: js_sys::Array = settled(js_gpu_buffer_args(call, buffer, options))?.unchecked_into();
    let whole = |k: u32| parts.get(k).as_f64().unwrap_or(0.0) as u64;
    let shape: js_sys::Float64Array = parts.get(4).unchecked_into();
    Ok(GpuBufferArgs {
        size: whole(0),
        usage: whole(1),
        map_state: parts.get(2).as_string(),
        dtype: parts.get(3).as_string(),
        shape: shape.to_vec().into_iter().map(|x| x as i64).collect(),
        byte_offset: whole(5),
    })
}

/// Guards `Tensor.prototype` (through `instance`, any Tensor) with `dlportGuardTensor`.
pub(super) fn guard_tensor(instance: &JsValue) -> Result<(), JsValue> {
    js_guard_tensor(instance)
}
