//! Ownership: the deleter of an imported tensor runs exactly once on every path — drop,
//! `into_raw` then a later release, every refusal, legacy and versioned, and on another thread.
//! Export: the storage is dropped exactly once, when the consumer calls the deleter.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, FLAG_IS_COPIED,
    FLAG_READ_ONLY,
};
use dlport_core::backend::TensorStorage;
use dlport_core::error::{AccessError, DispatchError, LayoutError};
use dlport_core::{CopyPolicy, DataType, Device, Error, ExportBuilder, ManagedTensor};

/// A foreign producer: a heap block holding the managed struct, its arrays and a counter.
#[repr(C)]
struct Producer<H> {
    header: H,
    shape: [i64; 2],
    strides: [i64; 2],
    data: Vec<f32>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_versioned(p: *mut DLManagedTensorVersioned) {
    // SAFETY: built by `versioned` below as a Box<Producer<..>> and released once.
    let block = unsafe { Box::from_raw(p.cast::<Producer<DLManagedTensorVersioned>>()) };
    block.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(p: *mut DLManagedTensor) {
    // SAFETY: built by `legacy` below as a Box<Producer<..>> and released once.
    let block = unsafe { Box::from_raw(p.cast::<Producer<DLManagedTensor>>()) };
    block.deleted.fetch_add(1, Ordering::SeqCst);
}

fn tensor_fields(shape: *mut i64, strides: *mut i64, data: *mut f32, ndim: i32) -> DLTensor {
    DLTensor {
        data: data.cast(),
        device: Device::cpu(),
        ndim,
        dtype: DataType::FLOAT32,
        shape,
        strides,
        byte_offset: 0,
    }
}

/// A versioned 2×3 float32 tensor; `tweak` may corrupt it before it is handed over.
fn versioned(
    counter: &Arc<AtomicUsize>,
    tweak: impl FnOnce(&mut DLManagedTensorVersioned),
) -> *mut DLManagedTensorVersioned {
    let block = Box::new(Producer {
        header: DLManagedTensorVersioned {
            version: DLPackVersion::new(1, 3),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: 0,
            dl_tensor: tensor_fields(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                2,
            ),
        },
        shape: [2, 3],
        strides: [3, 1],
        data: (0..6).map(|x| x as f32).collect(),
        deleted: Arc::clone(counter),
    });
    // Point the header into the block only once it sits at its final address.
    let p = Box::into_raw(block);
    // SAFETY: `p` is a fresh, exclusively owned block.
    unsafe {
        (*p).header.dl_tensor.shape = std::ptr::addr_of_mut!((*p).shape).cast();
        (*p).header.dl_tensor.strides = std::ptr::addr_of_mut!((*p).strides).cast();
        (*p).header.dl_tensor.data = (*p).data.as_mut_ptr().cast();
        tweak(&mut (*p).header);
    }
    p.cast()
}

fn legacy(
    counter: &Arc<AtomicUsize>,
    tweak: impl FnOnce(&mut DLManagedTensor),
) -> *mut DLManagedTensor {
    let block = Box::new(Producer {
        header: DLManagedTensor {
            dl_tensor: tensor_fields(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                2,
            ),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        },
        shape: [2, 3],
        strides: [3, 1],
        data: (0..6).map(|x| x as f32).collect(),
        deleted: Arc::clone(counter),
    });
    // Point the header into the block only once it sits at its final address.
    let p = Box::into_raw(block);
    // SAFETY: `p` is a fresh, exclusively owned block.
    unsafe {
        (*p).header.dl_tensor.shape = std::ptr::addr_of_mut!((*p).shape).cast();
        (*p).header.dl_tensor.strides = std::ptr::addr_of_mut!((*p).strides).cast();
        (*p).header.dl_tensor.data = (*p).data.as_mut_ptr().cast();
        tweak(&mut (*p).header);
    }
    p.cast()
}

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

#[test]
fn versioned_deleter_runs_once_on_drop() {
    let n = counter();
    // SAFETY: a fresh producer tensor, handed over.
    let t = unsafe { ManagedTensor::from_raw_versioned(versioned(&n, |_| {})) }.unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), &[0., 1., 2., 3., 4., 5.]);
    assert_eq!(n.load(Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn legacy_deleter_runs_once_on_drop() {
    let n = counter();
    // SAFETY: a fresh producer tensor, handed over.
    let t = unsafe { ManagedTensor::from_raw_legacy(legacy(&n, |_| {})) }.unwrap();
    assert_eq!(t.version(), None);
    assert_eq!(t.view().shape(), &[2, 3]);
    drop(t);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn into_raw_hands_ownership_back_and_a_later_release_runs_once() {
    for versioned_form in [true, false] {
        let n = counter();
        let raw = if versioned_form {
            // SAFETY: fresh producer tensor.
            unsafe { ManagedTensor::from_raw_versioned(versioned(&n, |_| {})) }
                .unwrap()
                .into_raw()
        } else {
            // SAFETY: fresh producer tensor.
            unsafe { ManagedTensor::from_raw_legacy(legacy(&n, |_| {})) }
                .unwrap()
                .into_raw()
        };
        assert_eq!(n.load(Ordering::SeqCst), 0, "into_raw must not release");
        // SAFETY: we own `raw` again and release it once.
        unsafe { raw.release() };
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn every_refusal_releases_exactly_once() {
    type Tweak = fn(&mut DLManagedTensorVersioned);
    let refusals: [(&str, Tweak, u32); 8] = [
        (
            "major version 2",
            |h| h.version = DLPackVersion::new(2, 0),
            2,
        ),
        ("unknown flags", |h| h.flags = 1 << 9, 3),
        ("negative ndim", |h| h.dl_tensor.ndim = -4, 4),
        (
            "NULL shape",
            |h| h.dl_tensor.shape = std::ptr::null_mut(),
            5,
        ),
        (
            "NULL strides at 1.3",
            |h| h.dl_tensor.strides = std::ptr::null_mut(),
            6,
        ),
        ("NULL data", |h| h.dl_tensor.data = std::ptr::null_mut(), 7),
        ("unknown dtype", |h| h.dl_tensor.dtype.code.0 = 200, 12),
        (
            "fp4 with 8 bits",
            |h| h.dl_tensor.dtype = DataType::new(dlport_core::abi::TypeCode::FLOAT4_E2M1FN, 8, 1),
            13,
        ),
    ];
    for (what, tweak, code) in refusals {
        let n = counter();
        // SAFETY: a producer tensor (possibly corrupt in metadata only), handed over.
        let err = unsafe { ManagedTensor::from_raw_versioned(versioned(&n, tweak)) }.unwrap_err();
        assert_eq!(err.code(), code, "{what}: {err}");
        assert_eq!(
            n.load(Ordering::SeqCst),
            1,
            "{what}: the deleter must run exactly once"
        );
    }
    // Legacy refusals release too.
    let n = counter();
    // SAFETY: as above.
    let err = unsafe { ManagedTensor::from_raw_legacy(legacy(&n, |h| h.dl_tensor.ndim = 99)) }
        .unwrap_err();
    assert_eq!(err, Error::Layout(LayoutError::NdimOutOfRange { ndim: 99 }));
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn borrowed_validation_takes_nothing() {
    use dlport_core::abi::RawManaged;
    use dlport_core::{ImportOptions, Registry};
    let never = ImportOptions {
        copy: CopyPolicy::Never,
        ..ImportOptions::default()
    };
    let registry = Registry::with_cpu();
    type Tweak = fn(&mut DLManagedTensorVersioned);
    let cases: [(&str, Tweak, Option<u32>); 4] = [
        ("valid", |_| {}, None),
        (
            "major version 2",
            |h| h.version = DLPackVersion::new(2, 0),
            Some(2),
        ),
        (
            "NULL data",
            |h| h.dl_tensor.data = std::ptr::null_mut(),
            Some(7),
        ),
        // No backend of a CPU-only registry reaches CUDA memory: refused by the decision.
        (
            "CUDA memory",
            |h| h.dl_tensor.device = Device::cuda(0),
            None,
        ),
    ];
    for (what, tweak, code) in cases {
        let n = counter();
        let raw = RawManaged::Versioned(std::ptr::NonNull::new(versioned(&n, tweak)).unwrap());
        // SAFETY: a live producer tensor (corrupt in metadata only), kept by this test.
        let checked = unsafe { raw.validate() }.map(|view| view.shape().to_vec());
        assert_eq!(checked.as_ref().err().map(Error::code), code, "{what}");
        // SAFETY: as above.
        let decided = unsafe { registry.decide_raw(raw, &never) };
        match what {
            "valid" => assert!(!decided.unwrap().copies, "a host tensor imports as a view"),
            _ => assert!(decided.is_err(), "{what}: refused"),
        }
        assert_eq!(n.load(Ordering::SeqCst), 0, "{what}: nothing is released");
        // SAFETY: still ours, released once.
        unsafe { raw.release() };
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
    // The legacy form too.
    let n = counter();
    let raw =
        RawManaged::Legacy(std::ptr::NonNull::new(legacy(&n, |h| h.dl_tensor.ndim = 99)).unwrap());
    // SAFETY: a live producer tensor, kept by this test.
    let err = unsafe { raw.validate() }.unwrap_err();
    assert_eq!(err, Error::Layout(LayoutError::NdimOutOfRange { ndim: 99 }));
    assert_eq!(n.load(Ordering::SeqCst), 0);
    // SAFETY: still ours, released once.
    unsafe { raw.release() };
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn wrong_major_version_reads_nothing_past_the_header() {
    // Only the header is valid: the DLTensor part is garbage a 2.x producer might lay out
    // differently. The import must release it without reading the tensor.
    let n = counter();
    let raw = versioned(&n, |h| {
        h.version = DLPackVersion::new(2, 1);
        h.dl_tensor.ndim = i32::MAX;
        h.dl_tensor.shape = std::ptr::without_provenance_mut(0x10);
        h.dl_tensor.strides = std::ptr::without_provenance_mut(0x10);
    });
    // SAFETY: the header is valid; nothing else may be read.
    let err = unsafe { ManagedTensor::from_raw_versioned(raw) }.unwrap_err();
    assert_eq!(
        err,
        Error::Layout(LayoutError::UnsupportedVersion {
            version: DLPackVersion::new(2, 1)
        })
    );
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn null_deleter_is_legal() {
    let mut shape = [3i64];
    let mut strides = [1i64];
    let mut data = [1.0f32, 2.0, 3.0];
    let mut header = DLManagedTensorVersioned {
        version: DLPackVersion::new(1, 1),
        manager_ctx: std::ptr::null_mut(),
        deleter: None,
        flags: FLAG_READ_ONLY,
        dl_tensor: tensor_fields(
            shape.as_mut_ptr(),
            strides.as_mut_ptr(),
            data.as_mut_ptr(),
            1,
        ),
    };
    // SAFETY: everything lives on this stack frame longer than `t`.
    let mut t = unsafe { ManagedTensor::from_raw_versioned(&mut header) }.unwrap();
    assert!(t.is_read_only());
    assert_eq!(
        t.as_mut_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::ReadOnly)
    );
    assert_eq!(t.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
    drop(t); // nothing to call
}

#[test]
fn null_pointer_is_an_error_not_a_crash() {
    // SAFETY: NULL is allowed.
    let e = unsafe { ManagedTensor::from_raw_versioned(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(e, Error::Layout(LayoutError::NullManagedTensor));
    // SAFETY: NULL is allowed.
    let e = unsafe { ManagedTensor::from_raw_legacy(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(e, Error::Layout(LayoutError::NullManagedTensor));
}

#[test]
fn dropped_on_another_thread_runs_once() {
    let n = counter();
    // SAFETY: fresh producer tensor.
    let t = unsafe { ManagedTensor::from_raw_versioned(versioned(&n, |_| {})) }.unwrap();
    let main = std::thread::current().id();
    let dropped_on = std::thread::spawn(move || {
        drop(t);
        std::thread::current().id()
    })
    .join()
    .unwrap();
    assert_ne!(dropped_on, main);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn writes_through_as_mut_slice_reach_the_producer() {
    let n = counter();
    let raw = versioned(&n, |_| {});
    // SAFETY: fresh producer tensor.
    let mut t = unsafe { ManagedTensor::from_raw_versioned(raw) }.unwrap();
    // A foreign tensor without IS_COPIED proves no exclusivity: `&mut` is refused …
    assert_eq!(
        t.as_mut_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::NotExclusive {
            access: dlport_core::backend::Access::Shared
        })
    );
    // … until the caller vouches for it (this test's producer keeps no other handle).
    // SAFETY: nothing else reads or writes the producer's buffer while `t` lives.
    unsafe { t.assume_exclusive() }.unwrap();
    t.as_mut_slice::<f32>().unwrap()[5] = 42.0;
    assert_eq!(t.view().get::<f32>(&[1, 2]).unwrap(), Some(42.0));
}

/// Storage that counts its drops.
struct Counted {
    data: Vec<f64>,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the Vec's buffer is stable and owned alone.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        self.data.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.data.len() * 8
    }
}

#[test]
fn export_drops_storage_once_when_the_consumer_calls_the_deleter() {
    for legacy_form in [false, true] {
        let n = counter();
        let storage = Counted {
            data: vec![1.0, 2.0, 3.0, 4.0],
            dropped: Arc::clone(&n),
        };
        let builder = ExportBuilder::new(storage, DataType::FLOAT64, &[2, 2]).copied(true);
        let t = if legacy_form {
            builder.build_legacy()
        } else {
            builder.build()
        }
        .unwrap();
        assert_eq!(t.is_versioned(), !legacy_form);
        let raw = t.into_raw();
        assert_eq!(n.load(Ordering::SeqCst), 0);
        // A consumer imports it, then reads and drops it on another thread.
        // SAFETY: the export is owned and handed over once.
        let t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
        let handle = std::thread::spawn(move || {
            let sum: f64 = t.as_slice::<f64>().unwrap().iter().sum();
            (sum, t.flags())
        });
        let (sum, flags) = handle.join().unwrap();
        assert_eq!(sum, 10.0);
        assert_eq!(
            flags & FLAG_IS_COPIED != 0,
            !legacy_form,
            "legacy carries no flags"
        );
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn export_refusal_drops_storage_once() {
    let n = counter();
    let storage = Counted {
        data: vec![1.0; 4],
        dropped: Arc::clone(&n),
    };
    let err = ExportBuilder::new(storage, DataType::FLOAT64, &[2, 3])
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        Error::Layout(LayoutError::StorageTooSmall {
            needed: 48,
            available: 32
        })
    );
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn legacy_versioned_conversion_keeps_one_release() {
    let n = counter();
    // SAFETY: fresh producer tensor.
    let t = unsafe { ManagedTensor::from_raw_legacy(legacy(&n, |_| {})) }.unwrap();
    let addr = t.view().data();
    let v = t.into_versioned().unwrap();
    assert!(v.is_versioned());
    assert_eq!(v.view().data(), addr, "conversion must not copy");
    let back = v.into_legacy(CopyPolicy::Never).unwrap();
    assert!(!back.is_versioned());
    assert_eq!(back.as_slice::<f32>().unwrap(), &[0., 1., 2., 3., 4., 5.]);
    assert_eq!(n.load(Ordering::SeqCst), 0);
    drop(back);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn shared_storage_is_exported_read_only() {
    let shared: Arc<[u16]> = Arc::from(vec![7u16; 8]);
    let t = ExportBuilder::new(Arc::clone(&shared), DataType::UINT16, &[8])
        .build()
        .unwrap();
    assert!(t.is_read_only());
    assert_eq!(
        t.view().as_slice::<u16>().unwrap().as_ptr(),
        shared.as_ptr()
    );
    assert_eq!(Arc::strong_count(&shared), 2);
    drop(t);
    assert_eq!(Arc::strong_count(&shared), 1);
}

#[test]
fn exports_pass_the_validator_for_many_layouts() {
    type Case<'a> = (&'a [i64], Option<&'a [i64]>, u64);
    let cases: &[Case] = &[
        (&[], None, 0),
        (&[0, 5], None, 0),
        (&[4, 4], Some(&[1, 4]), 0),
        (&[4], Some(&[-1]), 12),
        (&[2, 2], Some(&[0, 1]), 0),
        (&[3], Some(&[2]), 4),
    ];
    for &(shape, strides, off) in cases {
        let mut b = ExportBuilder::from_vec(vec![0f32; 16], shape).byte_offset(off);
        if let Some(s) = strides {
            b = b.strides(s);
        }
        let t = b
            .build()
            .unwrap_or_else(|e| panic!("{shape:?} {strides:?}: {e}"));
        let raw = t.into_raw();
        // SAFETY: re-import of our own export.
        let again = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
        assert_eq!(again.view().shape(), shape);
    }
}

#[test]
fn a_huge_broadcast_tensor_is_an_error_not_an_abort() {
    // 2^62 elements over 4 bytes of memory (stride 0): valid DLPack, but no copy can hold it.
    let t = ExportBuilder::from_vec(vec![1.0f32], &[1 << 62])
        .strides(&[0])
        .build()
        .unwrap();
    assert_eq!(t.view().numel(), 1 << 62);
    assert_eq!(t.view().get::<f32>(&[(1 << 62) - 1]).unwrap(), Some(1.0));
    let err = t.view().to_vec::<f32>().unwrap_err();
    // The exact size (2^64 bytes, past u64), not a wrapped or saturated number.
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::AllocationLimit {
            bytes: (1u128 << 64).into(),
            limit: isize::MAX as u64
        })
    );
    let copy = dlport_core::Registry::with_cpu().from_dlpack(
        t,
        &dlport_core::ImportOptions {
            copy: dlport_core::CopyPolicy::Always,
            ..Default::default()
        },
    );
    assert_eq!(
        copy.unwrap_err(),
        Error::Dispatch(DispatchError::AllocationLimit {
            bytes: (1u128 << 64).into(),
            limit: isize::MAX as u64
        })
    );
}

/// Storage that counts its drops and, when dropped, drops what it holds (another buffer: a
/// release inside a release).
struct Holding {
    data: Vec<f64>,
    dropped: Arc<AtomicUsize>,
    inner: Option<dlport_core::backend::SharedBuffer>,
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
        drop(self.inner.take());
    }
}

// SAFETY: the Vec's buffer is stable and owned alone.
unsafe impl TensorStorage for Holding {
    fn data_ptr(&mut self) -> *mut c_void {
        self.data.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.data.len() * 8
    }
}

fn holding(
    n: &Arc<AtomicUsize>,
    inner: Option<dlport_core::backend::SharedBuffer>,
) -> dlport_core::backend::SharedBuffer {
    dlport_core::backend::Buffer::new(Box::new(Holding {
        data: vec![1.0; 4],
        dropped: Arc::clone(n),
        inner,
    }))
}

/// Buffers and export blocks are freed with their owners: a new buffer starts fresh; a release
/// inside a release, many buffers dropped together, exports released after their source, and a
/// release on a thread that then ends each drop every owner exactly once. Miri and
/// LeakSanitizer check that no block is lost.
#[test]
fn buffers_and_export_blocks_drop_every_owner_once() {
    let n = counter();
    let first = holding(&n, None);
    drop(first);
    assert_eq!(n.load(Ordering::SeqCst), 1);
    let second = holding(&n, None);
    assert_eq!(
        (second.handles(), second.users(), second.is_released()),
        (1, 0, false)
    );
    assert_eq!(second.len(), 32);
    // A release inside a release, then several buffers dropped together.
    let outer = holding(&n, Some(second));
    drop(outer);
    assert_eq!(n.load(Ordering::SeqCst), 3);
    let three: Vec<_> = (0..3).map(|_| holding(&n, None)).collect();
    drop(three);
    assert_eq!(n.load(Ordering::SeqCst), 6);
    // Export blocks: each released export drops its storage once; a later export of the same
    // layout starts fresh.
    let exported = |v: Vec<f64>| {
        ExportBuilder::new(
            Counted {
                data: v,
                dropped: Arc::clone(&n),
            },
            DataType::FLOAT64,
            &[2, 2],
        )
        .build()
        .unwrap()
        .into_raw()
    };
    let a = exported(vec![1.0; 4]);
    // SAFETY: our own export, released once.
    drop(unsafe { ManagedTensor::from_raw(a) }.unwrap());
    let b = exported(vec![2.0; 4]);
    // SAFETY: as above.
    let b = unsafe { ManagedTensor::from_raw(b) }.unwrap();
    assert_eq!(b.view().get::<f64>(&[1, 1]).unwrap(), Some(2.0));
    drop(b);
    assert_eq!(n.load(Ordering::SeqCst), 8);
    // Made here, released on a thread that then ends.
    let moved = holding(&n, None);
    let clone = moved.clone();
    std::thread::spawn(move || {
        drop(moved);
        drop(clone);
        let _ = holding(&Arc::new(AtomicUsize::new(0)), None);
    })
    .join()
    .unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 9);
}
