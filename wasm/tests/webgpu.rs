//! The WebGPU backend natively, on whatever adapter wgpu finds (Mesa's lavapipe in CI):
//! round trips from 4 B to 64 MiB for f32, u8 and f16, byte offsets, GPU-side compaction of
//! strided tensors against a CPU reference, DLPack export/import with exactly-once slot
//! release, and a clear error when there is no adapter at all.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::OnceLock;

use dlport_core::backend::Backend;
use dlport_core::error::{AccessError, DispatchError};
use dlport_core::{DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions, Registry};
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
            let back = b
                .download_blocking(&t.view().unwrap().tensor_ref())
                .unwrap();
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
            let back = b
                .download_blocking(&t.view().unwrap().tensor_ref())
                .unwrap();
            assert_eq!(back, data, "offset {offset}, {n} bytes");
            // A GPU-side copy honours the offset too.
            let c = b
                .gpu()
                .compact_on_gpu(&t.view().unwrap().tensor_ref())
                .unwrap();
            assert_eq!(c.byte_offset(), 0);
            assert_eq!(
                b.download_blocking(&c.view().unwrap().tensor_ref())
                    .unwrap(),
                data
            );
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
        // Each kernel (the layout is simplified first: extent-1 axes go, axes merge):
        // a contiguous run at an odd offset, of an odd length, and an aligned run of 7 bytes;
        (DataType::UINT8, &[37], &[1], 3),
        (DataType::FLOAT32, &[5, 1, 7], &[7, 3, 1], 2),
        (DataType::UINT8, &[7], &[1], 0),
        // words: 4-, 8- and 16-byte elements in rows of 16·k bytes, reversed, transposed;
        (DataType::FLOAT64, &[2, 4], &[-4, -1], 56),
        (DataType::COMPLEX128, &[4, 4], &[1, 4], 16),
        (DataType::FLOAT32, &[1, 4, 12], &[5, 1, 4], 4),
        // rows of 12 bytes, and a word offset that is not aligned: byte by byte;
        (DataType::FLOAT32, &[5, 3], &[1, 5], 0),
        (DataType::FLOAT32, &[8, 16], &[1, 8], 2),
        // 2-byte elements in rows of 16 bytes at an even offset, and at an odd one;
        (DataType::FLOAT16, &[4, 8], &[1, 4], 2),
        (DataType::FLOAT16, &[4, 8], &[1, 4], 1),
        (DataType::BFLOAT16, &[2, 3, 8], &[1, 2, 6], 6),
        // bytes in rows of 16 (transposed; broadcast rows at an odd offset).
        (DataType::UINT8, &[3, 16], &[1, 3], 5),
        (DataType::UINT8, &[4, 32], &[0, 1], 1),
        (DataType::UINT8, &[2, 16, 2], &[1, 4, 2], 0),
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
        let got = b
            .download_blocking(&c.view().unwrap().tensor_ref())
            .unwrap();
        let want = cpu_reference(&data, esize, shape, strides, offset);
        assert_eq!(got, want, "{dtype} {shape:?} {strides:?} +{offset}");
        // Downloading the strided view directly compacts on the GPU too.
        assert_eq!(b.download_blocking(&view).unwrap(), want);
    }
}

#[test]
fn compaction_leaves_the_padding_zero() {
    // A source of 0xff bytes everywhere: whatever a kernel reads past the tensor is not 0.
    let b = backend();
    let raw = ExportBuilder::new(vec![0xffu8; 256], DataType::UINT8, &[256])
        .build()
        .unwrap();
    let whole = b.gpu().upload(&raw.view(), 0).unwrap();
    // A run at an odd offset (the shifting kernel) and rows of 7 bytes (byte by byte).
    let cases: &[(&[i64], &[i64], u64)] = &[(&[37], &[1], 3), (&[5, 7], &[0, 1], 3)];
    for &(shape, strides, offset) in cases {
        let view_struct = dlport_core::abi::DLTensor {
            data: whole.buffer().ptr(),
            device: Device::webgpu(0),
            ndim: shape.len() as i32,
            dtype: DataType::UINT8,
            shape: shape.as_ptr() as *mut i64,
            strides: strides.as_ptr() as *mut i64,
            byte_offset: offset,
        };
        // SAFETY: device memory is never read through `data`; shape/strides outlive the view.
        let view = unsafe { dlport_core::TensorRef::from_raw(&view_struct, None, 0) }.unwrap();
        let c = b.gpu().compact_on_gpu(&view).unwrap();
        let len = shape.iter().product::<i64>() as usize;
        // The whole buffer, padding included, through a bare copy.
        let buffer = b.gpu().lookup(c.buffer().ptr() as usize).unwrap();
        let size = buffer.size();
        assert_eq!(size, len.div_ceil(16) as u64 * 16);
        let device = b.gpu().device();
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&buffer, 0, &staging, 0, size);
        b.gpu().queue().submit([enc.finish()]);
        staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let bytes = staging.slice(..).get_mapped_range().unwrap().to_vec();
        assert!(
            bytes[..len].iter().all(|&x| x == 0xff),
            "{shape:?}: the tensor"
        );
        assert!(
            bytes[len..].iter().all(|&x| x == 0),
            "{shape:?}: the padding"
        );
    }
}

#[test]
fn compactions_larger_than_one_row_of_workgroups() {
    // 72 MiB of 4-byte elements reversed: 73,728 workgroups of 16-byte invocations, more than
    // the 65,535 of one dispatch row, so the kernel indexes a second row.
    let b = backend();
    let n = 18usize << 20;
    let values: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let host = ExportBuilder::from_vec(values.clone(), &[n as i64])
        .build()
        .unwrap();
    let t = b.gpu().upload(&host.view(), 0).unwrap();
    let (shape, strides) = ([n as i64], [-1i64]);
    let view_struct = dlport_core::abi::DLTensor {
        data: t.buffer().ptr(),
        device: Device::webgpu(0),
        ndim: 1,
        dtype: DataType::UINT32,
        shape: shape.as_ptr() as *mut i64,
        strides: strides.as_ptr() as *mut i64,
        byte_offset: (n as u64 - 1) * 4,
    };
    // SAFETY: device memory is never read through `data`; shape/strides outlive the view.
    let view = unsafe { dlport_core::TensorRef::from_raw(&view_struct, None, 0) }.unwrap();
    let got = b.download_blocking(&view).unwrap();
    let want: Vec<u8> = values.iter().rev().flat_map(|v| v.to_le_bytes()).collect();
    assert!(got == want, "72 MiB reversed");
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
    let back = b
        .download_blocking(&imported.view().unwrap().tensor_ref())
        .unwrap();
    assert_eq!(back.len(), 4000);
    // Copy to the host through the registry.
    let host = registry
        .from_dlpack(
            registry
                .to_dlpack(&imported, &ExportOptions::legacy())
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
        b.download_blocking(&t.view().unwrap().tensor_ref())
            .unwrap(),
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
unsafe impl dlport_core::backend::TensorStorage for Pinned {
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
    assert_eq!(
        b.download_blocking(&t.view().unwrap().tensor_ref())
            .unwrap(),
        data
    );
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
    assert_eq!(
        b.download_blocking(&t.view().unwrap().tensor_ref())
            .unwrap(),
        want
    );
    // Device memory is not a host source.
    let err = b
        .gpu()
        .upload(&t.view().unwrap().tensor_ref(), 0)
        .unwrap_err();
    assert_eq!(
        err,
        Error::Access(AccessError::NotHostAccessible {
            device: Device::webgpu(0)
        })
    );
}
