//! The adapters: dlport-core's ndarray, image and candle adapters against dlpark 0.10's for the
//! same crates, export and import, in the same run.
//!
//! `cargo bench -p dlport-bench --bench adapters --features adapters`
//!
//! Export: a fresh container (made outside the timing) → a DLPack tensor → released (the
//! container dropped by the deleter). One container is made per timed export
//! (`BatchSize::PerIteration`): with a batch of thousands made first, the time would be that of
//! freeing their 12-16 KiB buffers in a heap the batch fragments, which varies from run to run
//! for both libraries alike. Import: a foreign tensor (`import_export::Producer`: a reusable
//! versioned header whose deleter only counts) → validated → the adapter's container or view →
//! released.
//!
//! Each row is timed twice: by criterion, each side on its own (times and intervals), and by
//! [`paired`], which alternates the two sides in short rounds and takes the median of their
//! per-round ratio, in a process of its own for each row (a fresh heap). A shared machine's
//! CPU changes speed between criterion's measurements of the two sides; within one short round
//! both sides run at the same speed, so the paired ratio is the one the report compares with
//! the goal. It is written to `target/criterion/adapters-paired.json`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion};
use dlpark::TryFromDlpack;
use dlpark::ffi::DLManagedTensorVersioned as ParkVersioned;
use dlport_bench::import_export::Producer;
use dlport_core::abi::DLManagedTensorVersioned;
use dlport_core::{DataType, ManagedTensor};

/// dlport's import of a foreign tensor.
///
/// # Safety
/// `p` is a live tensor whose deleter may be called any number of times.
unsafe fn dlport_in(p: *mut DLManagedTensorVersioned) -> ManagedTensor {
    // SAFETY: the caller's contract.
    unsafe { ManagedTensor::from_raw_versioned(black_box(p)) }.unwrap()
}

/// dlpark's import of the same tensor.
///
/// # Safety
/// As [`dlport_in`].
unsafe fn dlpark_in(p: *mut DLManagedTensorVersioned) -> dlpark::versioned::Dlpack {
    // SAFETY: identical layout; the caller's contract.
    unsafe { dlpark::versioned::Dlpack::from_raw(black_box(p).cast::<ParkVersioned>()) }.unwrap()
}

fn ndarray(run: &mut Run) {
    use dlpark::allocation::dynamic::Initialized;
    use ndarray::{Array2, ArrayViewD};

    row(
        run,
        "ndarray: export Array2<f32> 64×64 → DLPack → release",
        Setup::PerOp(&|| Array2::<f32>::zeros((64, 64))),
        ("dlport", &|a| {
            drop(black_box(ManagedTensor::try_from(a).unwrap()))
        }),
        ("dlpark 0.10", &|a| {
            let init: Initialized<ParkVersioned> = Box::new(a).try_into().unwrap();
            // SAFETY: dlpark's builder filled every field from the array it owns.
            drop(black_box(unsafe { init.finish() }))
        }),
    );

    let mut foreign = Producer::with(DataType::FLOAT32, &[64, 64], 0.0f32);
    let p = foreign.ptr();
    row(
        run,
        "ndarray: import f32 64×64 → ArrayViewD → release",
        Setup::Batched(&|| ()),
        ("dlport", &|()| {
            // SAFETY: the foreign tensor outlives the benchmark; its deleter does nothing.
            let t = unsafe { dlport_in(p) };
            let v = t.as_ndarray::<f32>().unwrap();
            black_box(v[[63, 63]]);
        }),
        ("dlpark 0.10", &|()| {
            // SAFETY: as above.
            let t = unsafe { dlpark_in(p) };
            // SAFETY: the view borrows the tensor, which stays alive and unchanged.
            let v = unsafe { ArrayViewD::<f32>::try_from_dlpack(&t, ()) }.unwrap();
            black_box(v[[63, 63]]);
        }),
    );
}

fn image(run: &mut Run) {
    use dlpark::allocation::fixed::Initialized;
    use image::{ImageBuffer, Rgb};

    row(
        run,
        "image: export Rgb<u8> 64×64 → DLPack → release",
        Setup::PerOp(&|| ImageBuffer::<Rgb<u8>, Vec<u8>>::new(64, 64)),
        ("dlport", &|img| {
            drop(black_box(ManagedTensor::try_from(img).unwrap()))
        }),
        ("dlpark 0.10", &|img| {
            let init: Initialized<ParkVersioned, 3> = Box::new(img).try_into().unwrap();
            // SAFETY: dlpark's builder filled every field from the image it owns.
            drop(black_box(unsafe { init.finish() }))
        }),
    );

    let mut foreign = Producer::with(DataType::UINT8, &[64, 64, 3], 0u8);
    let p = foreign.ptr();
    row(
        run,
        "image: import u8 64×64×3 → ImageBuffer<Rgb<u8>, &[u8]> → release",
        Setup::Batched(&|| ()),
        ("dlport", &|()| {
            // SAFETY: the foreign tensor outlives the benchmark; its deleter does nothing.
            let t = unsafe { dlport_in(p) };
            let img = t.as_image::<Rgb<u8>>().unwrap();
            black_box(img.get_pixel(63, 63));
        }),
        ("dlpark 0.10", &|()| {
            // SAFETY: as above.
            let t = unsafe { dlpark_in(p) };
            // SAFETY: the image borrows the tensor, which stays alive and unchanged.
            let img = unsafe { ImageBuffer::<Rgb<u8>, &[u8]>::try_from_dlpack(&t, ()) }.unwrap();
            black_box(img.get_pixel(63, 63));
        }),
    );
}

fn candle(run: &mut Run) {
    use candle_core::{Device as Cpu, Tensor};
    use dlpark::allocation::dynamic::Initialized;

    for side in [64usize, 512] {
        let x = Tensor::zeros((side, side), candle_core::DType::F32, &Cpu::Cpu).unwrap();
        row(
            run,
            &format!("candle: export Tensor f32 {side}×{side} → DLPack → release"),
            Setup::PerOp(&|| x.clone()),
            ("dlport", &|t| {
                drop(black_box(ManagedTensor::try_from(t).unwrap()))
            }),
            ("dlpark 0.10", &|t| {
                let init: Initialized<ParkVersioned> = Box::new(t).try_into().unwrap();
                // SAFETY: dlpark's builder filled every field from the tensor it owns.
                drop(black_box(unsafe { init.finish() }))
            }),
        );

        let mut foreign = Producer::with(DataType::FLOAT32, &[side as i64, side as i64], 0.0f32);
        let p = foreign.ptr();
        row(
            run,
            &format!("candle: import f32 {side}×{side} → Tensor (copies) → release"),
            Setup::Batched(&|| ()),
            ("dlport (one copy)", &|()| {
                // SAFETY: the foreign tensor outlives the benchmark; its deleter does nothing.
                let t = unsafe { dlport_in(p) };
                black_box(t.to_candle().unwrap());
            }),
            ("dlpark 0.10 (two copies)", &|()| {
                // SAFETY: as above.
                let t = unsafe { dlpark_in(p) };
                // SAFETY: the tensor stays alive and unchanged during the copy.
                black_box(unsafe { Tensor::try_from_dlpack(&t, ()) }.unwrap());
            }),
        );
    }
}

/// What one operation of a row consumes.
enum Setup<'a, I> {
    /// A fresh input per operation, made outside the timing; each operation is timed alone.
    PerOp(&'a dyn Fn() -> I),
    /// An input too cheap to count (`|| ()`), made inside the timing: operations are timed in
    /// runs ([`OPS`] in a round of the paired timing).
    Batched(&'a dyn Fn() -> I),
}

/// A side of a row: its name and one operation.
type Side<'a, I> = (&'a str, &'a dyn Fn(I));

/// How this process times the rows.
enum Run {
    /// Criterion, each side on its own, every row.
    Criterion(Box<Criterion>),
    /// The paired timing of row `row` alone ([`PAIRED_ROW`]); `seen` counts the rows passed.
    Paired { row: usize, seen: usize },
}

/// The variable that makes a run of the bench time one row's pairs and print them as a JSON
/// line: [`main`] runs each row's paired timing in a process of its own, so that every row
/// starts from a fresh heap rather than the one criterion's runs leave (an export's release
/// frees a 12-16 KiB buffer, whose cost depends on its neighbours in the heap).
const PAIRED_ROW: &str = "DLPORT_ADAPTERS_PAIRED_ROW";

/// Times one row, as `run` says.
fn row<I>(run: &mut Run, group: &str, setup: Setup<'_, I>, ours: Side<'_, I>, peer: Side<'_, I>) {
    match run {
        Run::Criterion(c) => {
            let mut g = c.benchmark_group(group);
            for (name, op) in [ours, peer] {
                g.bench_function(name, |b| match &setup {
                    Setup::PerOp(make) => b.iter_batched(make, op, BatchSize::PerIteration),
                    Setup::Batched(make) => b.iter(|| op(make())),
                });
            }
            g.finish();
        }
        Run::Paired { row, seen } => {
            if *row == *seen {
                println!("{}", paired(group, &setup, [ours.1, peer.1]));
            }
            *seen += 1;
        }
    }
}

/// Rounds of a row's paired timing in one process, at most.
const ROUNDS: usize = 1_000;
/// Operations of one side in a round.
const OPS: usize = 32;
/// Time a row's paired timing may take in one process.
const BUDGET: Duration = Duration::from_secs(1);
/// Processes that time each row's pairs. Where the heap and the stack lie differs from one
/// process to the next, and an operation's time with it (by up to 1.6 × for the same binary).
/// The row's ratio is the median over processes.
const PROCESSES: usize = 7;

/// The paired timing: rounds that time [`OPS`] operations of one side, then of the other (the
/// order reversing every round), until [`ROUNDS`] rounds or [`BUDGET`] have passed. A row's
/// ratio is the median over rounds of dlport's time against dlpark's in the same round.
fn paired<I>(group: &str, setup: &Setup<'_, I>, ops: [&dyn Fn(I); 2]) -> serde_json::Value {
    let time = |op: &dyn Fn(I)| -> Duration {
        match setup {
            Setup::PerOp(make) => (0..OPS)
                .map(|_| {
                    let input = make();
                    let start = Instant::now();
                    op(input);
                    start.elapsed()
                })
                .sum(),
            Setup::Batched(make) => {
                let start = Instant::now();
                for _ in 0..OPS {
                    op(make());
                }
                start.elapsed()
            }
        }
    };
    // Warm-up: caches, branch predictors and the allocator's free lists, for both sides.
    for op in ops {
        time(op);
    }
    let (mut ours, mut peer, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    for round in 0..ROUNDS {
        if start.elapsed() > BUDGET {
            break;
        }
        let (a, b) = if round % 2 == 0 {
            let a = time(ops[0]);
            (a, time(ops[1]))
        } else {
            let b = time(ops[1]);
            (time(ops[0]), b)
        };
        let per_op = |d: Duration| d.as_secs_f64() * 1e9 / OPS as f64;
        ours.push(per_op(a));
        peer.push(per_op(b));
        ratios.push(a.as_secs_f64() / b.as_secs_f64());
    }
    let [ratio_p25, ratio, ratio_p75] = quartiles(&mut ratios);
    serde_json::json!({
        "group": group,
        "rounds": ratios.len(),
        "ops_per_round": OPS,
        "dlport_ns": quartiles(&mut ours)[1],
        "dlpark_ns": quartiles(&mut peer)[1],
        "ratio": ratio,
        "ratio_p25": ratio_p25,
        "ratio_p75": ratio_p75,
    })
}

/// Every row's paired timing, each in [`PROCESSES`] new processes of this bench, written to
/// `target/criterion/adapters-paired.json` (where criterion keeps its estimates).
fn paired_rows() {
    let exe = std::env::current_exe().expect("the bench's own path");
    let one = |row: usize| -> Option<serde_json::Value> {
        let out = std::process::Command::new(&exe)
            .env(PAIRED_ROW, row.to_string())
            .output()
            .expect("run the bench for one row's paired timing");
        assert!(
            out.status.success(),
            "row {row}'s paired timing failed: {out:?}"
        );
        // No line: there is no row with this index.
        let line = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()?
            .to_owned();
        Some(serde_json::from_str(&line).expect("a row's JSON line"))
    };
    let number = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    for row in 0.. {
        let Some(first) = one(row) else { break };
        let mut runs = vec![first];
        runs.extend((1..PROCESSES).map(|_| one(row).expect("the same row again")));
        let median_of =
            |key: &str| quartiles(&mut runs.iter().map(|v| number(v, key)).collect::<Vec<_>>())[1];
        let ratios: Vec<f64> = runs.iter().map(|v| number(v, "ratio")).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                (lo.min(r), hi.max(r))
            });
        let group = runs[0]["group"].as_str().unwrap_or("?").to_owned();
        let ratio = median_of("ratio");
        println!("{group}: paired ratio {ratio:.3}, {lo:.3}-{hi:.3} over {PROCESSES} processes");
        rows.push(serde_json::json!({
            "group": group,
            "processes": PROCESSES,
            "ops_per_round": OPS,
            "dlport_ns": median_of("dlport_ns"),
            "dlpark_ns": median_of("dlpark_ns"),
            "ratio": ratio,
            "ratio_min": lo,
            "ratio_max": hi,
            "runs": runs,
        }));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        std::path::PathBuf::from,
    );
    let dir = target.join("criterion");
    std::fs::create_dir_all(&dir).expect("create target/criterion");
    let path = dir.join("adapters-paired.json");
    std::fs::write(&path, serde_json::to_string_pretty(&rows).unwrap())
        .expect("write adapters-paired.json");
    println!("wrote {}", path.display());
}

/// The 25th, 50th and 75th percentiles (nearest rank).
fn quartiles(v: &mut [f64]) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.25), at(0.5), at(0.75)]
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2))
}

fn rows(run: &mut Run) {
    ndarray(run);
    image(run);
    candle(run);
}

fn main() {
    if let Some(row) = std::env::var_os(PAIRED_ROW) {
        let row = row
            .to_str()
            .and_then(|r| r.parse().ok())
            .expect("a row index");
        rows(&mut Run::Paired { row, seen: 0 });
        return;
    }
    paired_rows();
    let mut run = Run::Criterion(Box::new(config().configure_from_args()));
    rows(&mut run);
    if let Run::Criterion(c) = run {
        c.final_summary();
    }
}
