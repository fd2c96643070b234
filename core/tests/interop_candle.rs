//! The candle adapter against the real crate: exports of the same memory for every layout
//! candle makes, imports of every layout with one copy, every candle dtype.
// Candle's kernels (SIMD gemm, rayon) are outside what miri runs.
#![cfg(all(feature = "candle", not(miri)))]

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use candle_core::{CpuStorage, DType, Device as Cpu, IndexOp, Storage, Tensor};
use dlport_core::backend::Access;
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor};

fn storage_address(t: &Tensor) -> usize {
    let (s, l) = t.storage_and_layout();
    let Storage::Cpu(CpuStorage::F32(v)) = &*s else {
        panic!("f32 cpu")
    };
    v.as_ptr() as usize + l.start_offset() * 4
}

#[test]
fn exports_share_candle_memory_for_every_layout() {
    let base = Tensor::arange(0f32, 24., &Cpu::Cpu)
        .unwrap()
        .reshape((2, 3, 4))
        .unwrap();
    let cases: Vec<(&str, Tensor)> = vec![
        ("compact", base.clone()),
        ("transposed", base.transpose(1, 2).unwrap()),
        ("narrowed (offset)", base.narrow(2, 1, 2).unwrap()),
        ("indexed row (offset)", base.i((1, 2)).unwrap()),
        (
            "broadcast (zero stride)",
            base.i((0, 0)).unwrap().broadcast_as((3, 4)).unwrap(),
        ),
    ];
    for (name, x) in cases {
        let first = storage_address(&x);
        let expected: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
        let t = ManagedTensor::try_from(x.clone()).unwrap();
        let v = t.view();
        assert_eq!(v.first_element_address(), Some(first), "{name}: no copy");
        assert_eq!(
            v.shape().iter().map(|&e| e as usize).collect::<Vec<_>>(),
            x.dims(),
            "{name}"
        );
        assert_eq!(v.to_vec::<f32>().unwrap(), expected, "{name}");
        assert_eq!(
            t.access(),
            Access::Shared,
            "{name}: candle handles share the storage"
        );
        assert!(!t.is_read_only(), "{name}");
    }
}

#[test]
fn the_export_keeps_the_tensor_alive() {
    let raw = {
        let x = Tensor::new(&[1.5f32, 2.5], &Cpu::Cpu).unwrap();
        ManagedTensor::try_from(x).unwrap().into_raw()
    };
    // SAFETY: a live tensor, handed over once.
    let t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), [1.5, 2.5]);
}

#[test]
fn every_candle_dtype_both_ways() {
    let x = Tensor::arange(0u32, 6, &Cpu::Cpu)
        .unwrap()
        .reshape((2, 3))
        .unwrap();
    for (dtype, dl) in [
        (DType::U8, DataType::UINT8),
        (DType::U32, DataType::UINT32),
        (DType::I16, DataType::INT16),
        (DType::I32, DataType::INT32),
        (DType::I64, DataType::INT64),
        (DType::BF16, DataType::BFLOAT16),
        (DType::F16, DataType::FLOAT16),
        (DType::F32, DataType::FLOAT32),
        (DType::F64, DataType::FLOAT64),
        (DType::F8E4M3, DataType::FLOAT8_E4M3FN),
    ] {
        // Through f32: candle converts every dtype from it.
        let y = x.to_dtype(DType::F32).unwrap().to_dtype(dtype).unwrap();
        let t = ManagedTensor::try_from(y.clone()).unwrap();
        assert_eq!(t.view().dtype(), dl, "{dtype:?}");
        let back = t.to_candle().unwrap();
        assert_eq!(back.dtype(), dtype);
        let same = back.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(
            same,
            y.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap(),
            "{dtype:?}"
        );
        // Strided too (transposed), for the copy kernels.
        let yt = y.t().unwrap();
        let back = ManagedTensor::try_from(yt.clone())
            .unwrap()
            .to_candle()
            .unwrap();
        assert!(back.is_contiguous());
        assert_eq!(
            back.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap(),
            yt.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap(),
            "{dtype:?} transposed"
        );
    }
    // The byte-stored types candle cannot compute with: raw bytes both ways.
    for (dtype, dl, storage) in [
        (
            DType::F8E8M0,
            DataType::FLOAT8_E8M0FNU,
            CpuStorage::F8E8M0(vec![1, 2, 3, 4]),
        ),
        (
            DType::F4,
            DataType::FLOAT4_E2M1FN,
            CpuStorage::F4(vec![0x21, 0x43]),
        ),
        (
            DType::F6E2M3,
            DataType::FLOAT6_E2M3FN,
            CpuStorage::F6E2M3(vec![7, 8, 9]),
        ),
    ] {
        let y = Tensor::from_storage(
            Storage::Cpu(storage),
            4,
            candle_core::op::BackpropOp::none(),
            false,
        );
        let t = ManagedTensor::try_from(y).unwrap();
        assert_eq!(t.view().dtype(), dl);
        let back = t.to_candle().unwrap();
        assert_eq!(back.dtype(), dtype);
        assert_eq!(back.dims(), [4]);
    }
}

#[test]
fn imports_copy_once_into_a_compact_candle_tensor() {
    // Negative and zero strides, an offset: what candle itself cannot express.
    let t = ExportBuilder::from_vec((0..6).map(|i| i as f32).collect::<Vec<_>>(), &[2, 2, 3])
        .strides(&[-3, 0, 1])
        .byte_offset(12)
        .build()
        .unwrap();
    let y = t.to_candle().unwrap();
    assert!(y.is_contiguous());
    assert_eq!(
        y.to_vec3::<f32>().unwrap(),
        [[[3., 4., 5.], [3., 4., 5.]], [[0., 1., 2.], [0., 1., 2.]]]
    );
    drop(t); // the candle tensor owns its copy
    assert_eq!(y.sum_all().unwrap().to_scalar::<f32>().unwrap(), 30.);
    // Empty and 0-d.
    let t = ExportBuilder::from_vec(Vec::<f32>::new(), &[0, 3])
        .build()
        .unwrap();
    assert_eq!(t.to_candle().unwrap().dims(), [0, 3]);
    let t = ExportBuilder::from_vec(vec![7i64], &[]).build().unwrap();
    assert_eq!(t.to_candle().unwrap().to_scalar::<i64>().unwrap(), 7);
}

#[test]
fn errors_name_the_dtype_and_the_device() {
    let t = ExportBuilder::from_vec(vec![1u16, 2], &[2])
        .build()
        .unwrap();
    let e = t.to_candle().unwrap_err();
    assert_eq!(e.code(), 44, "{e}");
    assert!(
        e.to_string().contains("uint16") && e.to_string().contains("candle"),
        "{e}"
    );
    let freed = Arc::new(AtomicUsize::new(0));
    let t = dlport_testkit::xpu::counted_export(&freed, Device::cuda(0));
    assert_eq!(t.to_candle().unwrap_err().code(), 16);
    // A sub-byte tensor that is not compact cannot be exported.
    let y = Tensor::from_storage(
        Storage::Cpu(CpuStorage::F4(vec![0; 4])),
        (2, 4),
        candle_core::op::BackpropOp::none(),
        false,
    );
    let e = ManagedTensor::try_from(y.t().unwrap()).unwrap_err();
    assert_eq!(e.code(), 17, "{e}");
}
