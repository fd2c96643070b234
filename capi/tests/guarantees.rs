//! The guarantees through the C ABI: flags a legacy consumer cannot carry, options honoured or
//! refused, user-space addresses, allocation limits, one device per tensor, and copies that
//! handle whatever import accepts. (Teardown and release tracking have C programs of their own.)

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;

use dlport::ffi::*;
use dlport_core::abi::{FLAG_READ_ONLY, RawManaged, TypeCode};
use dlport_core::{DataType, ExportBuilder, ManagedTensor};

/// Tests that change the process-wide limit or read the last error hold this.
static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn raw(m: ManagedTensor) -> (*mut c_void, c_int) {
    match m.into_raw() {
        RawManaged::Versioned(p) => (p.as_ptr().cast(), 1),
        RawManaged::Legacy(p) => (p.as_ptr().cast(), 0),
    }
}

fn last_error() -> String {
    // SAFETY: called right after a failure on this thread.
    unsafe { CStr::from_ptr(dlport_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn describe_tensor(t: *const DlportTensor) -> serde_json::Value {
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a live handle; `json` is writable.
    assert_eq!(unsafe { dlport_tensor_describe(t, &mut json) }, DLPORT_OK);
    // SAFETY: a string from dlport, freed once.
    let text = unsafe { CStr::from_ptr(json) }.to_str().unwrap().to_owned();
    // SAFETY: as above.
    unsafe { dlport_string_free(json) };
    serde_json::from_str(&text).unwrap()
}

fn import(
    m: ManagedTensor,
    opts: &DlportImportOptions,
) -> Result<*mut DlportTensor, (c_int, String)> {
    let (p, v) = raw(m);
    let mut out: *mut DlportTensor = std::ptr::null_mut();
    // SAFETY: an owned tensor handed over; `out` is writable.
    let status = unsafe { dlport_import(p, v, opts, &mut out) };
    if status == DLPORT_OK {
        Ok(out)
    } else {
        Err((status, last_error()))
    }
}

fn options() -> DlportImportOptions {
    DlportImportOptions {
        copy: 1,
        ..Default::default()
    }
}

/// Takes back a tensor dlport handed out.
fn take(p: *mut c_void, versioned: c_int) -> ManagedTensor {
    // SAFETY: an export from dlport, handed to us once.
    unsafe {
        if versioned != 0 {
            ManagedTensor::from_raw_versioned(p.cast())
        } else {
            ManagedTensor::from_raw_legacy(p.cast())
        }
    }
    .unwrap()
}

// ── 4. flags lost on the way out ──

#[test]
fn read_only_never_reaches_a_legacy_consumer_by_reference() {
    let _l = lock();
    let ro = || {
        ExportBuilder::from_vec(vec![1.0f32, 2.0, 3.0], &[3])
            .read_only(true)
            .build()
            .unwrap()
    };
    // dlport_convert to legacy: refused, naming the flag; the input is released.
    let (p, v) = raw(ro());
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: owned input, writable out.
    let status = unsafe { dlport_convert(p, v, 0, &mut out) };
    assert_eq!(status, 36, "{}", last_error());
    assert!(last_error().contains("READ_ONLY"), "{}", last_error());
    assert!(out.is_null());
    // dlport_export to a legacy consumer: a copy (other memory), or with copy=never an error.
    let t = import(ro(), &options()).unwrap();
    let data = describe_tensor(t)["data"].as_u64().unwrap();
    let (mut m, mut versioned) = (std::ptr::null_mut(), -1);
    // SAFETY: a live handle, writable outs.
    let status = unsafe { dlport_export(t, 0, 0, 0, 0, 0, &mut m, &mut versioned) };
    assert_eq!(status, 25, "{}", last_error());
    assert!(last_error().contains("READ_ONLY"), "{}", last_error());
    // SAFETY: as above.
    let status = unsafe { dlport_export(t, 0, 0, 0, 0, 1, &mut m, &mut versioned) };
    assert_eq!(status, DLPORT_OK, "{}", last_error());
    assert_eq!(versioned, 0);
    let copy = take(m, versioned);
    assert_ne!(
        copy.view().data() as u64,
        data,
        "a copy, not the read-only memory"
    );
    assert_eq!(copy.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
    // A versioned consumer gets the view with READ_ONLY.
    // SAFETY: as above.
    let status = unsafe { dlport_export(t, 1, 3, 0, 0, 0, &mut m, &mut versioned) };
    assert_eq!(status, 0);
    let view = take(m, versioned);
    assert_eq!(view.view().data() as u64, data);
    assert_ne!(view.flags() & FLAG_READ_ONLY, 0);
    drop((copy, view));
    // SAFETY: a live handle, freed once.
    unsafe { dlport_tensor_free(t) };
}

// ── 5. options honoured or refused ──

#[test]
fn alignment_is_honoured_or_refused() {
    let _l = lock();
    // The table of every door (python/tests/test_limits.py, core's check_alignment): powers of
    // two up to 2^30 accepted, the rest refused (0 is C's "none").
    for alignment in [1u32, 2, 64, 128, 4096, 8192, 1 << 20] {
        let src = ExportBuilder::from_vec((0..12).map(|x| x as f32).collect(), &[3, 4])
            .strides(&[1, 3])
            .build()
            .unwrap();
        let t = import(
            src,
            &DlportImportOptions {
                layout: 2,
                alignment,
                ..options()
            },
        )
        .unwrap();
        let (mut data, mut offset) = (std::ptr::null_mut(), 0u64);
        // SAFETY: a live handle, writable outs.
        assert_eq!(unsafe { dlport_tensor_data(t, &mut data, &mut offset) }, 0);
        let address = data as u64 + offset;
        assert_eq!(
            address % u64::from(alignment),
            0,
            "alignment {alignment}: {address:#x}"
        );
        // SAFETY: a live handle, freed once.
        unsafe { dlport_tensor_free(t) };
    }
    // 2^30 is accepted as an option: with DLPORT_COPY_NEVER the refusal is the copy's, not the
    // option's.
    let src = ExportBuilder::from_vec(vec![0f32; 4], &[4])
        .build()
        .unwrap();
    // (A view where the data happens to be 2^30-aligned.)
    if let Err(err) = import(
        src,
        &DlportImportOptions {
            alignment: 1 << 30,
            copy: 0,
            ..options()
        },
    ) {
        assert_ne!(err.0, 38, "{}", err.1);
        assert!(err.1.contains("1073741824-byte aligned"), "{}", err.1);
    }
    for bad in [3u32, 1 << 31] {
        let src = ExportBuilder::from_vec(vec![0f32; 4], &[4])
            .build()
            .unwrap();
        let err = import(
            src,
            &DlportImportOptions {
                alignment: bad,
                ..options()
            },
        )
        .unwrap_err();
        assert_eq!(err.0, 38, "{}", err.1);
        assert!(err.1.contains(&format!("alignment = {bad}")), "{}", err.1);
    }
}

// ── 6. addresses outside user space ──

#[test]
fn byte_offset_past_user_space_is_refused_by_describe_import_and_compact() {
    let _l = lock();
    let make = || {
        let e = ExportBuilder::from_vec(vec![0u8; 64], &[64])
            .build()
            .unwrap();
        let (p, v) = raw(e);
        // SAFETY: our own fresh export: nobody else reads it while we change one field.
        unsafe {
            (*p.cast::<dlport_core::abi::DLManagedTensorVersioned>())
                .dl_tensor
                .byte_offset = 1 << 63
        };
        (p, v)
    };
    let (p, v) = make();
    let mut json = std::ptr::null_mut();
    // SAFETY: a live tensor (borrowed), writable out.
    assert_eq!(unsafe { dlport_describe(p, v, &mut json) }, 11);
    // SAFETY: still ours: describe borrows; released once here.
    assert_eq!(unsafe { dlport_release(p, v) }, 0);
    let (p, v) = make();
    let mut out = std::ptr::null_mut();
    // SAFETY: consuming call on an owned tensor.
    assert_eq!(unsafe { dlport_compact(p, v, 1, 1, &mut out) }, 11);
    assert!(
        last_error().contains("byte_offset = 9223372036854775808"),
        "{}",
        last_error()
    );
}

// ── 7. allocation limits ──

#[test]
fn one_broadcast_byte_cannot_allocate_gigabytes() {
    let _l = lock();
    let one = || {
        ExportBuilder::from_vec(vec![7u8], &[1 << 32])
            .strides(&[0])
            .build()
            .unwrap()
    };
    // Per call.
    let err = import(
        one(),
        &DlportImportOptions {
            copy: 2,
            max_alloc_bytes: 256 << 20,
            ..options()
        },
    )
    .unwrap_err();
    assert_eq!(err.0, 37, "{}", err.1);
    assert!(
        err.1.contains("4294967296 bytes") && err.1.contains("268435456"),
        "{}",
        err.1
    );
    // The process default, for compact (which has no options).
    dlport_set_alloc_limit(1 << 20);
    assert_eq!(dlport_alloc_limit(), 1 << 20);
    // It is core's limit, which every door reads …
    assert_eq!(
        dlport_core::Registry::process_default().alloc_limit(None),
        1 << 20
    );
    // … and a call cannot raise it.
    let err = import(
        one(),
        &DlportImportOptions {
            copy: 2,
            max_alloc_bytes: 1 << 40,
            ..options()
        },
    )
    .unwrap_err();
    assert_eq!(err.0, 37, "{}", err.1);
    assert!(err.1.contains("limit of 1048576 bytes"), "{}", err.1);
    let (p, v) = raw(one());
    let mut out = std::ptr::null_mut();
    // SAFETY: consuming call on an owned tensor.
    let status = unsafe { dlport_compact(p, v, 1, 1, &mut out) };
    // DLPORT_ERR_ALLOCATION_LIMIT is decided from the size before anything is allocated.
    assert_eq!(status, 37, "{}", last_error());
    assert!(out.is_null(), "nothing made");
    // dlport_alloc too, with the exact size of 2^60 float32 (2^62 bytes).
    let shape = [1i64 << 60];
    let mut t = std::ptr::null_mut();
    // SAFETY: readable shape, writable out.
    let status =
        unsafe { dlport_alloc(std::ptr::null(), 1, 0, 2, 32, 1, shape.as_ptr(), 1, &mut t) };
    assert_eq!(status, 37);
    assert!(
        last_error().contains("4611686018427387904 bytes"),
        "{}",
        last_error()
    );
    dlport_set_alloc_limit(0);
    assert!(
        dlport_alloc_limit() > 1 << 20,
        "back to the machine's memory"
    );
    // Past the machine's memory, by default.
    // SAFETY: as above.
    let status =
        unsafe { dlport_alloc(std::ptr::null(), 1, 0, 2, 32, 1, shape.as_ptr(), 1, &mut t) };
    assert_eq!(status, 37, "{}", last_error());
    // float with 7 bits is no dtype to allocate.
    let shape = [4i64];
    // SAFETY: as above.
    let status =
        unsafe { dlport_alloc(std::ptr::null(), 1, 0, 2, 7, 1, shape.as_ptr(), 1, &mut t) };
    assert_eq!(status, 13, "{}", last_error());
}

// ── 8. one device per tensor ──

#[test]
fn describe_and_export_agree_on_pinned_and_managed_imports() {
    let _l = lock();
    for (device_type, name) in [(3, "cuda_host:0"), (13, "cuda_managed:0")] {
        let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
            .build()
            .unwrap();
        let t = import(
            src,
            &DlportImportOptions {
                advertised_device_type: device_type,
                ..options()
            },
        )
        .unwrap();
        let d = describe_tensor(t);
        assert_eq!(d["device"], name, "{d}");
        let (mut m, mut versioned) = (std::ptr::null_mut(), -1);
        // SAFETY: a live handle, writable outs.
        let status = unsafe { dlport_export(t, 1, 3, 0, 0, 0, &mut m, &mut versioned) };
        assert_eq!(status, 0);
        let out = take(m, versioned);
        assert_eq!(out.view().device().device_type.0, device_type);
        assert_eq!(out.view().device().to_string(), name);
        drop(out);
        // SAFETY: a live handle, freed once.
        unsafe { dlport_tensor_free(t) };
    }
}

// ── 9. what import accepts, a copy handles ──

#[test]
fn compact_handles_padded_transposed_and_empty_tensors() {
    let _l = lock();
    let compact_as = |m: ManagedTensor, to_versioned: c_int| {
        let (p, v) = raw(m);
        let mut out = std::ptr::null_mut();
        // SAFETY: consuming call on an owned tensor.
        let status = unsafe { dlport_compact(p, v, to_versioned, 1, &mut out) };
        assert_eq!(status, 0, "{}", last_error());
        take(out, to_versioned)
    };
    let compact = |m| compact_as(m, 1);
    let int4 = DataType::new(TypeCode::INT, 4, 1);
    let padded = ExportBuilder::new(vec![1u8, 2, 3, 4], int4, &[4])
        .subbyte_padded(true)
        .build()
        .unwrap();
    // A versioned consumer gets it padded with the flag (a view) or packed without it (a copy,
    // made when the Vec was not 64-byte aligned): never padded bytes without the flag.
    let kept = compact(padded);
    let padded_flag = kept.flags() & dlport_core::abi::FLAG_IS_SUBBYTE_TYPE_PADDED != 0;
    let expected: &[u8] = if padded_flag {
        &[1, 2, 3, 4]
    } else {
        &[0x21, 0x43]
    };
    assert_eq!(kept.view().as_bytes().unwrap(), expected);
    // … a legacy one gets it packed, since the flag cannot travel.
    let padded = ExportBuilder::new(vec![1u8, 2, 3, 4], int4, &[4])
        .subbyte_padded(true)
        .build()
        .unwrap();
    assert_eq!(
        compact_as(padded, 0).view().as_bytes().unwrap(),
        &[0x21, 0x43]
    );
    let transposed = ExportBuilder::new(vec![0x21u8, 0x43], int4, &[2, 2])
        .strides(&[1, 2])
        .build()
        .unwrap();
    assert_eq!(
        compact(transposed).view().as_bytes().unwrap(),
        &[0x31, 0x42]
    );
    let empty = ExportBuilder::from_vec(Vec::<f32>::new(), &[i64::MAX, i64::MAX, 0])
        .strides(&[0, 0, 1])
        .build()
        .unwrap();
    assert_eq!(compact(empty).view().shape(), &[i64::MAX, i64::MAX, 0]);
}
