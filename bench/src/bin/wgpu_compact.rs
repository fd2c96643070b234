//! WebGPU compaction (strided → compact, dlport's `compact_*.wgsl` kernels) against a bare
//! `copyBufferToBuffer` of the same number of bytes, in the same run on the same adapter
//! (lavapipe here), for transposes of 1-, 2-, 4- and 8-byte elements, a reversed tensor, a
//! broadcast and a compact tensor at an odd byte offset. Every result is checked against a CPU
//! reference first. A third column is the adapter's floor for any kernel: a compute shader
//! that only copies 16 bytes per invocation into a new buffer (what no compaction kernel can
//! beat). Writes `target/bench/wgpu_compact.json`.
//!
//! `cargo run --release -p dlport-bench --features wgpu --bin wgpu_compact`

use std::time::Instant;

use dlport_core::abi::DLTensor;
use dlport_core::{DataType, Device, ExportBuilder, TensorRef};
use dlport_wasm::WebGpuBackend;

/// Bytes of every compacted tensor (and of every bare copy).
const BYTES: usize = 16 << 20;

struct Case {
    name: &'static str,
    dtype: DataType,
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// Byte offset of the first element.
    offset: u64,
}

fn cases() -> Vec<Case> {
    let transpose = |name, dtype: DataType| {
        let n = BYTES / dtype.size_bytes();
        let cols = 1i64 << (n.trailing_zeros() / 2);
        let rows = n as i64 / cols;
        Case {
            name,
            dtype,
            shape: vec![rows, cols],
            strides: vec![1, rows],
            offset: 0,
        }
    };
    let n4 = (BYTES / 4) as i64;
    vec![
        transpose("transpose, 1-byte", DataType::UINT8),
        transpose("transpose, 2-byte", DataType::FLOAT16),
        transpose("transpose, 4-byte", DataType::FLOAT32),
        transpose("transpose, 8-byte", DataType::FLOAT64),
        Case {
            name: "reversed, 4-byte",
            dtype: DataType::FLOAT32,
            shape: vec![n4],
            strides: vec![-1],
            offset: (n4 as u64 - 1) * 4,
        },
        Case {
            name: "broadcast rows, 4-byte",
            dtype: DataType::FLOAT32,
            shape: vec![n4 / 1024, 1024],
            strides: vec![0, 1],
            offset: 0,
        },
        Case {
            name: "compact at byte offset 1, 1-byte",
            dtype: DataType::UINT8,
            shape: vec![BYTES as i64],
            strides: vec![1],
            offset: 1,
        },
    ]
}

/// Row-major bytes of a strided view of `data`, on the CPU.
fn reference(data: &[u8], c: &Case) -> Vec<u8> {
    let esize = c.dtype.size_bytes();
    let numel: i64 = c.shape.iter().product();
    let mut out = Vec::with_capacity(numel as usize * esize);
    let mut index = vec![0i64; c.shape.len()];
    for _ in 0..numel {
        let e: i64 = index.iter().zip(&c.strides).map(|(i, s)| i * s).sum();
        let at = (c.offset as i64 + e * esize as i64) as usize;
        out.extend_from_slice(&data[at..at + esize]);
        for k in (0..index.len()).rev() {
            index[k] += 1;
            if index[k] < c.shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

/// The floor: a kernel that copies the source's first bytes as they are, 16 per invocation.
const IDENTITY_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let q = gid.x + gid.y * nwg.x * 64u;
  if (q < arrayLength(&dst)) { dst[q] = src[q]; }
}
"#;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (q(0.5), q(0.25), q(0.75))
}

fn main() {
    let reps = 7;
    let b = WebGpuBackend::new_blocking().expect("a WebGPU adapter");
    let gpu = b.gpu();
    let wait = || {
        gpu.device()
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
    };
    println!("adapter: {}", gpu.describe());
    // One source buffer for every view: the data plus room for the odd offset.
    let data: Vec<u8> = (0..BYTES + 16)
        .map(|i| (i * 131 + (i >> 8) * 7 + 3) as u8)
        .collect();
    let raw = ExportBuilder::new(data.clone(), DataType::UINT8, &[data.len() as i64])
        .build()
        .unwrap();
    let whole = gpu.upload(&raw.view(), 0).unwrap();
    let handle = whole.buffer().ptr();
    let source = gpu.lookup(handle as usize).unwrap();
    let bare = || {
        let t0 = Instant::now();
        let dst = gpu.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: BYTES as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = gpu.device().create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&source, 0, &dst, 0, BYTES as u64);
        gpu.queue().submit([enc.finish()]);
        wait();
        t0.elapsed().as_secs_f64()
    };
    let identity = {
        let module = gpu
            .device()
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("identity"),
                source: wgpu::ShaderSource::Wgsl(IDENTITY_WGSL.into()),
            });
        gpu.device()
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("identity"),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
    };
    let floor = || {
        let t0 = Instant::now();
        let dst = gpu.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: BYTES as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind = gpu.device().create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &identity.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: source.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: dst.as_entire_binding(),
                },
            ],
        });
        let groups = (BYTES / 16).div_ceil(64) as u32;
        let mut enc = gpu.device().create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&identity);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups.min(65535), groups.div_ceil(65535), 1);
        }
        gpu.queue().submit([enc.finish()]);
        wait();
        t0.elapsed().as_secs_f64()
    };
    floor();
    let mut rows = Vec::new();
    for c in cases() {
        let dl = DLTensor {
            data: handle,
            device: Device::webgpu(0),
            ndim: c.shape.len() as i32,
            dtype: c.dtype,
            shape: c.shape.as_ptr() as *mut i64,
            strides: c.strides.as_ptr() as *mut i64,
            byte_offset: c.offset,
        };
        // SAFETY: device memory is never read through `data` (a table handle); shape and
        // strides outlive the view.
        let view = unsafe { TensorRef::from_raw(&dl, None, 0) }.unwrap();
        // Checked (and the pipeline built) before anything is timed.
        let got = {
            let t = gpu.compact_on_gpu(&view).unwrap();
            b.download_blocking(&t.view().unwrap().tensor_ref())
                .unwrap()
        };
        assert!(got == reference(&data, &c), "{}: wrong result", c.name);
        let (mut ours, mut theirs, mut floors) = (Vec::new(), Vec::new(), Vec::new());
        // The order alternates, as in wgpu_upload: the first in a round pays for the memory
        // the previous round released.
        for rep in 0..reps {
            if rep % 2 == 1 {
                theirs.push(bare());
                floors.push(floor());
            }
            let t0 = Instant::now();
            let t = gpu.compact_on_gpu(&view).unwrap();
            wait();
            ours.push(t0.elapsed().as_secs_f64());
            drop(t);
            if rep % 2 == 0 {
                theirs.push(bare());
                floors.push(floor());
            }
        }
        let (o, t, f) = (median(ours), median(theirs), median(floors));
        let gbs = |s: f64| BYTES as f64 / s / 1e9;
        println!(
            "{:34} dlport {:5.2} GB/s, copyBufferToBuffer {:5.2} GB/s, identity kernel {:5.2} GB/s: dlport / copy {:.3}, dlport / identity {:.2}",
            c.name,
            gbs(o.0),
            gbs(t.0),
            gbs(f.0),
            t.0 / o.0,
            f.0 / o.0
        );
        rows.push(serde_json::json!({
            "case": c.name, "ours": [o.0, o.1, o.2], "bare": [t.0, t.1, t.2],
            "identity": [f.0, f.1, f.2],
        }));
    }
    let json = serde_json::json!({
        "adapter": gpu.describe(), "bytes": BYTES, "rows": rows,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("wgpu_compact.json"),
        serde_json::to_string_pretty(&json).unwrap(),
    )
    .unwrap();
}
