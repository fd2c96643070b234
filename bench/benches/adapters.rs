//! The adapters: dlport-core's ndarray, image and candle adapters against dlpark 0.10's for the
//! same crates, export and import, in the same run.
//!
//! `cargo bench -p dlport-bench --bench adapters --features adapters`
//!
//! Export: a fresh container (made outside the timing) → a DLPack tensor → released (the
//! container dropped by the deleter). One container is made per timed export
//! (`BatchSize::PerIteration`): with a batch of thousands made first, the time would be that of
//! freeing their 12-16 KiB buffers in a heap the batch fragments, which varies from run to run
//! for both libraries alike (BENCHMARKS.md, "Adapters"). Import: a foreign tensor (`import_export::Producer`: a
//! reusable versioned header whose deleter only counts) → validated → the adapter's container or view → released.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
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

fn ndarray(c: &mut Criterion) {
    use dlpark::allocation::dynamic::Initialized;
    use ndarray::{Array2, ArrayViewD};

    let mut g = c.benchmark_group("ndarray: export Array2<f32> 64×64 → DLPack → release");
    let make = || Array2::<f32>::zeros((64, 64));
    g.bench_function("dlport", |b| {
        b.iter_batched(
            make,
            |a| drop(black_box(ManagedTensor::try_from(a).unwrap())),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("dlpark 0.10", |b| {
        b.iter_batched(
            make,
            |a| {
                let init: Initialized<ParkVersioned> = Box::new(a).try_into().unwrap();
                // SAFETY: dlpark's builder filled every field from the array it owns.
                drop(black_box(unsafe { init.finish() }))
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();

    let mut foreign = Producer::with(DataType::FLOAT32, &[64, 64], 0.0f32);
    let p = foreign.ptr();
    let mut g = c.benchmark_group("ndarray: import f32 64×64 → ArrayViewD → release");
    g.bench_function("dlport", |b| {
        b.iter(|| {
            // SAFETY: the foreign tensor outlives the benchmark; its deleter does nothing.
            let t = unsafe { dlport_in(p) };
            let v = t.as_ndarray::<f32>().unwrap();
            black_box(v[[63, 63]]);
        })
    });
    g.bench_function("dlpark 0.10", |b| {
        b.iter(|| {
            // SAFETY: as above.
            let t = unsafe { dlpark_in(p) };
            // SAFETY: the view borrows the tensor, which stays alive and unchanged.
            let v = unsafe { ArrayViewD::<f32>::try_from_dlpack(&t, ()) }.unwrap();
            black_box(v[[63, 63]]);
        })
    });
    g.finish();
}

fn image(c: &mut Criterion) {
    use dlpark::allocation::fixed::Initialized;
    use image::{ImageBuffer, Rgb};

    let mut g = c.benchmark_group("image: export Rgb<u8> 64×64 → DLPack → release");
    let make = || ImageBuffer::<Rgb<u8>, Vec<u8>>::new(64, 64);
    g.bench_function("dlport", |b| {
        b.iter_batched(
            make,
            |img| drop(black_box(ManagedTensor::try_from(img).unwrap())),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("dlpark 0.10", |b| {
        b.iter_batched(
            make,
            |img| {
                let init: Initialized<ParkVersioned, 3> = Box::new(img).try_into().unwrap();
                // SAFETY: dlpark's builder filled every field from the image it owns.
                drop(black_box(unsafe { init.finish() }))
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();

    let mut foreign = Producer::with(DataType::UINT8, &[64, 64, 3], 0u8);
    let p = foreign.ptr();
    let mut g =
        c.benchmark_group("image: import u8 64×64×3 → ImageBuffer<Rgb<u8>, &[u8]> → release");
    g.bench_function("dlport", |b| {
        b.iter(|| {
            // SAFETY: the foreign tensor outlives the benchmark; its deleter does nothing.
            let t = unsafe { dlport_in(p) };
            let img = t.as_image::<Rgb<u8>>().unwrap();
            black_box(img.get_pixel(63, 63));
        })
    });
    g.bench_function("dlpark 0.10", |b| {
        b.iter(|| {
            // SAFETY: as above.
            let t = unsafe { dlpark_in(p) };
            // SAFETY: the image borrows the tensor, which stays alive and unchanged.
            let img = unsafe { ImageBuffer::<Rgb<u8>, &[u8]>::try_from_dlpack(&t, ()) }.unwrap();
            black_box(img.get_pixel(63, 63));
        })
    });
    g.finish();
}

fn candle(c: &mut Criterion) {
    use candle_core::{Device as Cpu, Tensor};
    use dlpark::allocation::dynamic::Initialized;

    for side in [64usize, 512] {
        let x = Tensor::zeros((side, side), candle_core::DType::F32, &Cpu::Cpu).unwrap();
        let mut g = c.benchmark_group(format!(
            "candle: export Tensor f32 {side}×{side} → DLPack → release"
        ));
        g.bench_function("dlport", |b| {
            b.iter_batched(
                || x.clone(),
                |t| drop(black_box(ManagedTensor::try_from(t).unwrap())),
                BatchSize::PerIteration,
            )
        });
        g.bench_function("dlpark 0.10", |b| {
            b.iter_batched(
                || x.clone(),
                |t| {
                    let init: Initialized<ParkVersioned> = Box::new(t).try_into().unwrap();
                    // SAFETY: dlpark's builder filled every field from the tensor it owns.
                    drop(black_box(unsafe { init.finish() }))
                },
                BatchSize::PerIteration,
            )
        });
        g.finish();

        let mut foreign = Producer::with(DataType::FLOAT32, &[side as i64, side as i64], 0.0f32);
        let p = foreign.ptr();
        let mut g = c.benchmark_group(format!(
            "candle: import f32 {side}×{side} → Tensor (copies) → release"
        ));
        g.bench_function("dlport (one copy)", |b| {
            b.iter(|| {
                // SAFETY: the foreign tensor outlives the benchmark; its deleter does nothing.
                let t = unsafe { dlport_in(p) };
                black_box(t.to_candle().unwrap());
            })
        });
        g.bench_function("dlpark 0.10 (two copies)", |b| {
            b.iter(|| {
                // SAFETY: as above.
                let t = unsafe { dlpark_in(p) };
                // SAFETY: the tensor stays alive and unchanged during the copy.
                black_box(unsafe { Tensor::try_from_dlpack(&t, ()) }.unwrap());
            })
        });
        g.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = ndarray, image, candle }
criterion_main!(benches);
