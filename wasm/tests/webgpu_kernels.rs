//! The normalization kernel and adopted buffers natively, on whatever adapter wgpu finds (Mesa's
//! lavapipe in CI): every input type against a CPU reference, each refusal naming its
//! argument, and foreign buffers read in place and released once through their callback.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::OnceLock;

use dlport_core::{DataType, Error, ExportBuilder, ExportOptions, Registry};
use dlport_wasm::WebGpuBackend;

/// One backend for the whole test binary (creating devices is slow on lavapipe).
fn backend() -> &'static WebGpuBackend {
    static B: OnceLock<WebGpuBackend> = OnceLock::new();
    B.get_or_init(|| {
        WebGpuBackend::new_blocking().expect("a WebGPU adapter (install mesa-vulkan-drivers)")
    })
}

/// The CPU reference of the normalization kernel.
fn normalize_reference(
    x: &[f64],
    channels: usize,
    mean: &[f32],
    std: &[f32],
    scale: f32,
) -> Vec<f32> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = i % channels;
            let m = if mean.len() == 1 { mean[0] } else { mean[c] };
            let s = if std.len() == 1 { std[0] } else { std[c] };
            (v as f32 * scale - m) / s
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}: element {i} is {g}, the CPU reference says {w}"
        );
    }
}

#[test]
fn normalize_matches_the_cpu_reference_for_every_input_type() {
    let b = backend();
    let (h, w, c) = (5i64, 7i64, 3usize);
    let n = (h * w) as usize * c;
    let mean = [0.485f32, 0.456, 0.406];
    let std = [0.229f32, 0.224, 0.225];
    let values: Vec<f64> = (0..n).map(|i| ((i * 37 + 11) % 256) as f64).collect();
    let shape = [h, w, c as i64];
    let inputs = [
        ExportBuilder::new(
            values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
            DataType::FLOAT32,
            &shape,
        )
        .build()
        .unwrap(),
        ExportBuilder::new(
            values.iter().map(|&v| v as i32 - 100).collect::<Vec<_>>(),
            DataType::INT32,
            &shape,
        )
        .build()
        .unwrap(),
        ExportBuilder::new(
            values.iter().map(|&v| v as u32).collect::<Vec<_>>(),
            DataType::UINT32,
            &shape,
        )
        .build()
        .unwrap(),
        ExportBuilder::new(
            values.iter().map(|&v| v as u8).collect::<Vec<_>>(),
            DataType::UINT8,
            &shape,
        )
        .build()
        .unwrap(),
    ];
    for (k, host) in inputs.into_iter().enumerate() {
        let x: Vec<f64> = if k == 1 {
            values.iter().map(|v| v - 100.0).collect()
        } else {
            values.clone()
        };
        // Byte offsets 0 and 8 (and 3 for bytes), per-channel and scalar statistics.
        for offset in [0u64, 8, if k == 3 { 3 } else { 4 }] {
            for (m, s) in [(&mean[..], &std[..]), (&[0.5f32][..], &[2.0f32][..])] {
                let t = b.gpu().upload(&host.view(), offset).unwrap();
                let opts = dlport_wasm::Normalize {
                    mean: m,
                    std: s,
                    scale: 1.0 / 255.0,
                };
                let out = b
                    .gpu()
                    .normalize(&t.view().unwrap().tensor_ref(), &opts)
                    .unwrap();
                assert_eq!(out.dtype(), DataType::FLOAT32);
                assert_eq!(out.shape(), &shape);
                let bytes = b
                    .download_blocking(&out.view().unwrap().tensor_ref())
                    .unwrap();
                let got: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
                let want = normalize_reference(&x, c, m, s, 1.0 / 255.0);
                assert_close(
                    &got,
                    &want,
                    &format!("{} at offset {offset}", host.view().dtype()),
                );
            }
        }
    }
    // A strided (transposed) input is compacted on the GPU first.
    let host = ExportBuilder::new(
        values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        DataType::FLOAT32,
        &[c as i64, h * w],
    )
    .build()
    .unwrap();
    let g = b.gpu().upload(&host.view(), 0).unwrap();
    let transposed = dlport_core::Tensor::builder(
        g.buffer().clone(),
        "webgpu",
        DataType::FLOAT32,
        &[h * w, c as i64],
    )
    .strides(&[1, h * w])
    .build()
    .unwrap();
    let out = b
        .gpu()
        .normalize(
            &transposed.view().unwrap().tensor_ref(),
            &dlport_wasm::Normalize {
                mean: &mean,
                std: &std,
                scale: 1.0,
            },
        )
        .unwrap();
    let got: Vec<f32> = bytemuck::pod_collect_to_vec(
        &b.download_blocking(&out.view().unwrap().tensor_ref())
            .unwrap(),
    );
    let hw = (h * w) as usize;
    let xt: Vec<f64> = (0..n).map(|i| values[(i % c) * hw + i / c]).collect();
    assert_close(
        &got,
        &normalize_reference(&xt, c, &mean, &std, 1.0),
        "transposed",
    );
}

#[test]
fn normalize_refuses_bad_arguments_by_name() {
    let b = backend();
    let host = ExportBuilder::new(vec![1.0f32; 12], DataType::FLOAT32, &[4, 3])
        .build()
        .unwrap();
    let t = b.gpu().upload(&host.view(), 0).unwrap();
    let guard = t.view().unwrap();
    let v = guard.tensor_ref();
    let err = |m: &[f32], s: &[f32], scale: f32| {
        b.gpu()
            .normalize(
                &v,
                &dlport_wasm::Normalize {
                    mean: m,
                    std: s,
                    scale,
                },
            )
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(&[0.0, 0.0], &[1.0], 1.0),
        "mean has 2 values, but the last axis has 3 channels; give 1 value or 3 (at most 64)"
    );
    assert_eq!(
        err(&[0.0], &[1.0, 0.0, 1.0], 1.0),
        "std[1] = 0: a standard deviation must be finite and not 0"
    );
    assert_eq!(err(&[0.0], &[1.0], f32::NAN), "scale = NaN is not finite");
    let half = ExportBuilder::new(vec![0u16; 4], DataType::FLOAT16, &[4])
        .build()
        .unwrap();
    let h = b.gpu().upload(&half.view(), 0).unwrap();
    let identity = dlport_wasm::Normalize {
        mean: &[0.0],
        std: &[1.0],
        scale: 1.0,
    };
    let refuse = |t: &dlport_core::Tensor| {
        b.gpu()
            .normalize(&t.view().unwrap().tensor_ref(), &identity)
            .unwrap_err()
    };
    let e = refuse(&h);
    assert_eq!(
        e,
        dlport_wasm::KernelError::InputDtype {
            dtype: DataType::FLOAT16
        }
    );
    assert!(e.to_string().contains("not float16"), "{e}");
    // A float32 tensor at an offset that is not a multiple of 4.
    let odd = b.gpu().upload(&host.view(), 2).unwrap();
    let e = refuse(&odd);
    assert_eq!(
        e,
        dlport_wasm::KernelError::Misaligned {
            byte_offset: 2,
            required: 4
        }
    );
}

#[test]
fn adopted_buffers_are_read_in_place_and_released_once_through_their_callback() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    // A device of its own: other tests run in parallel and would move the slot count.
    let own = WebGpuBackend::new_blocking().unwrap();
    let b = &own;
    let gpu = b.gpu();
    let live = gpu.live_buffers();
    let released = Arc::new(AtomicUsize::new(0));
    let values: Vec<f32> = (0..48).map(|i| i as f32 * 0.5 - 3.0).collect();
    // A buffer made by "another library" on the same device, filled by it.
    let foreign = gpu.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("foreign"),
        size: 16 + 48 * 4,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    gpu.queue()
        .write_buffer(&foreign, 16, bytemuck::cast_slice(&values));
    let counter = Arc::clone(&released);
    let storage = gpu
        .adopt(
            foreign,
            Some(Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })),
        )
        .unwrap();
    let t = dlport_core::Tensor::builder(
        dlport_core::backend::Buffer::new(Box::new(storage)),
        "webgpu",
        DataType::FLOAT32,
        &[16, 3],
    )
    .byte_offset(16)
    .build()
    .unwrap();
    assert_eq!(gpu.live_buffers(), live + 1);
    let back = b
        .download_blocking(&t.view().unwrap().tensor_ref())
        .unwrap();
    assert_eq!(
        bytemuck::pod_collect_to_vec::<u8, f32>(&back),
        values,
        "read in place"
    );
    let out = gpu
        .normalize(
            &t.view().unwrap().tensor_ref(),
            &dlport_wasm::Normalize {
                mean: &[1.0, 2.0, 3.0],
                std: &[2.0],
                scale: 1.0,
            },
        )
        .unwrap();
    let got: Vec<f32> = bytemuck::pod_collect_to_vec(
        &b.download_blocking(&out.view().unwrap().tensor_ref())
            .unwrap(),
    );
    let x: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    assert_close(
        &got,
        &normalize_reference(&x, 3, &[1.0, 2.0, 3.0], &[2.0], 1.0),
        "adopted",
    );
    // Exported through DLPack, the buffer outlives the tensor until the export is released.
    let registry = {
        let mut r = Registry::with_cpu();
        r.register(Arc::new(b.clone())).unwrap();
        r
    };
    let exported = registry.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    drop(t);
    assert_eq!(
        released.load(Ordering::SeqCst),
        0,
        "the export still holds the buffer"
    );
    drop(exported);
    assert_eq!(
        released.load(Ordering::SeqCst),
        1,
        "released once, through the callback"
    );
    assert_eq!(
        gpu.live_buffers(),
        live + 1,
        "only the normalize output is left"
    );
    drop(out);
    assert_eq!(gpu.live_buffers(), live);

    // A buffer dlport cannot read is refused, and its callback still runs once.
    let counter = Arc::clone(&released);
    let unreadable = gpu.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("uniform only"),
        size: 64,
        usage: wgpu::BufferUsages::UNIFORM,
        mapped_at_creation: false,
    });
    let err = gpu
        .adopt(
            unreadable,
            Some(Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })),
        )
        .err()
        .unwrap();
    assert!(err.to_string().contains("STORAGE | COPY_SRC"), "{err}");
    assert_eq!(released.load(Ordering::SeqCst), 2);
    // A shape that does not fit the buffer: the storage drops, the callback runs once.
    let counter = Arc::clone(&released);
    let small = gpu.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("small"),
        size: 64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let storage = gpu
        .adopt(
            small,
            Some(Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })),
        )
        .unwrap();
    let err = dlport_core::Tensor::builder(
        dlport_core::backend::Buffer::new(Box::new(storage)),
        "webgpu",
        DataType::FLOAT32,
        &[17],
    )
    .build()
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Layout(dlport_core::error::LayoutError::StorageTooSmall {
                needed: 68,
                available: 64
            })
        ),
        "{err}"
    );
    assert_eq!(released.load(Ordering::SeqCst), 3);
    assert_eq!(gpu.live_buffers(), live);
}
