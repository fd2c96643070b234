//! The WebGPU backend in the browser (`cargo test --target wasm32-unknown-unknown` with
//! wasm-bindgen-test-runner as the runner and ChromeDriver: scripts/test.sh's `browser` step):
//! the same behaviours as the native tests, on Chromium's WebGPU (SwiftShader, no GPU needed).
#![cfg(target_arch = "wasm32")]

mod support;

use dlport_core::{DataType, Device, ExportBuilder, ExportOptions, ImportOptions, Registry};
use dlport_wasm::WebGpuBackend;
use support::{extents, message, numbers};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 131 + (i >> 8) * 7 + 3) as u8).collect()
}

#[wasm_bindgen_test]
async fn round_trips_and_byte_offsets() {
    let b = WebGpuBackend::new().await.expect("a WebGPU adapter");
    for &bytes in &[4usize, 256, 65536, 4 << 20] {
        for dtype in [DataType::FLOAT32, DataType::UINT8, DataType::FLOAT16] {
            let n = bytes / dtype.size_bytes();
            let data = pattern(n * dtype.size_bytes());
            let host = ExportBuilder::new(data.clone(), dtype, &[n as i64])
                .build()
                .unwrap();
            let t = b.gpu().upload(&host.view(), 0).unwrap();
            let back = b
                .gpu()
                .download(&t.view().unwrap().tensor_ref())
                .await
                .unwrap();
            assert!(back == data, "{dtype} × {n}");
        }
    }
    for offset in [1u64, 3, 17] {
        let data = pattern(7);
        let host = ExportBuilder::new(data.clone(), DataType::UINT8, &[7])
            .build()
            .unwrap();
        let t = b.gpu().upload(&host.view(), offset).unwrap();
        assert_eq!(
            b.gpu()
                .download(&t.view().unwrap().tensor_ref())
                .await
                .unwrap(),
            data
        );
    }
}

#[wasm_bindgen_test]
async fn strided_compaction_on_the_gpu() {
    let b = WebGpuBackend::new().await.expect("a WebGPU adapter");
    let data = pattern(4096);
    let raw = ExportBuilder::new(data.clone(), DataType::UINT8, &[4096])
        .build()
        .unwrap();
    let whole = b.gpu().upload(&raw.view(), 0).unwrap();
    // One layout per compaction kernel: words (transposed f32, reversed f64), 2-byte, 1-byte,
    // a run at an odd offset, and byte by byte (rows of 12 bytes).
    let cases: &[(DataType, &[i64], &[i64], u64)] = &[
        (DataType::FLOAT32, &[8, 16], &[1, 8], 0),
        (DataType::FLOAT64, &[2, 4], &[-4, -1], 56),
        (DataType::FLOAT16, &[4, 8], &[1, 4], 2),
        (DataType::UINT8, &[3, 16], &[1, 3], 5),
        (DataType::UINT8, &[37], &[1], 3),
        (DataType::FLOAT32, &[5, 3], &[1, 5], 0),
    ];
    for &(dtype, shape, strides, offset) in cases {
        let dl = dlport_core::abi::DLTensor {
            data: whole.buffer().ptr(),
            device: Device::webgpu(0),
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_ptr() as *mut i64,
            strides: strides.as_ptr() as *mut i64,
            byte_offset: offset,
        };
        // SAFETY: device memory is never read through `data`; shape/strides outlive the view.
        let view = unsafe { dlport_core::TensorRef::from_raw(&dl, None, 0) }.unwrap();
        let got = b.gpu().download(&view).await.unwrap();
        let esize = dtype.size_bytes();
        let mut want = Vec::new();
        let mut index = vec![0i64; shape.len()];
        for _ in 0..shape.iter().product::<i64>() {
            let e: i64 = index.iter().zip(strides).map(|(i, s)| i * s).sum();
            let at = (offset as i64 + e * esize as i64) as usize;
            want.extend_from_slice(&data[at..at + esize]);
            for k in (0..shape.len()).rev() {
                index[k] += 1;
                if index[k] < shape[k] {
                    break;
                }
                index[k] = 0;
            }
        }
        assert_eq!(got, want, "{dtype} {shape:?} {strides:?} +{offset}");
    }
}

#[wasm_bindgen_test]
async fn dlpack_references_keep_the_buffer_and_release_once() {
    let b = WebGpuBackend::new().await.expect("a WebGPU adapter");
    let mut registry = Registry::with_cpu();
    registry.register(std::sync::Arc::new(b.clone())).unwrap();
    let before = b.gpu().live_buffers();
    let host = ExportBuilder::from_vec(vec![2.5f32; 64], &[64])
        .build()
        .unwrap();
    let t = b.gpu().upload(&host.view(), 0).unwrap();
    let exported = registry.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    let imported = registry
        .from_dlpack(exported, &ImportOptions::default())
        .unwrap();
    drop(t);
    assert_eq!(b.gpu().live_buffers(), before + 1);
    let back = b
        .gpu()
        .download(&imported.view().unwrap().tensor_ref())
        .await
        .unwrap();
    assert_eq!(back.len(), 256);
    drop(imported);
    assert_eq!(b.gpu().live_buffers(), before);
    // The JS objects behind ours are reachable for the JS layer.
    assert!(b.gpu().device().as_webgpu().is_some());
    let t = b.gpu().upload(&host.view(), 0).unwrap();
    let buffer = b.gpu().lookup(t.buffer().ptr() as usize).unwrap();
    assert!(
        buffer.as_webgpu().is_some(),
        "the GPUBuffer behind a tensor"
    );
}

#[wasm_bindgen_test]
async fn js_api_tensors_from_typed_arrays_to_webgpu_and_back() {
    use dlport_wasm::js::{Tensor, device, init};
    use wasm_bindgen::{JsCast, JsValue};
    init().await.unwrap();
    init().await.unwrap(); // idempotent
    let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let array = js_sys::Float32Array::from(&values[..]);
    let t = Tensor::new(
        JsValue::from(array),
        JsValue::from(extents(&[3.0, 4.0])),
        JsValue::UNDEFINED,
    )
    .unwrap();
    let g = t.to_device("webgpu".into()).unwrap();
    assert_eq!(g.device(), "webgpu:0");
    assert!(
        g.gpu_buffer().unwrap().is_object(),
        "the GPUBuffer is reachable"
    );
    assert!(
        device().unwrap().is_object(),
        "the shared GPUDevice is reachable"
    );
    let h = g.to_host().await.unwrap();
    let bytes = h.to_bytes().unwrap();
    let back: Vec<f32> = bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, values);
    // toArray(): the typed array of the dtype, with the tensor's own elements.
    let arr = h.to_array().unwrap();
    assert!(arr.is_instance_of::<js_sys::Float32Array>());
    assert_eq!(js_sys::Float32Array::from(arr).to_vec(), values);
    assert!(
        message(g.to_array().err().unwrap()).contains("call `await tensor.toHost()` first"),
        "toArray() on a WebGPU tensor says what to do"
    );
    // DLPack within the wasm heap: out as an address, back in without a copy.
    let address = g.to_dlpack(JsValue::UNDEFINED).unwrap();
    let again = Tensor::from_dlpack(address.into(), JsValue::UNDEFINED).unwrap();
    assert_eq!(again.device(), "webgpu:0");
    assert_eq!(numbers(again.shape()), vec![3.0, 4.0]);
}

#[wasm_bindgen_test]
async fn js_api_wraps_foreign_gpu_buffers_and_releases_them_once() {
    use dlport_wasm::js::{Tensor, device, init};
    use js_sys::{Function, Object, Reflect};
    use wasm_bindgen::JsValue;
    init().await.unwrap();
    let dev = device().unwrap();
    // A buffer made by "another library" on dlport's device, its data 16 bytes in.
    let make = Function::new_with_args(
        "device, data, usage",
        "const b = device.createBuffer({size: 16 + data.byteLength, usage, mappedAtCreation: true});
         new Float32Array(b.getMappedRange(16)).set(data); b.unmap(); return b;",
    );
    let values: Vec<f32> = (0..48).map(|i| i as f32 * 0.5 - 3.0).collect();
    let data = js_sys::Float32Array::from(&values[..]);
    let readable = JsValue::from(0x80 | 0x04 | 0x08);
    let buffer = make.call3(&JsValue::NULL, &dev, &data, &readable).unwrap();
    let counter = Object::new();
    let released = || {
        Reflect::get(&counter, &"n".into())
            .unwrap()
            .as_f64()
            .unwrap_or(0.0)
    };
    let on_release = Function::new_with_args("c", "return () => { c.n = (c.n || 0) + 1; };")
        .call1(&JsValue::NULL, &counter)
        .unwrap();
    let options = |shape: &[f64], offset: f64| {
        let o = Object::new();
        let s: js_sys::Array = shape.iter().map(|&x| JsValue::from(x)).collect();
        Reflect::set(&o, &"shape".into(), &s).unwrap();
        Reflect::set(&o, &"byteOffset".into(), &offset.into()).unwrap();
        Reflect::set(&o, &"onRelease".into(), &on_release).unwrap();
        JsValue::from(o)
    };
    let t = Tensor::from_gpu_buffer(buffer.clone(), options(&[16.0, 3.0], 16.0)).unwrap();
    assert_eq!(t.device(), "webgpu:0");
    assert_eq!(t.byte_offset(), 16.0);
    assert!(
        Object::is(&t.gpu_buffer().unwrap(), &buffer),
        "the foreign buffer itself, no copy"
    );
    // Read in place, and normalized by the WGSL kernel straight from the foreign buffer.
    let bytes = t.to_host().await.unwrap().to_bytes().unwrap();
    let back: Vec<f32> = bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, values);
    let n = t
        .normalize(f32s(&[1.0, 2.0, 3.0]), f32s(&[2.0]), JsValue::UNDEFINED)
        .unwrap();
    let got: Vec<f32> = n
        .to_host()
        .await
        .unwrap()
        .to_bytes()
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for (i, (g, v)) in got.iter().zip(&values).enumerate() {
        let want = (v - [1.0, 2.0, 3.0][i % 3]) / 2.0;
        assert!((g - want).abs() < 1e-6, "element {i}: {g} vs {want}");
    }
    assert_eq!(released(), 0.0);
    // A DLPack export keeps the buffer past the tensor; the importer's drop releases it once.
    let address = t.to_dlpack(JsValue::UNDEFINED).unwrap();
    drop(t);
    assert_eq!(released(), 0.0, "the export still holds it");
    let again = Tensor::from_dlpack(address.into(), JsValue::UNDEFINED).unwrap();
    drop(again);
    assert_eq!(released(), 1.0, "released exactly once, through onRelease");

    // Refusals name what is wrong, and onRelease still runs once (ownership passed).
    let e = message(
        Tensor::from_gpu_buffer(JsValue::from(5), options(&[1.0], 0.0))
            .err()
            .unwrap(),
    );
    assert_eq!(e, "dlport: fromGpuBuffer: expected a GPUBuffer, got 5");
    assert_eq!(released(), 2.0);
    let uniform = make
        .call3(&JsValue::NULL, &dev, &data, &JsValue::from(0x40))
        .unwrap();
    let e = message(
        Tensor::from_gpu_buffer(uniform, options(&[1.0], 0.0))
            .err()
            .unwrap(),
    );
    assert!(
        e.contains("usage is 0x40") && e.contains("STORAGE | COPY_SRC"),
        "{e}"
    );
    assert_eq!(released(), 3.0);
    let small = make.call3(&JsValue::NULL, &dev, &data, &readable).unwrap();
    let e = message(
        Tensor::from_gpu_buffer(small.clone(), options(&[49.0], 16.0))
            .err()
            .unwrap(),
    );
    assert!(
        e.starts_with("dlport: fromGpuBuffer: ") && e.contains("208"),
        "{e}"
    );
    assert_eq!(released(), 4.0);
    let e = message(
        Tensor::from_gpu_buffer(small.clone(), options(&[1.5], 0.0))
            .err()
            .unwrap(),
    );
    assert_eq!(
        e,
        "dlport: fromGpuBuffer: options.shape[0] = 1.5 is not an integer"
    );
    let e = message(
        Tensor::from_gpu_buffer(small.clone(), options(&[-2.0], 0.0))
            .err()
            .unwrap(),
    );
    assert!(e.contains("shape[0] = -2"), "{e}");
    assert_eq!(released(), 6.0);
    let e = message(
        Tensor::from_gpu_buffer(small.clone(), options(&[1.0], -4.0))
            .err()
            .unwrap(),
    );
    assert_eq!(
        e,
        "dlport: fromGpuBuffer: options.byteOffset = -4 is not a non-negative integer"
    );
    assert_eq!(released(), 7.0);
    let bad_callback = Object::new();
    Reflect::set(
        &bad_callback,
        &"shape".into(),
        &js_sys::Array::of1(&1.into()),
    )
    .unwrap();
    Reflect::set(&bad_callback, &"onRelease".into(), &"dispose".into()).unwrap();
    let e = message(
        Tensor::from_gpu_buffer(small, bad_callback.into())
            .err()
            .unwrap(),
    );
    assert_eq!(
        e,
        "dlport: fromGpuBuffer: options.onRelease must be a function, got \"dispose\""
    );
    // Kernel arguments are checked too.
    let f = Tensor::new(
        JsValue::from(js_sys::Float32Array::from(&values[..])),
        JsValue::from(extents(&[16.0, 3.0])),
        JsValue::UNDEFINED,
    )
    .unwrap()
    .to_device("webgpu".into())
    .unwrap();
    let e = message(
        f.normalize(f32s(&[0.0]), f32s(&[1.0, 0.0, 1.0]), JsValue::UNDEFINED)
            .err()
            .unwrap(),
    );
    assert_eq!(
        e,
        "dlport: normalize: std[1] = 0: a standard deviation must be finite and not 0"
    );
}

/// Numbers as the Float32Array the API takes.
fn f32s(values: &[f32]) -> wasm_bindgen::JsValue {
    js_sys::Float32Array::from(values).into()
}
