//! Exchange overhead: dlport against dlpark 0.10 and hand-written floors, in the same run.
//!
//! `cargo bench -p dlport-bench --bench exchange`

use std::ffi::c_void;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use dlport_core::Registry;
use dlport_core::abi::{DLManagedTensorVersioned, DLTensor};
use dlport_core::{DLPackVersion, DataType, Device, DeviceType, ExportBuilder, ManagedTensor};

static DELETED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_deleter(_: *mut DLManagedTensorVersioned) {
    DELETED.fetch_add(1, Ordering::Relaxed);
}

/// A reusable producer tensor: versioned, ndim 4, float32, on the CPU. Its deleter only counts,
/// so the same struct can be imported and released over and over.
struct Producer {
    header: Box<DLManagedTensorVersioned>,
    _shape: Box<[i64; 4]>,
    _strides: Box<[i64; 4]>,
    _data: Vec<f32>,
}

fn producer() -> Producer {
    let mut shape = Box::new([2i64, 3, 4, 5]);
    let mut strides = Box::new([60i64, 20, 5, 1]);
    let mut data = vec![1.0f32; 120];
    let header = Box::new(DLManagedTensorVersioned {
        version: DLPackVersion::new(1, 3),
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(count_deleter),
        flags: 0,
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: Device::cpu(),
            ndim: 4,
            dtype: DataType::FLOAT32,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        },
    });
    Producer {
        header,
        _shape: shape,
        _strides: strides,
        _data: data,
    }
}

fn import(c: &mut Criterion) {
    let mut p = producer();
    let ptr: *mut DLManagedTensorVersioned = &mut *p.header;
    let mut g = c.benchmark_group("import+validate+read+release (versioned, ndim 4)");
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
            let t = unsafe { dlpark::versioned::Dlpack::from_raw(black_box(ptr).cast()) }.unwrap();
            let v = t.validate().unwrap();
            black_box((v.shape(), v.strides(), v.dtype()));
        })
    });
    g.bench_function("floor (read fields, call deleter)", |b| {
        b.iter(|| {
            let m = black_box(ptr);
            // SAFETY: the producer outlives the benchmark.
            unsafe {
                let t = &(*m).dl_tensor;
                let shape = std::slice::from_raw_parts(t.shape, t.ndim as usize);
                let strides = std::slice::from_raw_parts(t.strides, t.ndim as usize);
                black_box((shape, strides, t.dtype));
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        })
    });
    g.finish();

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

/// The hand-written export floor: one box with header, dims and the Vec; the deleter frees it.
#[repr(C)]
struct FloorCtx {
    header: DLManagedTensorVersioned,
    dims: [i64; 2],
    data: Vec<f32>,
}

unsafe extern "C" fn floor_deleter(m: *mut DLManagedTensorVersioned) {
    // SAFETY: created by Box::into_raw in `floor_export`, released once.
    drop(unsafe { Box::from_raw(m.cast::<FloorCtx>()) });
}

fn floor_export(data: Vec<f32>) -> *mut DLManagedTensorVersioned {
    let n = data.len() as i64;
    let ctx = Box::into_raw(Box::new(FloorCtx {
        header: DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(floor_deleter),
            flags: 0,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: Device::cpu(),
                ndim: 1,
                dtype: DataType::FLOAT32,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        dims: [n, 1],
        data,
    }));
    // SAFETY: fresh, exclusively owned block.
    unsafe {
        (*ctx).header.dl_tensor.data = (*ctx).data.as_mut_ptr().cast();
        (*ctx).header.dl_tensor.shape = std::ptr::addr_of_mut!((*ctx).dims).cast();
        (*ctx).header.dl_tensor.strides = std::ptr::addr_of_mut!((*ctx).dims).cast::<i64>().add(1);
        (*ctx).header.manager_ctx = ctx.cast::<c_void>();
    }
    ctx.cast()
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
        b.iter(|| {
            let mut v = vec![1.0f32; 120];
            let data = v.as_mut_ptr();
            let mut alloc = dlpark::allocation::fixed::Allocation::<
                dlpark::ffi::DLManagedTensorVersioned,
                1,
            >::allocate()
            .unwrap();
            alloc.shape_mut()[0] = 120;
            alloc.strides_mut()[0] = 1;
            let mut init = alloc.initialize(Box::new(v));
            init.set_data(data.cast())
                .set_dtype(dlpark::ffi::DLDataType {
                    code: dlpark::ffi::DLDataTypeCode(2),
                    bits: 32,
                    lanes: 1,
                })
                .set_device(dlpark::ffi::DLDevice {
                    device_type: dlpark::ffi::DLDeviceType::CPU,
                    device_id: 0,
                });
            // SAFETY: data, shape and strides stay valid until the tensor drops.
            let t = unsafe { init.finish() };
            drop(black_box(t));
        })
    });
    g.bench_function("floor (hand-written)", |b| {
        b.iter(|| {
            let m = floor_export(vec![1.0f32; 120]);
            // SAFETY: our floor export, released once.
            unsafe { (*m).deleter.unwrap()(black_box(m)) };
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
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = import, export, convert_and_resolve }
criterion_main!(benches);
