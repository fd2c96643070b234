//! The WebGPU backend in the browser (`wasm-pack test --headless --chrome wasm`): the same
//! behaviours as the native tests, on Chromium's WebGPU (SwiftShader, no GPU needed).
#![cfg(target_arch = "wasm32")]

use dlport_core::device::{ExportOptions, ImportOptions, Registry};
use dlport_core::{DataType, Device, ExportBuilder};
use dlport_wasm::WebGpuBackend;
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
            let back = b.gpu().download(&t.read().unwrap().view()).await.unwrap();
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
            b.gpu().download(&t.read().unwrap().view()).await.unwrap(),
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
    let (shape, strides) = ([8i64, 16], [1i64, 8]);
    let dl = dlport_core::abi::DLTensor {
        data: whole.buffer().ptr(),
        device: Device::webgpu(0),
        ndim: 2,
        dtype: DataType::FLOAT32,
        shape: shape.as_ptr() as *mut i64,
        strides: strides.as_ptr() as *mut i64,
        byte_offset: 0,
    };
    // SAFETY: device memory is never read through `data`; shape/strides outlive the view.
    let view = unsafe { dlport_core::TensorRef::from_raw(&dl, None, 0) }.unwrap();
    let got = b.gpu().download(&view).await.unwrap();
    let mut want = Vec::new();
    for i in 0..8 {
        for j in 0..16 {
            let e = (i + j * 8) * 4;
            want.extend_from_slice(&data[e..e + 4]);
        }
    }
    assert_eq!(got, want);
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
        .download(&imported.read().unwrap().view())
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
    use wasm_bindgen::JsValue;
    init().await.unwrap();
    init().await.unwrap(); // idempotent
    let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let array = js_sys::Float32Array::from(&values[..]);
    let t = Tensor::new(JsValue::from(array), Some(vec![3.0, 4.0]), None).unwrap();
    assert_eq!(t.shape(), vec![3.0, 4.0]);
    assert_eq!(t.strides(), vec![4.0, 1.0]);
    assert_eq!(t.dtype(), "float32");
    assert_eq!(t.device(), "cpu");
    let g = t.to_device("webgpu").unwrap();
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
    // Errors are JS Errors carrying dlport's message.
    assert!(
        Tensor::new(
            JsValue::from(js_sys::Float32Array::new_with_length(5)),
            Some(vec![2.0, 3.0]),
            None
        )
        .is_err()
    );
    assert!(t.to_device("metal").is_err());
    // DLPack within the wasm heap: out as an address, back in without a copy.
    let address = g.to_dlpack().unwrap();
    let again = Tensor::from_dlpack(address, None).unwrap();
    assert_eq!(again.device(), "webgpu:0");
    assert_eq!(again.shape(), vec![3.0, 4.0]);
    let host_addr = h.to_dlpack().unwrap();
    let host_again = Tensor::from_dlpack(host_addr, None).unwrap();
    assert_eq!(host_again.to_bytes().unwrap(), bytes);
    assert!(
        Tensor::from_dlpack(0, None).is_err(),
        "NULL is refused with a message"
    );
    let odd = Tensor::new(
        JsValue::from(js_sys::Uint16Array::new_with_length(4)),
        None,
        Some("bfloat16".into()),
    )
    .unwrap();
    assert_eq!(odd.dtype(), "bfloat16");
}
