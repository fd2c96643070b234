//! The allocation block, the conversions and the re-exports: what each one owns and frees, and
//! that every tensor they hand out is what `ManagedTensor::from_raw` validates.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::RawManaged;
use crate::abi::{DLManagedTensor, DLPackVersion, DLTensor};
use crate::access::Access;
use crate::error::{Error, LayoutError};
use crate::managed::ManagedTensor;
use crate::{CopyPolicy, DataType, Device};

use super::*;
use crate::storage::TensorStorage;

/// A vector that counts its drops, with a pointer it can be told to lie about.
struct Counted {
    data: Vec<f32>,
    dropped: Arc<AtomicUsize>,
    null: bool,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the vector's buffer is stable and owned alone (the NULL variant is refused).
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        if self.null {
            core::ptr::null_mut()
        } else {
            self.data.as_mut_ptr().cast()
        }
    }
    fn byte_len(&self) -> usize {
        self.data.len() * 4
    }
}

fn counted(n: usize, dropped: &Arc<AtomicUsize>) -> Counted {
    Counted {
        data: (0..n).map(|x| x as f32).collect(),
        dropped: Arc::clone(dropped),
        null: false,
    }
}

/// Re-validates a tensor through its raw pointer, as a consumer would.
fn revalidate(t: &ManagedTensor) -> crate::layout::Layout {
    let tensor = match t.as_raw() {
        // SAFETY: live, owned by `t`.
        RawManaged::Versioned(p) => unsafe { &(*p.as_ptr()).dl_tensor },
        // SAFETY: as above.
        RawManaged::Legacy(p) => unsafe { &(*p.as_ptr()).dl_tensor },
    };
    // SAFETY: as above.
    unsafe { crate::TensorRef::from_raw(tensor, t.version(), t.flags()) }
        .unwrap()
        .layout()
}

#[test]
fn a_legacy_export_becomes_versioned_in_place() {
    for shape in [&[2i64, 3][..], &[6], &[]] {
        let dropped = Arc::new(AtomicUsize::new(0));
        let n = shape.iter().product::<i64>() as usize;
        let legacy = ExportBuilder::new(counted(n, &dropped), DataType::FLOAT32, shape)
            .copied(true)
            .build_legacy()
            .unwrap();
        let address = legacy.as_raw().addr();
        let data = legacy.view().data();
        let v = legacy.into_versioned().unwrap();
        assert!(v.is_versioned());
        assert_eq!(v.as_raw().addr(), address, "converted in place");
        assert_eq!(v.view().data(), data, "no copy");
        assert_eq!(v.version(), Some(DLPackVersion::CURRENT));
        assert_eq!(v.flags(), 0);
        assert_eq!(v.access(), Access::Exclusive);
        assert_eq!(revalidate(&v), v.view().layout());
        assert_eq!(v.view().shape(), shape);
        let expected: Vec<f32> = (0..n).map(|x| x as f32).collect();
        assert_eq!(v.as_slice::<f32>().unwrap(), &expected[..]);
        // Back to legacy (a wrapper block) and versioned again (in place).
        let again = v
            .into_legacy(CopyPolicy::Never)
            .unwrap()
            .into_versioned()
            .unwrap();
        assert_eq!(again.as_slice::<f32>().unwrap(), &expected[..]);
        assert_eq!(revalidate(&again), again.view().layout());
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        drop(again);
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the storage drops once");
    }
}

static FOREIGN_RELEASED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_release(_: *mut DLManagedTensor) {
    FOREIGN_RELEASED.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn a_foreign_legacy_tensor_is_wrapped_around_its_own_arrays() {
    // Legacy with NULL strides (compact), and an empty one whose compact strides saturate.
    for (shape, numel) in [
        (vec![2i64, 3, 4], 24usize),
        (vec![i64::MAX, 0, i64::MAX], 0),
    ] {
        let mut shape = shape;
        let mut data = vec![1.0f32; numel.max(1)];
        let mut header = DLManagedTensor {
            dl_tensor: DLTensor {
                data: data.as_mut_ptr().cast(),
                device: Device::cpu(),
                ndim: 3,
                dtype: DataType::FLOAT32,
                shape: shape.as_mut_ptr(),
                strides: core::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: core::ptr::null_mut(),
            deleter: Some(count_release),
        };
        let before = FOREIGN_RELEASED.load(Ordering::SeqCst);
        // SAFETY: the header and its arrays outlive the tensor; the deleter only counts.
        let t = unsafe { ManagedTensor::from_raw_legacy(&mut header) }.unwrap();
        let expected: Vec<i64> = t.view().strides().collect();
        let v = t.into_versioned().unwrap();
        let RawManaged::Versioned(p) = v.as_raw() else {
            panic!("versioned")
        };
        // SAFETY: live, owned by `v`.
        let tensor = unsafe { (*p.as_ptr()).dl_tensor };
        assert_eq!(
            tensor.shape,
            shape.as_mut_ptr(),
            "the source's shape, not a copy"
        );
        assert!(!tensor.strides.is_null(), "1.3 writes strides out");
        assert_eq!(v.view().raw_strides(), Some(&expected[..]));
        assert_eq!(revalidate(&v), v.view().layout());
        drop(v);
        assert_eq!(FOREIGN_RELEASED.load(Ordering::SeqCst), before + 1);
    }
}

#[test]
fn a_guard_lives_exactly_as_long_as_the_re_export() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = Arc::new(());
    let t = ExportBuilder::new(counted(4, &dropped), DataType::FLOAT32, &[4])
        .build()
        .unwrap();
    for versioned in [true, false] {
        let t = ExportBuilder::new(counted(4, &dropped), DataType::FLOAT32, &[2, 2])
            .build()
            .unwrap();
        let r = t.reexport_with(Arc::clone(&guard), versioned).unwrap();
        assert_eq!(r.is_versioned(), versioned);
        assert_eq!(revalidate(&r), r.view().layout());
        assert_eq!(Arc::strong_count(&guard), 2);
        drop(r);
        assert_eq!(Arc::strong_count(&guard), 1);
    }
    drop(t);
    assert_eq!(dropped.load(Ordering::SeqCst), 3);
}

#[test]
fn an_export_refused_for_its_pointer_frees_the_block_and_drops_the_storage_once() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut storage = counted(4, &dropped);
    storage.null = true;
    let err = ExportBuilder::new(storage, DataType::FLOAT32, &[4])
        .build()
        .unwrap_err();
    assert_eq!(err, Error::Layout(LayoutError::NullData { numel: 4 }));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    // An empty tensor needs no pointer.
    let mut storage = counted(0, &dropped);
    storage.null = true;
    let t = ExportBuilder::new(storage, DataType::FLOAT32, &[0, 3])
        .build()
        .unwrap();
    assert_eq!(t.view().numel(), 0);
    drop(t);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[test]
fn exports_of_every_rank_and_stride_kind_are_what_import_validates() {
    let shapes: [&[i64]; 5] = [&[], &[5], &[2, 3], &[2, 1, 3, 1], &[1; 20]];
    for shape in shapes {
        let n = shape.iter().product::<i64>() as usize;
        for legacy in [false, true] {
            let b = ExportBuilder::from_vec(vec![0u16; n], shape);
            let t = if legacy { b.build_legacy() } else { b.build() }.unwrap();
            assert_eq!(revalidate(&t), t.view().layout(), "{shape:?}");
            assert_eq!(t.view().shape(), shape);
        }
    }
    // Explicit strides (column-major), an offset, read-only.
    let t = ExportBuilder::from_vec((0..6).collect::<Vec<i32>>(), &[2, 3])
        .strides(&[1, 2])
        .byte_offset(0)
        .read_only(true)
        .build()
        .unwrap();
    assert_eq!(revalidate(&t), t.view().layout());
    assert_eq!(t.view().get::<i32>(&[1, 2]).unwrap(), Some(5));
}

#[test]
fn strides_are_written_beside_the_shape_inline_and_on_the_heap() {
    // Reversed (Fortran-order) strides, at every rank up to past the inline count.
    for ndim in [
        1usize,
        4,
        crate::dims::Dims::INLINE,
        crate::dims::Dims::INLINE + 3,
    ] {
        let shape: Vec<i64> = (0..ndim).map(|a| 1 + (a as i64 % 3)).collect();
        let mut strides = vec![0i64; ndim];
        let mut reach = 1;
        for (s, &e) in strides.iter_mut().zip(&shape) {
            *s = reach;
            reach *= e;
        }
        let t = ExportBuilder::from_vec(vec![0u8; reach as usize], &shape)
            .strides(&strides)
            .build()
            .unwrap();
        assert_eq!(revalidate(&t), t.view().layout(), "{ndim}");
        assert_eq!(t.view().shape(), &shape[..]);
        assert_eq!(t.view().raw_strides(), Some(&strides[..]));
    }
    // Strides that are not as many as the axes are refused, naming both counts; the last
    // strides set are the ones that count.
    let e = ExportBuilder::from_vec(vec![0u8; 6], &[2, 3])
        .strides(&[3, 1, 1])
        .build()
        .unwrap_err();
    assert_eq!(
        e,
        Error::Layout(LayoutError::StridesLength {
            strides: 3,
            ndim: 2
        })
    );
    let t = ExportBuilder::from_vec(vec![0u8; 6], &[2, 3])
        .strides(&[3])
        .strides(&[1, 2])
        .build()
        .unwrap();
    assert_eq!(t.view().raw_strides(), Some(&[1, 2][..]));
}
