//! The registry's two operations beyond import and export: compaction (`Registry::compact`:
//! the tensor itself when it is compact already, else a copy through the backends' copy;
//! ownership, alignment, the allocation limit, every kind of stride) and the stream hand-off
//! of an export (`ExportOptions::stream`, `Registry::stream_hand_off`), shown with a fake
//! backend with streams that records each hand-off it is asked for.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::FLAG_IS_COPIED;
use dlport_core::backend::{Backend, CompactOptions, StreamRequest, TensorStorage};
use dlport_core::error::{BackendError, CopyReason, DispatchError, OptionRule, StreamReason};
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions, Registry,
    Tensor,
};
use dlport_testkit::streams::{FAKE, Streams};

/// Host bytes whose drop is counted (an export's deleter drops them), on a device of choice.
struct Counted(Vec<f32>, Arc<AtomicUsize>, Device);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the vector's buffer is stable and owned by the value; the device label does not
// change the memory.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len() * 4
    }
    fn device(&self) -> Device {
        self.2
    }
}

/// `values` on `device` as `shape` with `strides` (None: row-major), imported onto `registry`
/// as a view; the counter says when its storage is dropped.
fn imported(
    registry: &Registry,
    device: Device,
    values: Vec<f32>,
    shape: &[i64],
    strides: Option<&[i64]>,
) -> (Tensor, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut builder = ExportBuilder::new(
        Counted(values, drops.clone(), device),
        DataType::FLOAT32,
        shape,
    );
    if let Some(s) = strides {
        builder = builder.strides(s);
    }
    let t = registry
        .from_dlpack(builder.build().unwrap(), &ImportOptions::default())
        .unwrap();
    assert!(!t.is_copied(), "the import is a view");
    (t, drops)
}

fn host(values: Vec<f32>, shape: &[i64], strides: Option<&[i64]>) -> (Tensor, Arc<AtomicUsize>) {
    imported(&Registry::with_cpu(), Device::cpu(), values, shape, strides)
}

#[test]
fn compact_gives_a_compact_tensor_itself_and_the_storage_goes_once() {
    let r = Registry::with_cpu();
    // A Vec's buffer is 4-byte aligned: ask for 4 so that it needs no copy.
    let (t, drops) = host(vec![1.0, 2.0, 3.0, 4.0], &[2, 2], None);
    let options = CompactOptions {
        alignment: Some(4),
        ..CompactOptions::default()
    };
    let c = r.compact(&t, &options).unwrap();
    assert_eq!(c.first_element_address(), t.first_element_address());
    assert!(!c.is_copied());
    drop(t);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "the result keeps the memory"
    );
    assert_eq!(c.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    drop(c);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "dropped once, with the last handle"
    );
}

/// A layout of four floats: shape, strides, the first element's index, the elements in
/// row-major order.
type Case = (&'static [i64], &'static [i64], usize, [f32; 4]);

#[test]
fn compact_copies_strided_broadcast_and_negative_strides() {
    let r = Registry::with_cpu();
    let cases: [Case; 3] = [
        // Transposed.
        (&[2, 2], &[1, 2], 0, [1.0, 3.0, 2.0, 4.0]),
        // Broadcast: one row, read twice.
        (&[2, 2], &[0, 1], 0, [1.0, 2.0, 1.0, 2.0]),
        // Reversed: the first element is the last of the storage.
        (&[4], &[-1], 3, [4.0, 3.0, 2.0, 1.0]),
    ];
    for (shape, strides, offset, want) in cases {
        let drops = Arc::new(AtomicUsize::new(0));
        let storage = Counted(vec![1.0, 2.0, 3.0, 4.0], drops.clone(), Device::cpu());
        let m = ExportBuilder::new(storage, DataType::FLOAT32, shape)
            .strides(strides)
            .byte_offset(offset as u64 * 4)
            .build()
            .unwrap();
        let t = r.from_dlpack(m, &ImportOptions::default()).unwrap();
        let c = r.compact(&t, &CompactOptions::default()).unwrap();
        assert!(
            c.is_copied() && c.flags() & FLAG_IS_COPIED != 0,
            "{strides:?}"
        );
        assert!(c.contiguity().is_row_major(), "{strides:?}");
        assert_eq!(c.first_element_address().unwrap() % 64, 0, "64 by default");
        assert_eq!(c.to_vec::<f32>().unwrap(), want, "{strides:?}");
        drop(t);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the copy does not hold the source"
        );
        // The copy is the caller's alone: it exports by handing the memory over.
        let handed = c.release_ownership(true, Device::cpu()).unwrap();
        assert!(handed.is_copied());
        assert!(c.view().is_err(), "released to the consumer");
    }
}

#[test]
fn compact_honours_the_alignment_and_the_copy_policy() {
    let r = Registry::with_cpu();
    let (t, _drops) = host(vec![1.0; 8], &[8], None);
    let aligned = CompactOptions {
        alignment: Some(4096),
        ..CompactOptions::default()
    };
    let c = r.compact(&t, &aligned).unwrap();
    assert_eq!(c.first_element_address().unwrap() % 4096, 0);
    // Compact and aligned already: Always copies anyway, Never gives it back.
    let always = CompactOptions {
        copy: CopyPolicy::Always,
        ..aligned
    };
    let again = r.compact(&c, &always).unwrap();
    assert_ne!(again.first_element_address(), c.first_element_address());
    assert!(again.is_copied());
    let never = CompactOptions {
        copy: CopyPolicy::Never,
        ..aligned
    };
    let same = r.compact(&c, &never).unwrap();
    assert_eq!(same.first_element_address(), c.first_element_address());
    // Strided with Never: refused, saying why.
    let (strided, _) = host(vec![1.0; 4], &[2, 2], Some(&[1, 2]));
    let err = r.compact(&strided, &never).unwrap_err();
    assert!(matches!(
        err,
        Error::Dispatch(DispatchError::CopyRequired {
            reason: CopyReason::Layout { .. }
        })
    ));
    // The one alignment range: powers of two up to 2^30.
    for bad in [0usize, 3, 48, 1 << 31] {
        let options = CompactOptions {
            alignment: Some(bad),
            ..CompactOptions::default()
        };
        assert_eq!(
            r.compact(&t, &options).unwrap_err(),
            Error::Dispatch(DispatchError::InvalidOption {
                rule: OptionRule::Alignment,
                value: bad as u64,
            }),
            "alignment {bad}"
        );
    }
}

#[test]
fn compact_is_refused_over_the_limit_in_force_before_allocating() {
    // One element broadcast to 2048: a compact copy takes 8 KiB.
    let mut r = Registry::with_cpu();
    let (t, _drops) = imported(&r, Device::cpu(), vec![7.0], &[2048], Some(&[0]));
    let limited = |max_alloc| CompactOptions {
        max_alloc,
        ..CompactOptions::default()
    };
    let err = r.compact(&t, &limited(Some(1024))).unwrap_err();
    assert!(matches!(
        err,
        Error::Dispatch(DispatchError::AllocationLimit { limit: 1024, .. })
    ));
    // The registry's limit is lower than the call's: a call cannot raise it.
    r.set_alloc_limit(4096);
    let err = r.compact(&t, &limited(Some(1 << 30))).unwrap_err();
    assert!(matches!(
        err,
        Error::Dispatch(DispatchError::AllocationLimit { limit: 4096, .. })
    ));
    r.set_alloc_limit(1 << 20);
    let c = r.compact(&t, &limited(None)).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![7.0; 2048]);
}

fn with_streams(fail: bool) -> (Registry, Arc<Streams>) {
    let streams = Arc::new(Streams::new(fail));
    let mut r = Registry::with_cpu();
    r.register(streams.clone()).unwrap();
    (r, streams)
}

fn with_stream(stream: Option<i64>) -> ExportOptions {
    ExportOptions {
        stream,
        ..ExportOptions::default()
    }
}

#[test]
fn an_export_hands_the_consumers_stream_to_the_tensors_backend() {
    let (r, streams) = with_streams(false);
    let (t, drops) = imported(&r, FAKE, vec![1.0; 4], &[4], None);
    let calls = || streams.calls();
    drop(r.to_dlpack(&t, &with_stream(Some(0x7000))).unwrap());
    drop(r.to_dlpack(&t, &with_stream(None)).unwrap());
    assert_eq!(
        calls(),
        [
            (FAKE, None, StreamRequest::Stream(0x7000)),
            (FAKE, None, StreamRequest::LegacyDefault),
        ]
    );
    // -1: the consumer synchronises itself, nothing is asked.
    drop(r.to_dlpack(&t, &with_stream(Some(-1))).unwrap());
    assert_eq!(calls().len(), 2);
    // A value DLPack's rules refuse: nothing is exported, nothing asked.
    let err = r.to_dlpack(&t, &with_stream(Some(-5))).unwrap_err();
    assert!(matches!(
        err,
        Error::Dispatch(DispatchError::InvalidStream {
            stream: -5,
            reason: StreamReason::NotAHandle,
            ..
        })
    ));
    assert_eq!(calls().len(), 2);
    // Outside an export: a stream of the producer's own.
    r.stream_hand_off(FAKE, Some(9), StreamRequest::Stream(0x7000))
        .unwrap();
    r.stream_hand_off(FAKE, Some(9), StreamRequest::NoSync)
        .unwrap();
    assert_eq!(calls()[2], (FAKE, Some(9), StreamRequest::Stream(0x7000)));
    assert_eq!(calls().len(), 3);
    drop(t);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failed_hand_off_releases_the_export() {
    let (r, streams) = with_streams(true);
    let (t, drops) = imported(&r, FAKE, vec![1.0; 4], &[4], None);
    let err = r.to_dlpack(&t, &with_stream(Some(0x7000))).unwrap_err();
    assert!(matches!(
        err,
        Error::Backend(BackendError::Unsupported { .. })
    ));
    assert_eq!(streams.calls().len(), 1);
    drop(t);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "no reference of the export outlives the error"
    );
}

#[test]
fn host_memory_takes_no_stream() {
    let (r, streams) = with_streams(false);
    let (t, _drops) = imported(&r, Device::cpu(), vec![1.0; 4], &[4], None);
    drop(r.to_dlpack(&t, &with_stream(None)).unwrap());
    drop(r.to_dlpack(&t, &with_stream(Some(-1))).unwrap());
    let err = r.to_dlpack(&t, &with_stream(Some(1))).unwrap_err();
    assert!(matches!(
        err,
        Error::Dispatch(DispatchError::InvalidStream {
            reason: StreamReason::HostMemory,
            ..
        })
    ));
    assert!(streams.calls().is_empty());
    // A backend without streams (the CPU's default) is asked and does nothing.
    dlport_core::backend::CpuBackend
        .stream_hand_off(Device::cpu(), None, StreamRequest::LegacyDefault)
        .unwrap();
}

#[test]
fn compact_names_padded_sub_byte_elements_as_the_reason_for_a_copy() {
    let r = Registry::with_cpu();
    let padded = ExportBuilder::new(
        vec![1u8, 2, 3, 4],
        DataType::new(dlport_core::abi::TypeCode::INT, 4, 1),
        &[4],
    )
    .subbyte_padded(true)
    .build()
    .unwrap();
    let t = r.from_dlpack(padded, &ImportOptions::default()).unwrap();
    let never = CompactOptions {
        alignment: Some(1),
        copy: CopyPolicy::Never,
        ..CompactOptions::default()
    };
    let e = r.compact(&t, &never).unwrap_err();
    assert_eq!(
        e,
        Error::Dispatch(DispatchError::CopyRequired {
            reason: CopyReason::Packed
        })
    );
    assert!(
        e.to_string().contains("reads sub-byte elements packed"),
        "{e}"
    );
}
