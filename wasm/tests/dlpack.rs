//! `Tensor.fromDLPack(address)` without a GPU, under Node (`wasm-pack test --node wasm`,
//! scripts/wasm-pack-test.sh): it takes back only addresses that `toDLPack` returned and that
//! were neither taken back nor released by their deleter, exactly once; everything else is a JS
//! `Error` naming the value. The same for a foreign `GPUBuffer`'s exports is in
//! dlpack_webgpu.rs (a browser).
#![cfg(target_arch = "wasm32")]

mod support;

use dlport_wasm::js::{Tensor, live_exports};
use support::{consumer_releases_legacy, consumer_releases_versioned, host_tensor, refused};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

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
fn an_export_released_by_its_consumer_cannot_be_taken_back() {
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
}
