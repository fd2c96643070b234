//! What the wasm32 test suites share: reading a JS `Error`'s message, the arrays the JS API
//! takes and returns, a small host tensor, and a consumer that calls an export's deleter. Each
//! suite is a test binary of its own and uses a part of this module.
#![allow(dead_code)]

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned};
use dlport_wasm::js::Tensor;
use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};

/// The message of the JS `Error` a call threw (and that it is one).
pub fn message(v: impl Into<JsValue>) -> String {
    let v = v.into();
    assert!(v.is_instance_of::<js_sys::Error>(), "a JS Error: {v:?}");
    Reflect::get(&v, &"message".into())
        .unwrap()
        .as_string()
        .unwrap()
}

/// The message of `Tensor.fromDLPack(address, legacy)`'s refusal.
pub fn refused(address: JsValue, legacy: Option<bool>) -> String {
    message(
        Tensor::from_dlpack(address, legacy.map_or(JsValue::UNDEFINED, JsValue::from))
            .err()
            .expect("refused"),
    )
}

/// A 2 × 3 float32 host tensor and its bytes.
pub fn host_tensor() -> (Tensor, Vec<u8>) {
    let values: Vec<f32> = (0..6).map(|i| i as f32 - 1.5).collect();
    let t = Tensor::new(
        JsValue::from(js_sys::Float32Array::from(&values[..])),
        extents(&[2.0, 3.0]).into(),
        JsValue::UNDEFINED,
    )
    .unwrap();
    let bytes = t.to_bytes().unwrap();
    (t, bytes)
}

/// What a consumer in another module does when it is done: calls the export's deleter.
pub fn consumer_releases_versioned(address: u32) {
    let p = std::ptr::with_exposed_provenance_mut::<DLManagedTensorVersioned>(address as usize);
    // SAFETY: `address` is a live versioned export that the test owns and hands over once.
    unsafe { ((*p).deleter.expect("a deleter"))(p) };
}

/// As [`consumer_releases_versioned`], for a legacy export.
pub fn consumer_releases_legacy(address: u32) {
    let p = std::ptr::with_exposed_provenance_mut::<DLManagedTensor>(address as usize);
    // SAFETY: as above.
    unsafe { ((*p).deleter.expect("a deleter"))(p) };
}

/// Extents as the JS array the API takes.
pub fn extents(values: &[f64]) -> js_sys::Array {
    values.iter().map(|&x| JsValue::from_f64(x)).collect()
}

/// A JS array of numbers (shape, strides) as a Vec.
pub fn numbers(values: js_sys::Array) -> Vec<f64> {
    values.iter().map(|v| v.as_f64().unwrap()).collect()
}
