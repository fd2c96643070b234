//! The WebGPU backend natively, on whatever adapter wgpu finds (Mesa's lavapipe in CI):
//! round trips from 4 B to 64 MiB for f32, u8 and f16, byte offsets, GPU-side compaction of
//! strided tensors against a CPU reference, DLPack export/import with exactly-once slot
//! release, and a clear error when there is no adapter at all.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::OnceLock;

use dlport_core::backend::Backend;
use dlport_core::{
    AccessError, DataType, Device, DispatchError, Error, ExportBuilder, LayoutError,
};
use dlport_core::{ExportOptions, ImportOptions, Registry};
use dlport_wasm::WebGpuBackend;

/// One backend for the whole test binary (creating devices is slow on lavapipe).
fn backend() -> &'static WebGpuBackend {
    static B: OnceLock<WebGpuBackend> = OnceLock::new();
    B.get_or_init(|| {
        let b =
            WebGpuBackend::new_blocking().expect("a WebGPU adapter (install mesa-vulkan-drivers)");
        eprintln!("webgpu adapter: {}", b.gpu().describe());
        b
    })
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 131 + (i >> 8) * 7 + 3) as u8).collect()
}

#[test]
fn round_trips_from_4_bytes_to_64_mib() {
    let b = backend();
    for &bytes in &[4usize, 12, 256, 4096, 65536, 1 << 20, 16 << 20, 64 << 20] {
        for dtype in [DataType::FLOAT32, DataType::UINT8, DataType::FLOAT16] {
            let esize = dtype.size_bytes();
            let n = bytes / esize;
            let data = pattern(n * esize);
            let host = ExportBuilder::new(data.clone(), dtype, &[n as i64])
                .build()
                .unwrap();
            let t = b.gpu().upload(&host.view(), 0).unwrap();
            assert_eq!(t.device(), Device::webgpu(0));
            let back = b.download_blocking(&t.view().unwrap()).unwrap();
            assert!(back == data, "{dtype} × {n}: round trip changed the data");
        }
    }
}

#[test]
fn byte_offsets_are_honoured_even_when_not_word_aligned() {
    let b = backend();
    for offset in [0u64, 1, 2, 3, 4, 5, 16, 17, 1001] {
        for n in [1usize, 3, 7, 64] {
            let data = pattern(n);
            let host = ExportBuilder::new(data.clone(), DataType::UINT8, &[n as i64])
                .build()
                .unwrap();
            let t = b.gpu().upload(&host.view(), offset).unwrap();
            assert_eq!(t.byte_offset(), offset);
            let back = b.download_blocking(&t.view().unwrap()).unwrap();
            assert_eq!(back, data, "offset {offset}, {n} bytes");
            // A GPU-side copy honours the offset too.
            let c = b.gpu().compact_on_gpu(&t.view().unwrap()).unwrap();
            assert_eq!(c.byte_offset(), 0);
            assert_eq!(b.download_blocking(&c.view().unwrap()).unwrap(), data);
        }
    }
}

/// Row-major values of a strided view, computed on the CPU.
fn cpu_reference(
    data: &[u8],
    esize: usize,
    shape: &[i64],
    strides: &[i64],
    offset: i64,
) -> Vec<u8> {
    let numel: i64 = shape.iter().product();
    let mut out = Vec::new();
    let mut idx = vec![0i64; shape.len()];
    for _ in 0..numel {
        let e: i64 =
            offset + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<i64>() * esize as i64;
        out.extend_from_slice(&data[e as usize..e as usize + esize]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

#[test]
fn strided_tensors_are_compacted_on_the_gpu() {
    let b = backend();
    let reg = Registry::new();
    let _ = reg; // the GPU path below never goes through the host
    // (shape, strides in elements, byte offset of the first element) over a 4 KiB buffer.
    let cases: &[(DataType, &[i64], &[i64], i64)] = &[
        (DataType::FLOAT32, &[8, 16], &[1, 8], 0), // transpose
        (DataType::FLOAT32, &[4, 8], &[-8, -1], 31 * 4), // both axes reversed
        (DataType::UINT8, &[5, 7], &[0, 1], 3),    // broadcast rows, odd offset
        (DataType::FLOAT16, &[3, 4, 5], &[20, 1, 4], 2), // permuted
        (DataType::FLOAT64, &[6], &[3], 8),        // gaps
        (DataType::UINT8, &[2, 3, 2, 2], &[24, 8, 2, 1], 5),
    ];
    for &(dtype, shape, strides, offset) in cases {
        let esize = dtype.size_bytes();
        let data = pattern(4096);
        // The whole 4 KiB goes to the GPU; the strided view is then described over it.
        let raw = ExportBuilder::new(data.clone(), DataType::UINT8, &[4096])
            .build()
            .unwrap();
        let whole = b.gpu().upload(&raw.view(), 0).unwrap();
        let handle = whole.buffer().ptr();
        let view_struct = dlport_core::abi::DLTensor {
            data: handle,
            device: Device::webgpu(0),
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_ptr() as *mut i64,
            strides: strides.as_ptr() as *mut i64,
            byte_offset: offset as u64,
        };
        // SAFETY: device memory is never read through `data`; shape/strides outlive the view.
        let view = unsafe { dlport_core::TensorRef::from_raw(&view_struct, None, 0) }.unwrap();
        let c = b.gpu().compact_on_gpu(&view).unwrap();
        assert!(c.is_copied() && c.contiguity().is_row_major());
        let got = b.download_blocking(&c.view().unwrap()).unwrap();
        let want = cpu_reference(&data, esize, shape, strides, offset);
        assert_eq!(got, want, "{dtype} {shape:?} {strides:?} +{offset}");
        // Downloading the strided view directly compacts on the GPU too.
        assert_eq!(b.download_blocking(&view).unwrap(), want);
    }
}

#[test]
fn dlpack_export_and_import_release_the_slot_exactly_once() {
    // A device of its own: the other tests run in parallel and allocate in the shared one.
    let own = WebGpuBackend::new_blocking().expect("a WebGPU adapter");
    let b = &own;
    let mut registry = Registry::with_cpu();
    registry.register(std::sync::Arc::new(b.clone())).unwrap();
    let before = b.gpu().live_buffers();
    let host = ExportBuilder::from_vec(vec![1.5f32; 1000], &[10, 100])
        .build()
        .unwrap();
    let t = b.gpu().upload(&host.view(), 0).unwrap();
    assert_eq!(b.gpu().live_buffers(), before + 1);

    let exported = registry.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    assert_eq!(exported.view().device(), Device::webgpu(0));
    assert_eq!(
        exported.view().data(),
        t.buffer().ptr(),
        "data is the opaque handle"
    );
    assert!(
        exported.view().as_slice::<f32>().is_err(),
        "device memory is never read as host memory"
    );

    let imported = registry
        .from_dlpack(exported, &ImportOptions::default())
        .unwrap();
    assert_eq!(imported.backend(), "webgpu");
    drop(t);
    assert_eq!(
        b.gpu().live_buffers(),
        before + 1,
        "the DLPack reference keeps the buffer"
    );
    let back = b.download_blocking(&imported.view().unwrap()).unwrap();
    assert_eq!(back.len(), 4000);
    // Copy to the host through the registry.
    let host = registry
        .from_dlpack(
            registry
                .to_dlpack(&imported, &ExportOptions::default())
                .unwrap(),
            &ImportOptions {
                device: Some(Device::cpu()),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(host.to_vec::<f32>().unwrap().iter().all(|&x| x == 1.5));
    drop(imported);
    drop(host);
    assert_eq!(
        b.gpu().live_buffers(),
        before,
        "released exactly once, after both sides"
    );
}

#[test]
fn allocation_and_errors() {
    let b = backend();
    let t = b
        .allocate(Device::webgpu(0), DataType::UINT32, &[3, 5])
        .unwrap();
    assert_eq!(
        b.download_blocking(&t.view().unwrap()).unwrap(),
        vec![0u8; 60],
        "zeroed"
    );
    assert_eq!(
        b.allocate(Device::webgpu(7), DataType::UINT32, &[1])
            .unwrap_err(),
        Error::Dispatch(DispatchError::InvalidDeviceId {
            backend: "webgpu",
            device_id: 7
        })
    );
    let fp4 = ExportBuilder::new(vec![0u8; 4], DataType::FLOAT4_E2M1FN, &[4])
        .strides(&[2])
        .build();
    assert!(fp4.is_ok());
}

/// Runs in a child process with no Vulkan driver and only the Vulkan backend enabled.
#[test]
fn no_adapter_is_a_clear_error() {
    if std::env::var_os("DLPORT_NO_ADAPTER_CHILD").is_some() {
        let err = WebGpuBackend::new_blocking().unwrap_err();
        assert_eq!(err.code(), 32);
        assert!(err.to_string().contains("no WebGPU adapter"), "{err}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "no_adapter_is_a_clear_error", "--nocapture"])
        .env("DLPORT_NO_ADAPTER_CHILD", "1")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env("WGPU_BACKEND", "vulkan")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the child ran the check:\n{text}"
    );
}

/// Host memory labelled as CUDA-pinned (what a pinned producer hands over).
struct Pinned(Vec<u8>);

// SAFETY: a Vec's stable buffer, owned alone; the label does not change the memory.
unsafe impl dlport_core::TensorStorage for Pinned {
    fn data_ptr(&mut self) -> *mut std::ffi::c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len()
    }
    fn device(&self) -> Device {
        Device::cuda_host()
    }
}

#[test]
fn uploads_from_pinned_and_strided_host_memory() {
    let b = backend();
    let data = pattern(96);
    let pinned = ExportBuilder::new(Pinned(data.clone()), DataType::UINT8, &[96])
        .build()
        .unwrap();
    assert_eq!(pinned.view().device(), Device::cuda_host());
    let t = b.gpu().upload(&pinned.view(), 0).unwrap();
    assert_eq!(b.download_blocking(&t.view().unwrap()).unwrap(), data);
    // A strided host view is compacted on the host side of the upload.
    let strided = ExportBuilder::new(data.clone(), DataType::UINT16, &[6, 8])
        .strides(&[1, 6])
        .build()
        .unwrap();
    let want: Vec<u8> = strided
        .view()
        .to_vec::<u16>()
        .unwrap()
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    let t = b.gpu().upload(&strided.view(), 2).unwrap();
    assert_eq!(b.download_blocking(&t.view().unwrap()).unwrap(), want);
    // Device memory is not a host source.
    let err = b.gpu().upload(&t.view().unwrap(), 0).unwrap_err();
    assert_eq!(
        err,
        Error::Access(AccessError::NotHostAccessible {
            device: Device::webgpu(0)
        })
    );
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
                let out = b.gpu().normalize(&t.view().unwrap(), &opts).unwrap();
                assert_eq!(out.dtype(), DataType::FLOAT32);
                assert_eq!(out.shape(), &shape);
                let bytes = b.download_blocking(&out.view().unwrap()).unwrap();
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
    let transposed = dlport_core::Tensor::new(
        std::sync::Arc::clone(g.buffer()),
        "webgpu",
        DataType::FLOAT32,
        &[h * w, c as i64],
        Some(&[1, h * w]),
        0,
        0,
    )
    .unwrap();
    let out = b
        .gpu()
        .normalize(
            &transposed.view().unwrap(),
            &dlport_wasm::Normalize {
                mean: &mean,
                std: &std,
                scale: 1.0,
            },
        )
        .unwrap();
    let got: Vec<f32> =
        bytemuck::pod_collect_to_vec(&b.download_blocking(&out.view().unwrap()).unwrap());
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
    let v = t.view().unwrap();
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
            .normalize(&t.view().unwrap(), &identity)
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
    let t = dlport_core::Tensor::new(
        dlport_core::backend::Buffer::new(Box::new(storage)),
        "webgpu",
        DataType::FLOAT32,
        &[16, 3],
        None,
        16,
        0,
    )
    .unwrap();
    assert_eq!(gpu.live_buffers(), live + 1);
    let back = b.download_blocking(&t.view().unwrap()).unwrap();
    assert_eq!(
        bytemuck::pod_collect_to_vec::<u8, f32>(&back),
        values,
        "read in place"
    );
    let out = gpu
        .normalize(
            &t.view().unwrap(),
            &dlport_wasm::Normalize {
                mean: &[1.0, 2.0, 3.0],
                std: &[2.0],
                scale: 1.0,
            },
        )
        .unwrap();
    let got: Vec<f32> =
        bytemuck::pod_collect_to_vec(&b.download_blocking(&out.view().unwrap()).unwrap());
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
    let err = dlport_core::Tensor::new(
        dlport_core::backend::Buffer::new(Box::new(storage)),
        "webgpu",
        DataType::FLOAT32,
        &[17],
        None,
        0,
        0,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Layout(LayoutError::StorageTooSmall {
                needed: 68,
                available: 64
            })
        ),
        "{err}"
    );
    assert_eq!(released.load(Ordering::SeqCst), 3);
    assert_eq!(gpu.live_buffers(), live);
}
