//! The npm package's JS API without a GPU, under Node (`wasm-pack test --node wasm`,
//! scripts/wasm-pack-test.sh): tensors from typed arrays, their shape, strides, dtype and
//! device, `toArray()` per dtype, DLPack round trips of host tensors, and the refusals that name
//! the value (extents that are not integers or past JavaScript's safe range, a shape that does
//! not match the data, an unknown device). The WebGPU half of the API is in web.rs (a browser).
#![cfg(target_arch = "wasm32")]

mod support;

use dlport_wasm::js::Tensor;
use support::{extents, message, numbers};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

/// `new Tensor(Float32Array(n), shape)`'s refusal.
fn shape_refused(n: u32, shape: &[f64]) -> String {
    message(
        Tensor::new(
            JsValue::from(js_sys::Float32Array::new_with_length(n)),
            JsValue::from(extents(shape)),
            JsValue::UNDEFINED,
        )
        .err()
        .expect("refused"),
    )
}

#[wasm_bindgen_test]
fn tensors_from_typed_arrays() {
    let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let t = Tensor::new(
        JsValue::from(js_sys::Float32Array::from(&values[..])),
        JsValue::from(extents(&[3.0, 4.0])),
        JsValue::UNDEFINED,
    )
    .unwrap();
    assert_eq!(numbers(t.shape()), vec![3.0, 4.0]);
    assert_eq!(numbers(t.strides()), vec![4.0, 1.0]);
    assert_eq!(t.dtype(), "float32");
    assert_eq!(t.device(), "cpu");
    // toArray(): the typed array of the dtype, with the tensor's own elements.
    let arr = t.to_array().unwrap();
    assert!(arr.is_instance_of::<js_sys::Float32Array>());
    assert_eq!(js_sys::Float32Array::from(arr).to_vec(), values);

    let ints = Tensor::new(
        JsValue::from(js_sys::BigInt64Array::from(&[1i64 << 40, -3][..])),
        JsValue::UNDEFINED,
        JsValue::UNDEFINED,
    )
    .unwrap();
    assert_eq!(numbers(ints.shape()), vec![2.0], "one axis by default");
    assert_eq!(ints.dtype(), "int64");
    let arr = ints.to_array().unwrap();
    assert!(arr.is_instance_of::<js_sys::BigInt64Array>());
    assert_eq!(
        js_sys::BigInt64Array::from(arr).to_vec(),
        vec![1i64 << 40, -3]
    );

    // bfloat16 over a Uint16Array of bits, read back as those bits.
    let bf = Tensor::new(
        JsValue::from(js_sys::Uint16Array::from(&[0x3f80u16, 0xc000][..])),
        JsValue::UNDEFINED,
        "bfloat16".into(),
    )
    .unwrap();
    assert_eq!(bf.dtype(), "bfloat16");
    let arr = bf.to_array().unwrap();
    assert!(arr.is_instance_of::<js_sys::Uint16Array>());
    assert_eq!(
        js_sys::Uint16Array::from(arr).to_vec(),
        vec![0x3f80, 0xc000]
    );
}

#[wasm_bindgen_test]
fn host_tensors_go_out_and_come_back_through_dlpack_without_a_copy() {
    let t = Tensor::new(
        JsValue::from(js_sys::Int32Array::from(&[1, -2, 3, -4, 5, -6][..])),
        JsValue::from(extents(&[2.0, 3.0])),
        JsValue::UNDEFINED,
    )
    .unwrap();
    let bytes = t.to_bytes().unwrap();
    let address = t.to_dlpack(JsValue::UNDEFINED).unwrap();
    let back = Tensor::from_dlpack(address.into(), JsValue::UNDEFINED).unwrap();
    assert_eq!(back.device(), "cpu");
    assert_eq!(back.dtype(), "int32");
    assert_eq!(numbers(back.shape()), vec![2.0, 3.0]);
    assert_eq!(back.to_bytes().unwrap(), bytes);
}

#[wasm_bindgen_test]
fn refusals_name_the_value() {
    assert_eq!(
        shape_refused(4, &[2.0, 1.5]),
        "dlport: new Tensor: shape[1] = 1.5 is not an integer"
    );
    // An integer past 2^53 is one: the error says it is past the safe range.
    assert_eq!(
        shape_refused(4, &[2.0, 9007199254740992.0]),
        "dlport: new Tensor: shape[1] = 9007199254740992 is past JavaScript's safe integer \
         range (magnitude below 2^53 = 9007199254740992); give a smaller extent"
    );
    // A shape that does not match the data.
    let e = shape_refused(5, &[2.0, 3.0]);
    assert!(e.starts_with("dlport: new Tensor: "), "{e}");
    let t = Tensor::new(
        JsValue::from(js_sys::Float32Array::new_with_length(4)),
        JsValue::UNDEFINED,
        JsValue::UNDEFINED,
    )
    .unwrap();
    let e = message(t.to_device("metal".into()).err().expect("refused"));
    assert!(e.contains("metal"), "{e}");
    assert_eq!(
        message(
            Tensor::from_dlpack(0.into(), JsValue::UNDEFINED)
                .err()
                .expect("refused")
        ),
        "dlport: fromDLPack: address = 0 is not an address (an integer from 1 to 2^32 - 1); \
         pass what toDLPack() returned"
    );
}
