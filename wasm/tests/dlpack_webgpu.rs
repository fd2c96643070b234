//! `toDLPack` of a foreign `GPUBuffer` in the browser (`wasm-pack test --headless --chrome
//! wasm`; scripts/test.sh's `browser` step): the buffer's `onRelease` runs once, when the
//! consumer releases the last export, and a released export cannot be taken back.
#![cfg(target_arch = "wasm32")]

mod support;

use dlport_wasm::js::{Tensor, init, live_exports};
use js_sys::{Function, Object, Reflect};
use support::{consumer_releases_legacy, consumer_releases_versioned, refused};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn a_foreign_buffer_is_released_once_by_the_last_consumer() {
    init().await.unwrap();
    let before = live_exports();
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
