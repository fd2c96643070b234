//! The registry's compaction and stream hand-off through the C ABI, as C calls them: the same
//! code as the Rust API's (`Registry::compact`, `Registry::to_dlpack` with a stream). The
//! process's default registry is installed here first (before any entry runs) with a fake
//! backend with streams that records each hand-off, so the hand-off is seen without a GPU.

use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};
use std::sync::{Arc, OnceLock};

use dlport::cabi::*;
use dlport::ffi::*;
use dlport_core::abi::{DLTensor, RawManaged};
use dlport_core::backend::StreamRequest;
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor, Registry};
use dlport_testkit::storage::HostAs;
use dlport_testkit::streams::{FAKE, Streams};

/// The fake backend, registered in the process's default registry (the one the C ABI uses),
/// installed by the first test that runs.
fn streams() -> &'static Arc<Streams> {
    static STREAMS: OnceLock<Arc<Streams>> = OnceLock::new();
    STREAMS.get_or_init(|| {
        let s = Arc::new(Streams::new(false));
        let mut r = Registry::with_cpu();
        r.register(s.clone()).unwrap();
        r.install_default()
            .expect("the first default of this process");
        s
    })
}

/// A versioned managed tensor as C holds it.
fn versioned(m: ManagedTensor) -> *mut c_void {
    match m.into_raw() {
        RawManaged::Versioned(p) => p.as_ptr().cast(),
        RawManaged::Legacy(_) => unreachable!("the builder makes versioned tensors"),
    }
}

/// `values` on `device` with `shape` and `strides`, imported through `dlport_import`.
fn import(device: Device, values: Vec<f32>, shape: &[i64], strides: &[i64]) -> *mut DlportTensor {
    streams();
    let m = ExportBuilder::new(HostAs(values, device), DataType::FLOAT32, shape)
        .strides(strides)
        .build()
        .unwrap();
    let mut t = null_mut();
    // SAFETY: an owned versioned tensor, handed over; `t` writable.
    let status = unsafe { dlport_import(versioned(m), 1, null(), &mut t) };
    assert_eq!(status, DLPORT_OK);
    t
}

/// `dlport_export_stream` with `stream` (None: NULL), versioned, on the tensor's own device;
/// the status, and the export released.
fn export(t: *const DlportTensor, stream: Option<i64>) -> c_int {
    let (mut m, mut v) = (null_mut(), -1);
    let s = stream.as_ref().map_or(null(), |s| s as *const i64);
    // SAFETY: a live handle; `s` NULL or readable; the outs writable.
    let status = unsafe {
        dlport_export_stream(
            t,
            1,
            0,
            0,
            0,
            DlportCopy::IfNeeded as i32,
            s,
            &mut m,
            &mut v,
        )
    };
    if status == DLPORT_OK {
        // SAFETY: the export just made, released once.
        assert_eq!(unsafe { dlport_release(m, v) }, DLPORT_OK);
    } else {
        assert!(m.is_null(), "nothing written on error");
    }
    status
}

#[test]
fn the_stream_hand_off_from_c_goes_through_the_registrys_backend() {
    let calls = || streams().calls();
    let t = import(FAKE, vec![1.0; 4], &[4], &[1]);
    let before = calls().len();
    assert_eq!(export(t, Some(0x7000)), DLPORT_OK);
    assert_eq!(export(t, None), DLPORT_OK);
    // `dlport_export` is `stream=None`, by the same code.
    let (mut m, mut v) = (null_mut(), -1);
    // SAFETY: a live handle; the outs writable.
    let status = unsafe { dlport_export(t, 1, 0, 0, 0, 1, &mut m, &mut v) };
    assert_eq!(status, DLPORT_OK);
    // SAFETY: the export just made, released once.
    unsafe { dlport_release(m, v) };
    let got: Vec<_> = calls().into_iter().skip(before).collect();
    assert!(got.contains(&(FAKE, None, StreamRequest::Stream(0x7000))));
    assert_eq!(
        got.iter()
            .filter(|c| **c == (FAKE, None, StreamRequest::LegacyDefault))
            .count(),
        2
    );
    // -1 asks nothing; a value DLPack refuses is DLPORT_ERR_INVALID_STREAM, before export.
    assert_eq!(export(t, Some(-1)), DLPORT_OK);
    assert_eq!(export(t, Some(-5)), DLPORT_ERR_INVALID_STREAM);
    // Host memory takes NULL or -1 only.
    let host = import(Device::cpu(), vec![1.0; 4], &[4], &[1]);
    assert_eq!(export(host, None), DLPORT_OK);
    assert_eq!(export(host, Some(-1)), DLPORT_OK);
    assert_eq!(export(host, Some(2)), DLPORT_ERR_INVALID_STREAM);
    assert!(
        !calls()
            .iter()
            .any(|c| c.0 == Device::cpu() || c.2 == StreamRequest::NoSync)
    );
    // SAFETY: handles from dlport_import, freed once.
    unsafe {
        dlport_tensor_free(t);
        dlport_tensor_free(host);
    }
}

/// `dlport_tensor_compact`'s status and, on success, the result (the caller frees it).
fn compact(
    t: *const DlportTensor,
    alignment: u64,
    copy: DlportCopy,
    max_alloc: u64,
) -> Result<*mut DlportTensor, c_int> {
    let mut out = null_mut();
    // SAFETY: a live handle; `out` writable.
    match unsafe { dlport_tensor_compact(t, alignment, copy as i32, max_alloc, &mut out) } {
        DLPORT_OK => Ok(out),
        status => {
            assert!(out.is_null());
            Err(status)
        }
    }
}

fn view(t: *const DlportTensor) -> DLTensor {
    // SAFETY: DLTensor is plain data; zeroes are overwritten.
    let mut v: DLTensor = unsafe { std::mem::zeroed() };
    // SAFETY: a live handle; `v` writable.
    assert_eq!(unsafe { dlport_tensor_view(t, &mut v) }, DLPORT_OK);
    v
}

#[test]
fn compaction_from_c_is_the_registrys() {
    // Transposed: a row-major copy, 64-byte aligned by default.
    let t = import(Device::cpu(), vec![1.0, 2.0, 3.0, 4.0], &[2, 2], &[1, 2]);
    let c = compact(t, 0, DlportCopy::IfNeeded, 0).unwrap();
    let v = view(c);
    assert_eq!(v.data as usize % 64, 0);
    // SAFETY: the view's arrays and data live while `c` does: 2 strides, 4 floats.
    unsafe {
        assert_eq!(std::slice::from_raw_parts(v.strides, 2), [2, 1]);
        assert_eq!(
            std::slice::from_raw_parts(v.data.cast::<f32>(), 4),
            [1.0, 3.0, 2.0, 4.0]
        );
    }
    // Compact already: the same memory, a new handle.
    let same = compact(c, 64, DlportCopy::Never, 0).unwrap();
    assert_eq!(view(same).data, v.data);
    // Never on a strided tensor; the alignment range; the allocation limit.
    assert_eq!(
        compact(t, 0, DlportCopy::Never, 0).unwrap_err(),
        DLPORT_ERR_COPY_REQUIRED
    );
    for bad in [3u64, 48, 1 << 31] {
        assert_eq!(
            compact(t, bad, DlportCopy::IfNeeded, 0).unwrap_err(),
            DLPORT_ERR_INVALID_OPTION,
            "alignment {bad}"
        );
    }
    let aligned = compact(t, 4096, DlportCopy::IfNeeded, 0).unwrap();
    assert_eq!(view(aligned).data as usize % 4096, 0);
    assert_eq!(
        compact(t, 0, DlportCopy::Always, 8).unwrap_err(),
        DLPORT_ERR_ALLOCATION_LIMIT
    );
    // SAFETY: handles from dlport, freed once.
    unsafe {
        for h in [t, c, same, aligned] {
            dlport_tensor_free(h);
        }
    }
}

#[test]
fn dlport_compact_compacts_a_managed_tensor_through_the_registry() {
    streams();
    for (copy, want) in [
        (DlportCopy::IfNeeded, DLPORT_OK),
        (DlportCopy::Never, DLPORT_ERR_COPY_REQUIRED),
    ] {
        let m = ExportBuilder::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])
            .strides(&[1, 2])
            .build()
            .unwrap();
        let mut out: *mut c_void = null_mut();
        // SAFETY: an owned versioned tensor, handed over; `out` writable.
        let status = unsafe { dlport_compact(versioned(m), 1, 1, copy as i32, &mut out) };
        assert_eq!(status, want);
        if status != DLPORT_OK {
            continue;
        }
        // SAFETY: a versioned export of dlport's.
        let m = unsafe { ManagedTensor::from_raw_versioned(out.cast()) }.unwrap();
        let v = m.view();
        assert!(v.contiguity().is_row_major() && m.is_copied());
        assert_eq!(v.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
        assert_eq!(v.dtype(), DataType::FLOAT32);
    }
}
