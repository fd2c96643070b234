//! Host copy throughput: dlport's strided → compact copies and page-locked staging, against
//! `memcpy` of the same bytes, measured in the same run into existing (pre-faulted)
//! destinations. Writes `target/bench/copies.json` and prints a table.
//!
//! `cargo run --release -p dlport-bench --bin copies [--quick]`

use std::time::Instant;

use dlport_core::backend::copy_to_compact;
use dlport_core::{DataType, ExportBuilder, TensorRef};
use dlport_native::pinned::PinnedBackend;

/// Median and spread of repeated timings, in seconds.
struct Stats {
    median: f64,
    p25: f64,
    p75: f64,
}

fn measure(reps: usize, mut f: impl FnMut()) -> Stats {
    f(); // warm-up: faults pages in, fills caches and TLBs
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    let q = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
    Stats {
        median: q(0.5),
        p25: q(0.25),
        p75: q(0.75),
    }
}

fn memcpy(src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(src);
    std::hint::black_box(dst);
}

fn copy(view: &TensorRef<'_>, dst: &mut [u8]) {
    copy_to_compact(view, dst).unwrap();
    std::hint::black_box(dst);
}

struct Row {
    case: &'static str,
    bytes: usize,
    ours: Stats,
    memcpy: Stats,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 5 } else { 15 };
    // Square f32 matrices from 64 KiB to 64 MiB.
    let sides: &[usize] = if quick {
        &[128, 1024, 4096]
    } else {
        &[128, 256, 512, 1024, 2048, 4096]
    };
    let mut rows = Vec::new();
    for &side in sides {
        let n = side * side;
        let bytes = n * 4;
        let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let src_bytes: Vec<u8> = src.iter().flat_map(|x| x.to_ne_bytes()).collect();
        // The destination dlport's CPU backend would allocate: 64-byte aligned (CPU_ALIGN).
        let mut dst_buf =
            dlport_core::backend::AlignedBuffer::zeroed(bytes, dlport_core::backend::CPU_ALIGN)
                .unwrap();
        let dst = dst_buf.as_mut_slice();
        let m = measure(reps, || memcpy(&src_bytes, dst));

        // Transpose: a (side, side) view with strides (1, side).
        let t = ExportBuilder::new(
            src_bytes.clone(),
            DataType::FLOAT32,
            &[side as i64, side as i64],
        )
        .strides(&[1, side as i64])
        .build()
        .unwrap();
        let ours = measure(reps, || copy(&t.view(), dst));
        rows.push(Row {
            case: "transpose",
            bytes,
            ours,
            memcpy: m,
        });

        // Negative strides in both axes (a[::-1, ::-1]).
        let last = (n - 1) as u64 * 4;
        let r = ExportBuilder::new(
            src_bytes.clone(),
            DataType::FLOAT32,
            &[side as i64, side as i64],
        )
        .strides(&[-(side as i64), -1])
        .byte_offset(last)
        .build()
        .unwrap();
        let ours = measure(reps, || copy(&r.view(), dst));
        let m = measure(reps, || memcpy(&src_bytes, dst));
        rows.push(Row {
            case: "negative strides",
            bytes,
            ours,
            memcpy: m,
        });

        // Broadcast: one row repeated (strides (0, 1)).
        let b = ExportBuilder::new(
            src_bytes[..side * 4].to_vec(),
            DataType::FLOAT32,
            &[side as i64, side as i64],
        )
        .strides(&[0, 1])
        .build()
        .unwrap();
        let ours = measure(reps, || copy(&b.view(), dst));
        let m = measure(reps, || memcpy(&src_bytes, dst));
        rows.push(Row {
            case: "broadcast",
            bytes,
            ours,
            memcpy: m,
        });

        // Page-locked staging: pageable → mlock-ed buffer, against memcpy into pageable memory.
        let pinned = PinnedBackend::mlock();
        match pinned.zeros(DataType::UINT8, &[bytes as i64]) {
            Ok(staging) => {
                let ptr = staging.buffer().ptr().cast::<u8>();
                // SAFETY: a fresh staging allocation of `bytes` bytes that only we reach.
                let stage = unsafe { std::slice::from_raw_parts_mut(ptr, bytes) };
                let c = ExportBuilder::new(src_bytes.clone(), DataType::UINT8, &[bytes as i64])
                    .build()
                    .unwrap();
                let ours = measure(reps, || copy(&c.view(), stage));
                let m = measure(reps, || memcpy(&src_bytes, dst));
                rows.push(Row {
                    case: "pinned staging",
                    bytes,
                    ours,
                    memcpy: m,
                });
            }
            Err(e) => eprintln!("pinned staging skipped at {bytes} bytes: {e}"),
        }
    }

    println!(
        "{:<18} {:>10} {:>10} {:>10} {:>8}",
        "case", "bytes", "ours GB/s", "memcpy", "ratio"
    );
    let mut json = Vec::new();
    for r in &rows {
        let gbs = |s: f64| r.bytes as f64 / s / 1e9;
        let ratio = r.memcpy.median / r.ours.median;
        println!(
            "{:<18} {:>10} {:>10.2} {:>10.2} {:>8.3}",
            r.case,
            r.bytes,
            gbs(r.ours.median),
            gbs(r.memcpy.median),
            ratio
        );
        json.push(serde_json::json!({
            "case": r.case, "bytes": r.bytes,
            "ours_s": {"median": r.ours.median, "p25": r.ours.p25, "p75": r.ours.p75},
            "memcpy_s": {"median": r.memcpy.median, "p25": r.memcpy.p25, "p75": r.memcpy.p75},
        }));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("copies.json"),
        serde_json::to_string_pretty(&json).unwrap(),
    )
    .unwrap();
}
