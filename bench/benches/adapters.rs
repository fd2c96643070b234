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
//! [`Paired`], which alternates the two sides in short rounds and takes the median of their
//! per-round ratio. A shared machine's CPU changes speed between criterion's measurements of
//! the two sides; within one short round both sides run at the same speed, so the paired ratio
//! is the one the report compares with the goal. It is written to
//! `target/criterion/adapters-paired.json`.

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

fn ndarray(c: &mut Criterion, paired: &mut Paired) {
    use dlpark::allocation::dynamic::Initialized;
    use ndarray::{Array2, ArrayViewD};

    row(
        c,
        paired,
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
        c,
        paired,
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

fn image(c: &mut Criterion, paired: &mut Paired) {
    use dlpark::allocation::fixed::Initialized;
    use image::{ImageBuffer, Rgb};

    row(
        c,
        paired,
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
        c,
        paired,
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

fn candle(c: &mut Criterion, paired: &mut Paired) {
    use candle_core::{Device as Cpu, Tensor};
    use dlpark::allocation::dynamic::Initialized;

    for side in [64usize, 512] {
        let x = Tensor::zeros((side, side), candle_core::DType::F32, &Cpu::Cpu).unwrap();
        row(
            c,
            paired,
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
            c,
            paired,
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
    /// runs ([`Paired::OPS`] in a round).
    Batched(&'a dyn Fn() -> I),
}

/// A side of a row: its name and one operation.
type Side<'a, I> = (&'a str, &'a dyn Fn(I));

/// Times one row: by criterion, each side on its own, then by [`Paired`].
fn row<I>(
    c: &mut Criterion,
    paired: &mut Paired,
    group: &str,
    setup: Setup<'_, I>,
    ours: Side<'_, I>,
    peer: Side<'_, I>,
) {
    let mut g = c.benchmark_group(group);
    for (name, op) in [ours, peer] {
        g.bench_function(name, |b| match &setup {
            Setup::PerOp(make) => b.iter_batched(make, op, BatchSize::PerIteration),
            Setup::Batched(make) => b.iter(|| op(make())),
        });
    }
    g.finish();
    paired.row(group, &setup, [ours.1, peer.1]);
}

/// The paired timing: rounds that time [`Self::OPS`] operations of one side, then of the other
/// (the order reversing every round), until [`Self::ROUNDS`] rounds or [`Self::BUDGET`] have
/// passed. A row's ratio is the median over rounds of dlport's time against dlpark's in the
/// same round.
#[derive(Default)]
struct Paired {
    rows: Vec<serde_json::Value>,
}

impl Paired {
    const OPS: usize = 32;
    const ROUNDS: usize = 2_000;
    const BUDGET: Duration = Duration::from_secs(3);

    fn row<I>(&mut self, group: &str, setup: &Setup<'_, I>, ops: [&dyn Fn(I); 2]) {
        let time = |op: &dyn Fn(I)| -> Duration {
            match setup {
                Setup::PerOp(make) => (0..Self::OPS)
                    .map(|_| {
                        let input = make();
                        let start = Instant::now();
                        op(input);
                        start.elapsed()
                    })
                    .sum(),
                Setup::Batched(make) => {
                    let start = Instant::now();
                    for _ in 0..Self::OPS {
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
        for round in 0..Self::ROUNDS {
            if start.elapsed() > Self::BUDGET {
                break;
            }
            let (a, b) = if round % 2 == 0 {
                let a = time(ops[0]);
                (a, time(ops[1]))
            } else {
                let b = time(ops[1]);
                (time(ops[0]), b)
            };
            let per_op = |d: Duration| d.as_secs_f64() * 1e9 / Self::OPS as f64;
            ours.push(per_op(a));
            peer.push(per_op(b));
            ratios.push(a.as_secs_f64() / b.as_secs_f64());
        }
        let rounds = ratios.len();
        let [ratio_p25, ratio, ratio_p75] = quartiles(&mut ratios);
        println!(
            "{group}: paired ratio {ratio:.3} [{ratio_p25:.3}, {ratio_p75:.3}] ({rounds} rounds)"
        );
        self.rows.push(serde_json::json!({
            "group": group,
            "rounds": rounds,
            "ops_per_round": Self::OPS,
            "dlport_ns": quartiles(&mut ours)[1],
            "dlpark_ns": quartiles(&mut peer)[1],
            "ratio": ratio,
            "ratio_p25": ratio_p25,
            "ratio_p75": ratio_p75,
        }));
    }

    /// Writes `target/criterion/adapters-paired.json`, where criterion keeps its estimates.
    fn write(&self) {
        let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
            std::path::PathBuf::from,
        );
        let dir = target.join("criterion");
        std::fs::create_dir_all(&dir).expect("create target/criterion");
        let path = dir.join("adapters-paired.json");
        std::fs::write(&path, serde_json::to_string_pretty(&self.rows).unwrap())
            .expect("write adapters-paired.json");
        println!("wrote {}", path.display());
    }
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

fn main() {
    let mut c = config().configure_from_args();
    let mut paired = Paired::default();
    ndarray(&mut c, &mut paired);
    image(&mut c, &mut paired);
    candle(&mut c, &mut paired);
    c.final_summary();
    paired.write();
}
