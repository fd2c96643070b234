//! Host copy throughput: dlport's strided → compact copies and page-locked staging, against
//! `memcpy` of the same bytes, measured in the same run into existing (pre-faulted)
//! destinations, for 1-, 2-, 4- and 8-byte elements. Times are the copying thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`): memory stalls count, time the scheduler gives to other processes
//! on a shared machine does not (NumPy's script measures the same way). Writes
//! `target/bench/copies.json` and prints a table.
//!
//! `cargo run --release -p dlport-bench --bin copies [--quick]`

use dlport_core::{DataType, ExportBuilder, TensorRef};
use dlport_native::pinned::PinnedBackend;

/// Median and spread of repeated timings, in seconds.
struct Stats {
    median: f64,
    p25: f64,
    p75: f64,
}

/// The calling thread's CPU time, in seconds.
fn thread_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn measure(reps: usize, mut f: impl FnMut()) -> Stats {
    f(); // warm-up: faults pages in, fills caches and TLBs
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = thread_time();
            f();
            thread_time() - s
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
    view.copy_to_compact(dst).unwrap();
    std::hint::black_box(dst);
}

struct Row {
    case: &'static str,
    elem: usize,
    bytes: usize,
    ours: Stats,
    memcpy: Stats,
}

/// The element type of each size (NumPy's `bench/python/numpy_copies.py` uses the same).
fn dtype(elem: usize) -> DataType {
    match elem {
        1 => DataType::UINT8,
        2 => DataType::FLOAT16,
        4 => DataType::FLOAT32,
        _ => DataType::FLOAT64,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 5 } else { 15 };
    // From 64 KiB to 64 MiB: `side` rows of `side × 4 / elem` elements (square for f32).
    let sides: &[usize] = if quick {
        &[128, 1024, 4096]
    } else {
        &[128, 256, 512, 1024, 2048, 4096]
    };
    let mut rows = Vec::new();
    for &side in sides {
        let bytes = side * side * 4;
        let src_bytes: Vec<u8> = (0..bytes).map(|i| (i * 31 + i / 4093) as u8).collect();
        // The destination dlport's CPU backend would allocate: 64-byte aligned (CPU_ALIGN).
        let mut dst_buf =
            dlport_core::backend::AlignedBuffer::zeroed(bytes, dlport_core::backend::CPU_ALIGN)
                .unwrap();
        let dst = dst_buf.as_mut_slice();
        for elem in [1usize, 2, 4, 8] {
            let (r, c) = (side as i64, (side * 4 / elem) as i64);
            let dt = dtype(elem);
            // Transpose: an (r, c) view of a (c, r) row-major array, strides (1, r).
            let t = ExportBuilder::new(src_bytes.clone(), dt, &[r, c])
                .strides(&[1, r])
                .build()
                .unwrap();
            let m = measure(reps, || memcpy(&src_bytes, dst));
            let ours = measure(reps, || copy(&t.view(), dst));
            rows.push(Row {
                case: "transpose",
                elem,
                bytes,
                ours,
                memcpy: m,
            });
            drop(t);

            // Negative strides in both axes (a[::-1, ::-1]).
            let n = ExportBuilder::new(src_bytes.clone(), dt, &[r, c])
                .strides(&[-c, -1])
                .byte_offset((bytes - elem) as u64)
                .build()
                .unwrap();
            let m = measure(reps, || memcpy(&src_bytes, dst));
            let ours = measure(reps, || copy(&n.view(), dst));
            rows.push(Row {
                case: "negative strides",
                elem,
                bytes,
                ours,
                memcpy: m,
            });
            drop(n);

            // Negative strides in the last axis only (a[:, ::-1]): every row reversed.
            let n = ExportBuilder::new(src_bytes.clone(), dt, &[r, c])
                .strides(&[c, -1])
                .byte_offset(((c - 1) as usize * elem) as u64)
                .build()
                .unwrap();
            let m = measure(reps, || memcpy(&src_bytes, dst));
            let ours = measure(reps, || copy(&n.view(), dst));
            rows.push(Row {
                case: "reversed rows",
                elem,
                bytes,
                ours,
                memcpy: m,
            });
            drop(n);

            // Broadcast: one row repeated (strides (0, 1)).
            let b = ExportBuilder::new(src_bytes[..c as usize * elem].to_vec(), dt, &[r, c])
                .strides(&[0, 1])
                .build()
                .unwrap();
            let m = measure(reps, || memcpy(&src_bytes, dst));
            let ours = measure(reps, || copy(&b.view(), dst));
            rows.push(Row {
                case: "broadcast",
                elem,
                bytes,
                ours,
                memcpy: m,
            });
        }

        // Page-locked staging: pageable → mlock-ed buffer, against memcpy into the same buffer.
        let pinned = PinnedBackend::mlock();
        match pinned.zeros(DataType::UINT8, &[bytes as i64]) {
            Ok(staging) => {
                let ptr = staging.buffer().ptr().cast::<u8>();
                // SAFETY: a fresh staging allocation of `bytes` bytes that only we reach.
                let stage = unsafe { std::slice::from_raw_parts_mut(ptr, bytes) };
                let c = ExportBuilder::new(src_bytes.clone(), DataType::UINT8, &[bytes as i64])
                    .build()
                    .unwrap();
                // The reference copies into the same page-locked buffer: the same destination
                // pages, so only the copy routine differs.
                let m = measure(reps, || memcpy(&src_bytes, stage));
                let ours = measure(reps, || copy(&c.view(), stage));
                rows.push(Row {
                    case: "pinned staging",
                    elem: 1,
                    bytes,
                    ours,
                    memcpy: m,
                });
            }
            Err(e) => eprintln!("pinned staging skipped at {bytes} bytes: {e}"),
        }
    }

    println!(
        "{:<18} {:>4} {:>10} {:>10} {:>10} {:>8}",
        "case", "elem", "bytes", "ours GB/s", "memcpy", "ratio"
    );
    let mut json = Vec::new();
    for r in &rows {
        let gbs = |s: f64| r.bytes as f64 / s / 1e9;
        let ratio = r.memcpy.median / r.ours.median;
        println!(
            "{:<18} {:>4} {:>10} {:>10.2} {:>10.2} {:>8.3}",
            r.case,
            r.elem,
            r.bytes,
            gbs(r.ours.median),
            gbs(r.memcpy.median),
            ratio
        );
        json.push(serde_json::json!({
            "case": r.case, "elem": r.elem, "bytes": r.bytes,
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
