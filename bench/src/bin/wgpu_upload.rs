//! Upload and readback of 64 MiB through dlport's WebGPU backend, against a bare wgpu program
//! that does only that (create a buffer, write it, copy to a staging buffer, map, read), in the
//! same run on the same adapter (lavapipe here). Writes `target/bench/wgpu.json`.
//!
//! `cargo run --release -p dlport-bench --features wgpu --bin wgpu_upload`

use std::time::Instant;

use dlport_core::{DataType, ExportBuilder};
use dlport_wasm::WebGpuBackend;

const BYTES: usize = 64 << 20;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (q(0.5), q(0.25), q(0.75))
}

fn bare(device: &wgpu::Device, queue: &wgpu::Queue, data: &[u8]) -> (f64, f64) {
    let t0 = Instant::now();
    let buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: data.len() as u64,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&buf, 0, data);
    queue.submit(std::iter::empty());
    device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    let up = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: data.len() as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(&buf, 0, &staging, 0, data.len() as u64);
    queue.submit([enc.finish()]);
    staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    let out = staging.slice(..).get_mapped_range().unwrap().to_vec();
    staging.unmap();
    let down = t1.elapsed().as_secs_f64();
    assert_eq!(out.len(), data.len());
    (up, down)
}

fn main() {
    let reps = 8;
    let b = WebGpuBackend::new_blocking().expect("a WebGPU adapter");
    println!("adapter: {}", b.gpu().describe());
    let data: Vec<u8> = (0..BYTES).map(|i| (i * 7) as u8).collect();
    let host = ExportBuilder::new(data.clone(), DataType::UINT8, &[BYTES as i64])
        .build()
        .unwrap();
    let (mut ours_up, mut ours_down, mut bare_up, mut bare_down) = (vec![], vec![], vec![], vec![]);
    // The order alternates: whichever program runs first in a round pays for the memory the
    // previous round released (measured here: 0.6× for whoever goes first, either way).
    for rep in 0..reps {
        if rep % 2 == 1 {
            let (u, d) = bare(b.gpu().device(), b.gpu().queue(), &data);
            bare_up.push(u);
            bare_down.push(d);
        }
        let t0 = Instant::now();
        let t = b.gpu().upload(&host.view(), 0).unwrap();
        b.gpu()
            .device()
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        ours_up.push(t0.elapsed().as_secs_f64());
        let t1 = Instant::now();
        let back = b
            .download_blocking(&t.view().unwrap().tensor_ref())
            .unwrap();
        ours_down.push(t1.elapsed().as_secs_f64());
        assert!(back == data);
        if rep % 2 == 0 {
            let (u, d) = bare(b.gpu().device(), b.gpu().queue(), &data);
            bare_up.push(u);
            bare_down.push(d);
        }
    }
    let (ou, bu, od, bd) = (
        median(ours_up),
        median(bare_up),
        median(ours_down),
        median(bare_down),
    );
    let gbs = |s: f64| BYTES as f64 / s / 1e9;
    println!(
        "upload   dlport {:.2} GB/s, bare wgpu {:.2} GB/s, ratio {:.2}",
        gbs(ou.0),
        gbs(bu.0),
        bu.0 / ou.0
    );
    println!(
        "readback dlport {:.2} GB/s, bare wgpu {:.2} GB/s, ratio {:.2}",
        gbs(od.0),
        gbs(bd.0),
        bd.0 / od.0
    );
    let json = serde_json::json!({
        "adapter": b.gpu().describe(), "bytes": BYTES,
        "upload": {"ours": [ou.0, ou.1, ou.2], "bare": [bu.0, bu.1, bu.2]},
        "readback": {"ours": [od.0, od.1, od.2], "bare": [bd.0, bd.1, bd.2]},
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("wgpu.json"),
        serde_json::to_string_pretty(&json).unwrap(),
    )
    .unwrap();
}
