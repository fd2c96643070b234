//! `Tensor.fromDLPack(address)` in the browser (scripts/test.sh's `browser` step: `cargo test
//! --target wasm32-unknown-unknown` with wasm-bindgen-test-runner and ChromeDriver): it takes
//! back only addresses that `toDLPack` returned and that were neither taken back nor released
//! by their deleter, exactly once; everything else is a JS `Error` naming the value.
#![cfg(target_arch = "wasm32")]

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned};
use dlport_wasm::js::{Tensor, init, live_exports};
use js_sys::{Function, Object, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// The message of the JS `Error` a call threw (and that it is one).
fn message(v: JsValue) -> String {
    assert!(v.is_instance_of::<js_sys::Error>(), "a JS Error: {v:?}");
    Reflect::get(&v, &"message".into())
        .unwrap()
        .as_string()
        .unwrap()
}

fn refused(address: JsValue, legacy: Option<bool>) -> String {
    message(
        Tensor::from_dlpack(address, legacy.map_or(JsValue::UNDEFINED, JsValue::from))
            .err()
            .expect("refused"),
    )
}

fn host_tensor() -> (Tensor, Vec<u8>) {
    let values: Vec<f32> = (0..6).map(|i| i as f32 - 1.5).collect();
    let shape: js_sys::Array = [2.0, 3.0].iter().map(|&x| JsValue::from(x)).collect();
    let t = Tensor::new(
        JsValue::from(js_sys::Float32Array::from(&values[..])),
        shape.into(),
        JsValue::UNDEFINED,
    )
    .unwrap();
    let bytes = t.to_bytes().unwrap();
    (t, bytes)
}

/// What a consumer in another module does when it is done: calls the export's deleter.
fn consumer_releases_versioned(address: u32) {
    let p = std::ptr::with_exposed_provenance_mut::<DLManagedTensorVersioned>(address as usize);
    // SAFETY: `address` is a live versioned export that this test owns and hands over once.
    unsafe { ((*p).deleter.expect("a deleter"))(p) };
}

/// As [`consumer_releases_versioned`], for a legacy export.
fn consumer_releases_legacy(address: u32) {
    let p = std::ptr::with_exposed_provenance_mut::<DLManagedTensor>(address as usize);
    // SAFETY: as above.
    unsafe { ((*p).deleter.expect("a deleter"))(p) };
}

#[wasm_bindgen_test]
fn addresses_that_are_not_numbers_or_not_integers_are_errors() {
    let (t, _) = host_tensor();
    let before = live_exports();
    let address = t.to_dlpack(JsValue::UNDEFINED).unwrap();
    assert_eq!(live_exports(), before + 1);
    let not_address =
        "is not an address (an integer from 1 to 2^32 - 1); pass what toDLPack() returned";
    for (value, shown) in [
        (0.0, "0".to_string()),
        (-8.0, "-8".into()),
        (1.5, "1.5".into()),
        (address as f64 + 0.5, format!("{address}.5")),
        (f64::NAN, "NaN".into()),
        (f64::INFINITY, "Infinity".into()),
        (4_294_967_296.0, "4294967296".into()),
    ] {
        let value = JsValue::from(value);
        assert_eq!(
            refused(value, None),
            format!("dlport: fromDLPack: address = {shown} {not_address}")
        );
    }
    assert_eq!(
        refused(JsValue::from_str(&address.to_string()), None),
        format!(
            "dlport: fromDLPack: address = \"{address}\" is not a number; pass what toDLPack() returned"
        )
    );
    assert_eq!(
        refused(JsValue::UNDEFINED, None),
        "dlport: fromDLPack: address = undefined is not a number; pass what toDLPack() returned"
    );
    assert_eq!(
        refused(JsValue::NULL, None),
        "dlport: fromDLPack: address = null is not a number; pass what toDLPack() returned"
    );
    // None of that touched the export: it is still there, once.
    assert_eq!(live_exports(), before + 1);
    Tensor::from_dlpack(address.into(), JsValue::UNDEFINED).unwrap();
    assert_eq!(live_exports(), before);
}

#[wasm_bindgen_test]
fn only_live_exports_are_taken_back_and_only_once() {
    let (t, bytes) = host_tensor();
    let before = live_exports();
    let address = t.to_dlpack(JsValue::UNDEFINED).unwrap();
    let live = |a: u32| {
        format!(
            "dlport: fromDLPack: address = {a} is not a live DLPack export of this module: it was never returned by toDLPack(), or was taken back already, or its deleter ran"
        )
    };
    // Numbers dlport never returned: inside the export, next to it, far away.
    for other in [address + 4, address - 8, 8, 12345, u32::MAX] {
        assert_eq!(refused(other.into(), None), live(other));
    }
    // The wrong form is refused and leaves the export in place.
    assert_eq!(
        refused(address.into(), Some(true)),
        format!(
            "dlport: fromDLPack: address = {address} is a DLManagedTensorVersioned (toDLPack()), not a legacy DLManagedTensor (legacy = true); pass legacy = false"
        )
    );
    assert_eq!(live_exports(), before + 1);
    let back = Tensor::from_dlpack(address.into(), false.into()).unwrap();
    assert_eq!(live_exports(), before);
    assert_eq!(
        back.to_bytes().unwrap(),
        bytes,
        "the same elements, no copy"
    );
    assert_eq!(back.dtype(), "float32");
    // Taken back: a second take-back is refused, even while the tensor lives.
    assert_eq!(refused(address.into(), None), live(address));
    drop(back);
    assert_eq!(refused(address.into(), None), live(address));

    // The legacy form round-trips the same way and is refused as versioned.
    let legacy = t.to_dlpack(true.into()).unwrap();
    assert_eq!(
        refused(legacy.into(), None),
        format!(
            "dlport: fromDLPack: address = {legacy} is a legacy DLManagedTensor (toDLPack(true)), not a DLManagedTensorVersioned; pass legacy = true"
        )
    );
    let back = Tensor::from_dlpack(legacy.into(), true.into()).unwrap();
    assert_eq!(back.to_bytes().unwrap(), bytes);
    assert_eq!(refused(legacy.into(), Some(true)), live(legacy));
    assert_eq!(live_exports(), before);
}

#[wasm_bindgen_test]
async fn an_export_released_by_its_consumer_cannot_be_taken_back() {
    init().await.unwrap();
    let (t, _) = host_tensor();
    let before = live_exports();
    let versioned = t.to_dlpack(JsValue::UNDEFINED).unwrap();
    let legacy = t.to_dlpack(true.into()).unwrap();
    assert_eq!(live_exports(), before + 2);
    consumer_releases_versioned(versioned);
    consumer_releases_legacy(legacy);
    assert_eq!(live_exports(), before, "the deleters dropped their records");
    for (address, legacy) in [(versioned, false), (legacy, true)] {
        assert!(
            refused(address.into(), Some(legacy)).contains("is not a live DLPack export"),
            "{address}"
        );
    }

    // A foreign GPUBuffer's onRelease runs once, when the consumer releases the last export.
    let dev = dlport_wasm::js::device().unwrap();
    let buffer = Function::new_with_args(
        "d",
        "return d.createBuffer({size: 64, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC});",
    )
    .call1(&JsValue::NULL, &dev)
    .unwrap();
    let counter = Object::new();
    let released = || {
        Reflect::get(&counter, &"n".into())
            .unwrap()
            .as_f64()
            .unwrap_or(0.0)
    };
    let options = Function::new_with_args(
        "c",
        "return { shape: [16], onRelease: () => { c.n = (c.n || 0) + 1; } };",
    )
    .call1(&JsValue::NULL, &counter)
    .unwrap();
    let g = Tensor::from_gpu_buffer(buffer, options).unwrap();
    let versioned = g.to_dlpack(JsValue::UNDEFINED).unwrap();
    let legacy = g.to_dlpack(true.into()).unwrap();
    drop(g);
    assert_eq!(released(), 0.0, "the exports hold the buffer");
    consumer_releases_legacy(legacy);
    assert_eq!(released(), 0.0, "one export still holds it");
    consumer_releases_versioned(versioned);
    assert_eq!(released(), 1.0, "released once, by the last consumer");
    assert!(refused(versioned.into(), None).contains("is not a live DLPack export"));
    assert_eq!(released(), 1.0);
    assert_eq!(live_exports(), before);
}
