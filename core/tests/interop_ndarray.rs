//! The ndarray adapter against the real crate: exports without a copy for every stride sign,
//! imports of every layout DLPack expresses, mutable views only under the aliasing model.
#![cfg(feature = "ndarray")]

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use dlport_core::abi::RawManaged;
use dlport_core::backend::Access;
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor, TensorRef};
use half::{bf16, f16};
use ndarray::{Array, Array2, ArrayD, Axis, Dimension, IxDyn, array, s};

/// Hands the tensor to "a consumer" as a raw pointer and takes it back, as a foreign consumer
/// would (validated anew).
fn through_raw(t: ManagedTensor) -> ManagedTensor {
    let raw: RawManaged = t.into_raw();
    // SAFETY: a live tensor just exported, handed over once.
    unsafe { ManagedTensor::from_raw(raw) }.unwrap()
}

#[test]
fn owned_compact_exports_without_a_copy() {
    let a = Array::from_shape_fn((3, 4), |(i, j)| (i * 10 + j) as f32);
    let ptr = a.as_ptr() as usize;
    let t = ManagedTensor::try_from(a.clone()).unwrap();
    assert!(t.is_exclusive(), "the export owns the array alone");
    let t = through_raw(t);
    let v = t.view();
    assert_eq!(v.shape(), &[3, 4]);
    assert_eq!(v.raw_strides(), Some(&[4i64, 1][..]));
    assert_eq!(v.dtype(), DataType::FLOAT32);
    assert_eq!(
        t.access(),
        Access::Shared,
        "a consumer without IS_COPIED cannot know"
    );
    assert_eq!(t.as_slice::<f32>().unwrap(), a.as_slice().unwrap());
    let b = ManagedTensor::try_from(a).unwrap();
    assert_eq!(b.view().first_element_address(), Some(ptr), "no copy");
}

#[test]
fn negative_strides_export_without_a_copy() {
    let base = Array::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as i32);
    let cases: Vec<(&str, Array2<i32>)> = vec![
        ("rows flipped", {
            let mut a = base.clone();
            a.invert_axis(Axis(0));
            a
        }),
        ("both flipped", {
            let mut a = base.clone();
            a.invert_axis(Axis(0));
            a.invert_axis(Axis(1));
            a
        }),
        ("every other column, backwards", {
            let mut a = base.clone();
            a.slice_collapse(s![.., ..;-2]);
            a
        }),
        ("transposed and flipped", {
            let mut a = base.clone().reversed_axes();
            a.invert_axis(Axis(1));
            a
        }),
    ];
    for (name, a) in cases {
        let first = a.as_ptr() as usize;
        let expected: Vec<i32> = a.iter().copied().collect();
        let strides: Vec<i64> = a.strides().iter().map(|&s| s as i64).collect();
        let t = through_raw(ManagedTensor::try_from(a).unwrap());
        let v = t.view();
        assert_eq!(v.raw_strides(), Some(&strides[..]), "{name}");
        assert_eq!(v.first_element_address(), Some(first), "{name}: no copy");
        assert_eq!(v.to_vec::<i32>().unwrap(), expected, "{name}");
        let back = t.as_ndarray::<i32>().unwrap();
        assert_eq!(back.iter().copied().collect::<Vec<_>>(), expected, "{name}");
        assert_eq!(
            back.as_ptr() as usize,
            first,
            "{name}: the view is the same memory"
        );
    }
}

#[test]
fn arc_arrays_export_shared_read_only_unique_exclusive() {
    let a = Array::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as u16).into_shared();
    let keep = a.clone();
    let t = ManagedTensor::try_from(a).unwrap();
    assert!(t.is_read_only());
    assert_eq!(t.access(), Access::ReadOnly);
    assert_eq!(
        t.view().first_element_address(),
        Some(keep.as_ptr() as usize)
    );
    assert!(!keep.is_unique(), "the export keeps the array alive");
    drop(t);
    assert!(keep.is_unique(), "the deleter dropped the export's clone");

    let t = ManagedTensor::try_from(keep).unwrap();
    assert!(t.is_exclusive(), "a unique ArcArray is the export's alone");
    assert!(!t.is_read_only());
}

#[test]
fn the_export_keeps_the_array_alive_and_drops_it_once() {
    let a = array![[1.0f64, 2.0], [3.0, 4.0]].into_shared();
    let witness = a.clone();
    let raw = ManagedTensor::try_from(a).unwrap().into_raw();
    // The producer's handles are gone; only the raw pointer holds the array.
    // SAFETY: a live tensor, handed over once.
    let t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    assert_eq!(t.as_slice::<f64>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert!(!witness.is_unique());
    drop(t);
    assert!(witness.is_unique());
}

#[test]
fn half_and_other_elements() {
    let a = Array::from_shape_fn((2, 2), |(i, j)| f16::from_f32((i + j) as f32));
    let t = ManagedTensor::try_from(a.clone()).unwrap();
    assert_eq!(t.view().dtype(), DataType::FLOAT16);
    assert_eq!(t.as_ndarray::<f16>().unwrap(), a.into_dyn());
    let b = Array::from_elem(3, bf16::from_f32(0.25));
    let t = ManagedTensor::try_from(b).unwrap();
    assert_eq!(t.view().dtype(), DataType::BFLOAT16);
    assert_eq!(t.as_ndarray::<bf16>().unwrap()[[2]], bf16::from_f32(0.25));
    let c = array![dlport_core::dtype::Complex32 { re: 1.0, im: -1.0 }];
    let t = ManagedTensor::try_from(c).unwrap();
    assert_eq!(t.view().dtype(), DataType::COMPLEX64);
}

#[test]
fn zero_d_empty_and_many_axes() {
    let zero_d = ndarray::arr0(7u8);
    let t = ManagedTensor::try_from(zero_d).unwrap();
    assert_eq!(t.view().ndim(), 0);
    assert_eq!(t.as_ndarray::<u8>().unwrap()[IxDyn(&[])], 7);

    let empty = Array::<f32, _>::zeros((3, 0, 2));
    let t = through_raw(ManagedTensor::try_from(empty).unwrap());
    let v = t.as_ndarray::<f32>().unwrap();
    assert_eq!(v.shape(), &[3, 0, 2]);
    assert!(v.is_empty());

    let shape: Vec<usize> = vec![2, 1, 2, 1, 2, 1, 2, 1, 2, 2];
    let mut many = ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
        (0..ix.ndim()).map(|a| ix[a]).sum::<usize>() as i64
    });
    many.invert_axis(Axis(9));
    let expected: Vec<i64> = many.iter().copied().collect();
    let t = through_raw(ManagedTensor::try_from(many).unwrap());
    assert_eq!(t.view().ndim(), 10);
    let v = t.as_ndarray::<i64>().unwrap();
    assert_eq!(v.iter().copied().collect::<Vec<_>>(), expected);
}

#[test]
fn imports_any_layout_dlpack_expresses() {
    // Column-major.
    let t = ExportBuilder::from_vec(vec![1i32, 4, 2, 5, 3, 6], &[2, 3])
        .strides(&[1, 2])
        .build()
        .unwrap();
    assert_eq!(
        t.as_ndarray::<i32>().unwrap(),
        array![[1, 2, 3], [4, 5, 6]].into_dyn()
    );
    // Zero strides: a row broadcast to three rows, and a scalar broadcast to a matrix.
    let t = ExportBuilder::from_vec(vec![1u8, 2, 3], &[3, 3])
        .strides(&[0, 1])
        .build()
        .unwrap();
    assert_eq!(
        t.as_ndarray::<u8>().unwrap(),
        array![[1u8, 2, 3], [1, 2, 3], [1, 2, 3]].into_dyn()
    );
    let t = ExportBuilder::from_vec(vec![9u8], &[2, 2])
        .strides(&[0, 0])
        .build()
        .unwrap();
    assert_eq!(
        t.as_ndarray::<u8>().unwrap(),
        array![[9u8, 9], [9, 9]].into_dyn()
    );
    // Negative strides from a producer: data + byte_offset at the last element of storage.
    let t = ExportBuilder::from_vec((0..6).collect::<Vec<i64>>(), &[2, 3])
        .strides(&[-3, -1])
        .byte_offset(5 * 8)
        .build()
        .unwrap();
    let t = through_raw(t);
    assert_eq!(
        t.as_ndarray::<i64>().unwrap(),
        array![[5i64, 4, 3], [2, 1, 0]].into_dyn()
    );
    // Mixed: negative rows, zero columns, gaps.
    let t = ExportBuilder::from_vec((0..8).collect::<Vec<u32>>(), &[3, 2, 2])
        .strides(&[-3, 0, 1])
        .byte_offset(6 * 4)
        .build()
        .unwrap();
    let v = t.as_ndarray::<u32>().unwrap();
    for i in 0..3 {
        for j in 0..2 {
            for k in 0..2 {
                assert_eq!(
                    v[[i, j, k]],
                    t.view().get::<u32>(&[i, j, k]).unwrap().unwrap()
                );
            }
        }
    }
    // Legacy tensors too.
    let t = through_raw(
        ExportBuilder::from_vec(vec![1.0f32, 2.0], &[2])
            .build_legacy()
            .unwrap(),
    );
    assert_eq!(
        t.as_ndarray::<f32>().unwrap(),
        array![1.0f32, 2.0].into_dyn()
    );
}

#[test]
fn import_errors_name_the_problem() {
    let t = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
        .build()
        .unwrap();
    let e = t.as_ndarray::<f64>().unwrap_err();
    assert_eq!(e.code(), 15, "{e}");
    assert!(
        e.to_string().contains("float32") && e.to_string().contains("float64"),
        "{e}"
    );

    let t = ExportBuilder::new(vec![0u8; 12], DataType::FLOAT32, &[2])
        .byte_offset(1)
        .build()
        .unwrap();
    let e = t.as_ndarray::<f32>().unwrap_err();
    assert_eq!(e.code(), 18, "{e}");

    let freed = Arc::new(AtomicUsize::new(0));
    let t = dlport_testkit::xpu::counted_export(&freed, Device::cuda(0));
    let e = t.as_ndarray::<f32>().unwrap_err();
    assert_eq!(e.code(), 16, "{e}");
    assert!(e.to_string().contains("cuda"), "{e}");
}

#[test]
fn mutable_views_need_exclusive_non_overlapping_memory() {
    // dlport's export of an owned array: exclusive, any stride sign.
    let mut a = Array::from_shape_fn((3, 3), |(i, j)| (i * 3 + j) as i32);
    a.invert_axis(Axis(0));
    let mut t = ManagedTensor::try_from(a).unwrap();
    {
        let mut m = t.as_ndarray_mut::<i32>().unwrap();
        m[[0, 0]] = -1; // the last row of the original storage
        m.index_axis_mut(Axis(0), 1).fill(0);
    }
    assert_eq!(
        t.view().to_vec::<i32>().unwrap(),
        [-1, 7, 8, 0, 0, 0, 0, 1, 2]
    );

    // A legacy tensor: shared, refused until vouched for.
    let raw = ExportBuilder::from_vec(vec![0u8; 4], &[4])
        .build_legacy()
        .unwrap()
        .into_raw();
    // SAFETY: a live tensor, handed over once.
    let mut t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    let e = t.as_ndarray_mut::<u8>().unwrap_err();
    assert_eq!(e.code(), 35, "{e}");
    // SAFETY: we built it; no other handle exists.
    unsafe { t.assume_exclusive() }.unwrap();
    t.as_ndarray_mut::<u8>().unwrap().fill(3);
    assert_eq!(t.as_slice::<u8>().unwrap(), [3; 4]);

    // Read-only.
    let mut t = ExportBuilder::from_vec(vec![0u8; 4], &[4])
        .read_only(true)
        .build()
        .unwrap();
    assert_eq!(t.as_ndarray_mut::<u8>().unwrap_err().code(), 19);
    let mut t = ManagedTensor::try_from(array![1u8, 2].into_shared()).unwrap();
    assert!(t.as_ndarray_mut::<u8>().is_ok());

    // Zero and overlapping strides: two indices at one element.
    let mut t = ExportBuilder::from_vec(vec![1u8, 2, 3], &[3, 3])
        .strides(&[0, 1])
        .build()
        .unwrap();
    let e = t.as_ndarray_mut::<u8>().unwrap_err();
    assert_eq!(e.code(), 44, "{e}");
    assert!(
        e.to_string().contains("strides") && e.to_string().contains("[0, 1]"),
        "{e}"
    );
    let mut t = ExportBuilder::from_vec(vec![0u8; 4], &[2, 2])
        .strides(&[1, 1])
        .build()
        .unwrap();
    assert_eq!(t.as_ndarray_mut::<u8>().unwrap_err().code(), 44);
    // Gaps are fine.
    let mut t = ExportBuilder::from_vec(vec![0u8; 12], &[2, 2])
        .strides(&[6, 2])
        .build()
        .unwrap();
    t.as_ndarray_mut::<u8>().unwrap().fill(1);
    assert_eq!(t.view().to_vec::<u8>().unwrap(), [1; 4]);
    // The read view of the same tensor is always available.
    let t: TensorRef<'_> = t.view();
    assert_eq!(t.as_ndarray::<u8>().unwrap().len(), 4);
}
