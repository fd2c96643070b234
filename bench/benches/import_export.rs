//! Exchange overhead: dlport against dlpark 0.10 and hand-written floors, in the same run.
//!
//! `cargo bench -p dlport-bench --bench import_export`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use dlport_bench::import_export::{
    LegacyProducer, Producer, dlpark_export, floor_export, floor_import, plain_import, release,
};
use dlport_core::abi::DeviceType;
use dlport_core::{Device, ExportBuilder, ManagedTensor, Registry};

/// The dimensions the import is measured at (`Producer::shape_for` gives the shapes).
const NDIMS: [usize; 4] = [1, 4, 16, 64];

fn import(c: &mut Criterion) {
    for ndim in NDIMS {
        let mut p = Producer::new(ndim);
        let ptr = p.ptr();
        let mut g = c.benchmark_group(format!(
            "import+validate+read+release (versioned, ndim {ndim})"
        ));
        g.bench_function("dlport", |b| {
            b.iter(|| {
                // SAFETY: the producer outlives the benchmark; its deleter only counts.
                let t = unsafe { ManagedTensor::from_raw_versioned(black_box(ptr)) }.unwrap();
                let v = t.view();
                black_box((v.shape(), v.raw_strides(), v.dtype()));
            })
        });
        g.bench_function("dlpark 0.10", |b| {
            b.iter(|| {
                // SAFETY: identical layout; the producer outlives the benchmark.
                let t =
                    unsafe { dlpark::versioned::Dlpack::from_raw(black_box(ptr).cast()) }.unwrap();
                let v = t.validate().unwrap();
                black_box((v.shape(), v.strides(), v.dtype()));
            })
        });
        g.bench_function("floor + checks (plain)", |b| {
            b.iter(|| {
                let m = black_box(ptr);
                // SAFETY: as above.
                let (_, shape, strides, dtype) = unsafe { plain_import(m) }.unwrap();
                black_box((shape, strides, dtype));
                // SAFETY: imported above, released once.
                unsafe { release(m) };
            })
        });
        g.bench_function("floor (read fields, call deleter)", |b| {
            b.iter(|| {
                // SAFETY: the producer outlives the benchmark; its deleter only counts.
                unsafe { floor_import(black_box(ptr)) };
            })
        });
        g.finish();
    }

    let mut p = Producer::new(4);
    let ptr = p.ptr();
    let mut g = c.benchmark_group("typed CPU slice of an imported tensor");
    g.bench_function("dlport as_slice", |b| {
        b.iter(|| {
            // SAFETY: as above.
            let t = unsafe { ManagedTensor::from_raw_versioned(black_box(ptr)) }.unwrap();
            black_box(t.as_slice::<f32>().unwrap().len());
        })
    });
    g.bench_function("dlpark cpu_slice", |b| {
        b.iter(|| {
            // SAFETY: as above.
            let t = unsafe { dlpark::versioned::Dlpack::from_raw(black_box(ptr).cast()) }.unwrap();
            // SAFETY: CPU memory of 120 f32 owned by the producer.
            black_box(unsafe { t.tensor().cpu_slice::<f32>() }.unwrap().len());
        })
    });
    g.finish();
}

fn export(c: &mut Criterion) {
    let mut g = c.benchmark_group("export Vec<f32; 120> -> DLPack -> release");
    g.bench_function("dlport", |b| {
        b.iter(|| {
            let v = vec![1.0f32; 120];
            let raw = ExportBuilder::from_vec(v, &[120])
                .build()
                .unwrap()
                .into_raw();
            // SAFETY: our own export, released once.
            unsafe { black_box(raw).release() };
        })
    });
    g.bench_function("dlpark 0.10", |b| {
        b.iter(|| drop(black_box(dlpark_export(vec![1.0f32; 120]))))
    });
    g.bench_function("floor (hand-written)", |b| {
        b.iter(|| {
            let m = floor_export(vec![1.0f32; 120]);
            // SAFETY: our floor export, released once.
            unsafe { release(black_box(m)) };
        })
    });
    g.finish();
}

fn convert_and_resolve(c: &mut Criterion) {
    let mut g = c.benchmark_group("conversion and dispatch");
    g.bench_function("legacy -> versioned -> release", |b| {
        b.iter(|| {
            let t = ExportBuilder::from_vec(vec![0u8; 64], &[64])
                .build_legacy()
                .unwrap();
            black_box(t.into_versioned().unwrap());
        })
    });
    g.bench_function(
        "export legacy -> release (baseline of the row above)",
        |b| {
            b.iter(|| {
                black_box(
                    ExportBuilder::from_vec(vec![0u8; 64], &[64])
                        .build_legacy()
                        .unwrap(),
                );
            })
        },
    );
    let mut lp = LegacyProducer::new();
    let lptr = lp.ptr();
    g.bench_function("foreign legacy import -> versioned -> release", |b| {
        b.iter(|| {
            // SAFETY: the producer outlives the benchmark; its deleter only counts.
            let t = unsafe { ManagedTensor::from_raw_legacy(black_box(lptr)) }.unwrap();
            black_box(t.into_versioned().unwrap());
        })
    });
    g.bench_function(
        "foreign legacy import -> release (baseline of the row above)",
        |b| {
            b.iter(|| {
                // SAFETY: as above.
                black_box(unsafe { ManagedTensor::from_raw_legacy(black_box(lptr)) }.unwrap());
            })
        },
    );
    let mut registry = Registry::with_cpu();
    registry
        .register(Arc::new(dlport_testkit::xpu::Xpu::new()))
        .unwrap();
    g.bench_function("registry resolve (cpu, cuda_host, oneapi)", |b| {
        b.iter(|| {
            black_box(registry.resolve(black_box(Device::cpu())).unwrap());
            black_box(registry.resolve(black_box(Device::cuda_host())).unwrap());
            black_box(
                registry
                    .resolve(black_box(Device::new(DeviceType::ONEAPI, 0)))
                    .unwrap(),
            );
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3))
}

criterion_group! { name = benches; config = config(); targets = import, export, convert_and_resolve }
criterion_main!(benches);
