//! The malformed-input table of `dlport-testkit` through the C ABI: every case goes through
//! `dlport_describe` (borrowing) and `dlport_import` (consuming), asserts the exact outcome
//! (status and message of an error; the numbers of an accepted tensor), and checks that the
//! producer's deleter ran exactly once. dlport-core's `conformance` test drives the same table
//! through the Rust API. The other tests cover NULL pointers, a NULL deleter, typed access and
//! a double release.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;

use dlport::ffi::{
    DlportTensor, dlport_describe, dlport_import, dlport_last_error, dlport_release,
    dlport_string_free, dlport_tensor_data, dlport_tensor_describe, dlport_tensor_free,
};
use dlport_core::abi::{DLManagedTensorVersioned, DLTensor};
use dlport_core::error::{AccessError, LayoutError};
use dlport_core::layout::Contiguity;
use dlport_core::{DataType, Device, Error, ExportBuilder, ManagedTensor};
use dlport_testkit::malformed::{self, Case, Expect, Outcome, case, v};

/// The C ABI keeps its last error per thread; tests run in parallel threads, which is fine.
static C_LOCK: Mutex<()> = Mutex::new(());

/// The message the last failed call left on this thread.
fn last_error() -> String {
    // SAFETY: a failed call leaves a NUL-terminated message for this thread, valid until the
    // next call on it.
    unsafe { CStr::from_ptr(dlport_last_error()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// Takes a JSON string dlport returned, frees it and parses it.
fn take_json(json: *mut c_char) -> serde_json::Value {
    // SAFETY: a NUL-terminated string from dlport, not freed yet.
    let text = unsafe { CStr::from_ptr(json) }.to_str().unwrap().to_owned();
    // SAFETY: returned by dlport, freed once.
    unsafe { dlport_string_free(json) };
    serde_json::from_str(&text).unwrap()
}

/// The name `dlport_describe` gives a contiguity.
fn contiguity_name(c: Contiguity) -> &'static str {
    match c {
        Contiguity::Both => "both",
        Contiguity::RowMajor => "row_major",
        Contiguity::ColumnMajor => "column_major",
        Contiguity::Permuted => "permuted",
        Contiguity::Strided => "strided",
        other => panic!("no JSON name for {other:?}"),
    }
}

/// The differences between a description's numbers and the expected ones.
fn compare(json: &serde_json::Value, want: &Outcome) -> Vec<String> {
    let expected = serde_json::json!({
        "numel": want.numel,
        "contiguity": contiguity_name(want.contiguity),
        "byte_span": [want.span.0, want.span.1],
        "strides": want.strides,
    });
    ["numel", "contiguity", "byte_span", "strides"]
        .into_iter()
        .filter(|k| json[k] != expected[k])
        .map(|k| format!("{k}: got {}, expected {}", json[k], expected[k]))
        .collect()
}

/// The status and message an error must come back as.
fn check_error(status: c_int, expected: &Error, problems: &mut Vec<String>) {
    if status != expected.code() as c_int {
        problems.push(format!("status {status}, expected {}", expected.code()));
    }
    let message = last_error();
    if message != expected.to_string() {
        problems.push(format!(
            "message {message:?}, expected {:?}",
            expected.to_string()
        ));
    }
}

/// `dlport_describe`: validates without taking the tensor; the producer releases it after.
fn through_describe(case: &Case, expect: &Expect) -> Vec<String> {
    let mut problems = Vec::new();
    let produced = case.produce();
    let deleted = produced.deleted();
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: a live producer tensor of the form given, readable during the call; `json` is
    // writable.
    let status = unsafe {
        dlport_describe(
            produced.as_ptr(),
            c_int::from(produced.is_versioned()),
            &mut json,
        )
    };
    match expect {
        Expect::Err(e) => {
            check_error(status, e, &mut problems);
            if !json.is_null() {
                problems.push("a description on error".to_owned());
            }
        }
        Expect::Ok(want) if status == 0 => problems.extend(compare(&take_json(json), want)),
        Expect::Ok(_) => problems.push(format!("status {status}: {}", last_error())),
    }
    if deleted.get() != 0 {
        problems.push("dlport_describe released a tensor it borrows".to_owned());
    }
    drop(produced);
    if deleted.get() != 1 {
        problems.push(format!("released {} times by its producer", deleted.get()));
    }
    problems
}

/// `dlport_import`: takes the tensor. A refusal releases it at once; an accepted tensor goes on
/// a backend of the native registry (a view: no copy) and is released with the handle.
fn through_import(case: &Case, expect: &Expect) -> Vec<String> {
    let mut problems = Vec::new();
    let produced = case.produce();
    let (versioned, deleted, data) = (produced.is_versioned(), produced.deleted(), produced.data());
    let mut out: *mut DlportTensor = std::ptr::null_mut();
    // SAFETY: a fresh producer tensor handed over once; `out` is writable.
    let status = unsafe {
        dlport_import(
            produced.hand_over(),
            c_int::from(versioned),
            std::ptr::null(),
            &mut out,
        )
    };
    // A valid tensor still needs a backend for its device: without one the import is refused
    // as the registry refuses it.
    let registry = dlport_native::install().expect("the native default registry");
    let refusal = match expect {
        Expect::Err(e) => Some(e.clone()),
        Expect::Ok(_) => registry.resolve(case.device).err(),
    };
    if let Some(e) = refusal {
        check_error(status, &e, &mut problems);
        if !out.is_null() {
            problems.push("a handle on error".to_owned());
        }
    } else if status != 0 {
        problems.push(format!("status {status}: {}", last_error()));
    } else if let Expect::Ok(want) = expect {
        if deleted.get() != 0 {
            problems.push("released while a handle views it".to_owned());
        }
        let mut json: *mut c_char = std::ptr::null_mut();
        // SAFETY: a live handle; `json` is writable.
        if unsafe { dlport_tensor_describe(out, &mut json) } == 0 {
            problems.extend(compare(&take_json(json), want));
        } else {
            problems.push(format!("dlport_tensor_describe: {}", last_error()));
        }
        let (mut got_data, mut got_offset) = (std::ptr::null_mut::<c_void>(), u64::MAX);
        // SAFETY: a live handle; the out pointers are writable.
        let status = unsafe { dlport_tensor_data(out, &mut got_data, &mut got_offset) };
        if (status, got_data, got_offset) != (0, data, case.byte_offset) {
            problems.push(format!(
                "dlport_tensor_data: status {status}, {got_data:?} + {got_offset}, expected the \
                 producer's {data:?} + {}",
                case.byte_offset
            ));
        }
        // SAFETY: a live handle, freed once.
        unsafe { dlport_tensor_free(out) };
    }
    if deleted.get() != 1 {
        problems.push(format!("the deleter ran {} times, not once", deleted.get()));
    }
    problems
}

#[test]
fn every_case_of_the_table_has_its_exact_outcome_through_the_c_abi() {
    let table = malformed::table();
    assert!(
        table.len() >= malformed::DISTINCT_BEFORE,
        "the table has {} cases",
        table.len()
    );
    let refused = table.iter().filter(|(_, e)| e.error().is_some()).count();
    println!(
        "the malformed-input table through the C ABI: {} cases, {refused} refused",
        table.len()
    );
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut failures = Vec::new();
    for (case, expect) in &table {
        for (path, problems) in [
            ("dlport_describe", through_describe(case, expect)),
            ("dlport_import", through_import(case, expect)),
        ] {
            for p in problems {
                failures.push(format!("{} ({path}): {p}\n    case {case:?}", case.rule));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures over {} cases:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

#[test]
fn null_managed_pointers() {
    // SAFETY: NULL is allowed.
    let v = unsafe { ManagedTensor::from_raw_versioned(std::ptr::null_mut()) };
    assert_eq!(
        v.unwrap_err(),
        Error::Layout(LayoutError::NullManagedTensor)
    );
    // SAFETY: NULL is allowed.
    let l = unsafe { ManagedTensor::from_raw_legacy(std::ptr::null_mut()) };
    assert_eq!(
        l.unwrap_err(),
        Error::Layout(LayoutError::NullManagedTensor)
    );
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut out: *mut DlportTensor = std::ptr::null_mut();
    // SAFETY: NULL input is allowed; `out` is writable.
    let status = unsafe { dlport_import(std::ptr::null_mut(), 1, std::ptr::null(), &mut out) };
    assert_eq!(status, 1);
}

#[test]
fn a_null_deleter_is_legal() {
    let mut shape = [3i64];
    let mut strides = [1i64];
    let mut data = [1.0f32, 2.0, 3.0];
    let mut m = DLManagedTensorVersioned {
        version: v(1, 3),
        manager_ctx: std::ptr::null_mut(),
        deleter: None,
        flags: 0,
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: Device::cpu(),
            ndim: 1,
            dtype: DataType::FLOAT32,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        },
    };
    // SAFETY: everything lives on this frame longer than the import.
    let t = unsafe { ManagedTensor::from_raw_versioned(&mut m) }.unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
    drop(t);
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: as above; the C path also accepts a NULL deleter.
    let status = unsafe { dlport_release((&mut m as *mut DLManagedTensorVersioned).cast(), 1) };
    assert_eq!(status, 0);
}

#[test]
fn typed_access_refusals() {
    let odd = ExportBuilder::from_vec(vec![0f32; 8], &[7])
        .byte_offset(1)
        .build()
        .unwrap();
    let addr = odd.view().first_element_address().unwrap();
    assert_eq!(
        odd.as_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::Misaligned {
            address: addr,
            required: 4
        })
    );
    assert_eq!(
        odd.as_slice::<u32>().unwrap_err(),
        Error::Access(AccessError::DtypeMismatch {
            requested: DataType::UINT32,
            actual: DataType::FLOAT32
        })
    );
    let mut ro = ExportBuilder::from_vec(vec![0f32; 8], &[8])
        .read_only(true)
        .build()
        .unwrap();
    assert_eq!(
        ro.as_mut_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::ReadOnly)
    );
    let strided = ExportBuilder::from_vec(vec![0f32; 8], &[4])
        .strides(&[2])
        .build()
        .unwrap();
    assert_eq!(
        strided.as_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::NotContiguous {
            contiguity: dlport_core::layout::Contiguity::Strided
        })
    );
}

#[test]
fn a_double_release_through_the_c_abi_is_detected_for_dlport_exports() {
    use dlport::ffi::{dlport_convert, dlport_export_counts};
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let produced = case("a 2×3 float32 tensor").matrix().produce();
    let (versioned, deleted) = (produced.is_versioned(), produced.deleted());
    let ptr = produced.hand_over();
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a fresh producer tensor, handed over; `out` writable.
    let status = unsafe { dlport_convert(ptr, c_int::from(versioned), 0, &mut out) };
    assert_eq!(status, 0);
    let (mut e0, mut r0) = (0u64, 0u64);
    // SAFETY: writable.
    unsafe { dlport_export_counts(&mut e0, &mut r0) };
    // SAFETY: our export, released once…
    assert_eq!(unsafe { dlport_release(out, 0) }, 0);
    assert_eq!(deleted.get(), 1);
    // …and a buggy second release is refused instead of running the deleter again.
    // SAFETY: the pointer is stale; dlport recognises it and does not dereference it.
    assert_eq!(unsafe { dlport_release(out, 0) }, -2);
    // SAFETY: the failed call left a message.
    let message = unsafe { CStr::from_ptr(dlport_last_error()) }
        .to_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("was already released"), "{message}");
    assert_eq!(deleted.get(), 1, "no second deleter call");
    let (mut e1, mut r1) = (0u64, 0u64);
    // SAFETY: writable.
    unsafe { dlport_export_counts(&mut e1, &mut r1) };
    assert_eq!(r1 - r0, 1);
    let _ = (
        e1,
        dlport_tensor_free as unsafe extern "C" fn(*mut DlportTensor),
    );
}

/// The rule of device ids at the C ABI's device arguments, for every device of the testkit's
/// list: `DlportImportOptions.target_device_*` and `advertised_device_*` (`dlport_import`),
/// `dlport_export`'s `dl_device_*`, `dlport_host_view`'s `advertised_device_*` and
/// `dlport_alloc`'s device. A refused device is `DLPORT_ERR_INVALID_DEVICE` with the core's
/// message naming the argument and the device, and a consumed tensor is released once.
#[test]
fn every_c_device_argument_applies_the_rule_of_device_ids() {
    use dlport::ffi::{DlportImportOptions, dlport_alloc, dlport_export, dlport_host_view};
    use dlport_core::backend::DeviceField;
    use dlport_core::error::DispatchError;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let failures = std::cell::RefCell::new(Vec::new());
    let expect = |field: DeviceField, device: Device| {
        Error::Dispatch(DispatchError::InvalidDevice { field, device })
    };
    // A fresh owned versioned CPU tensor whose storage counts its drops.
    struct Counted(Vec<f32>, Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    // SAFETY: the vector's buffer is stable and owned by the value.
    unsafe impl dlport_core::backend::TensorStorage for Counted {
        fn data_ptr(&mut self) -> *mut c_void {
            self.0.as_mut_ptr().cast()
        }
        fn byte_len(&self) -> usize {
            16
        }
    }
    let fresh = || {
        let drops = Arc::new(AtomicUsize::new(0));
        let m = ExportBuilder::new(
            Counted(vec![1.0; 4], drops.clone()),
            DataType::FLOAT32,
            &[4],
        )
        .build()
        .unwrap();
        let p: *mut c_void = match m.into_raw() {
            dlport_core::abi::RawManaged::Versioned(p) => p.as_ptr().cast(),
            dlport_core::abi::RawManaged::Legacy(_) => unreachable!("built versioned"),
        };
        (p, drops)
    };
    for (device, accepted) in malformed::device_ids() {
        let (t, id) = (device.device_type.0, device.device_id);
        let outcome = |door: &str, status: c_int, field: DeviceField| {
            let rule = Error::code(&expect(field, device)) as c_int;
            match (accepted, status == rule) {
                (true, true) => failures
                    .borrow_mut()
                    .push(format!("{door}: ({t}, {id}) refused: {}", last_error())),
                (false, false) => failures
                    .borrow_mut()
                    .push(format!("{door}: ({t}, {id}) status {status}, not {rule}")),
                (false, true) if last_error() != expect(field, device).to_string() => failures
                    .borrow_mut()
                    .push(format!("{door}: ({t}, {id}) said {:?}", last_error())),
                _ => {}
            }
        };
        for (door, field) in [
            ("target_device", DeviceField::Requested),
            ("advertised_device", DeviceField::Advertised),
        ] {
            let (m, drops) = fresh();
            let mut opts = DlportImportOptions {
                copy: 1,
                ..Default::default()
            };
            if field == DeviceField::Requested {
                (opts.target_device_type, opts.target_device_id) = (t, id);
            } else {
                (opts.advertised_device_type, opts.advertised_device_id) = (t, id);
            }
            let mut out: *mut DlportTensor = std::ptr::null_mut();
            // SAFETY: an owned versioned tensor handed over; the options and `out` are valid.
            let status = unsafe { dlport_import(m, 1, &opts, &mut out) };
            outcome(door, status, field);
            // SAFETY: NULL or a live handle, freed once.
            unsafe { dlport_tensor_free(out) };
            if drops.load(Ordering::SeqCst) != 1 {
                failures.borrow_mut().push(format!(
                    "{door}: ({t}, {id}) released {} times",
                    drops.load(Ordering::SeqCst)
                ));
            }
        }
        let (m, drops) = fresh();
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: an owned versioned tensor handed over; `out` is writable.
        let status = unsafe { dlport_host_view(m, 1, t, id, 1, &mut out) };
        outcome("dlport_host_view", status, DeviceField::Advertised);
        if status == 0 {
            // SAFETY: a tensor dlport handed out, released once.
            unsafe { dlport_release(out, 1) };
        }
        if drops.load(Ordering::SeqCst) != 1 {
            failures.borrow_mut().push(format!(
                "dlport_host_view: ({t}, {id}) released {} times",
                drops.load(Ordering::SeqCst)
            ));
        }
        let (m, _) = fresh();
        let mut handle: *mut DlportTensor = std::ptr::null_mut();
        // SAFETY: as above.
        let status = unsafe { dlport_import(m, 1, std::ptr::null(), &mut handle) };
        assert_eq!(status, 0);
        let (mut out, mut versioned) = (std::ptr::null_mut::<c_void>(), 0);
        // SAFETY: a live handle; the out pointers are writable.
        let status = unsafe { dlport_export(handle, 1, 3, t, id, 1, &mut out, &mut versioned) };
        outcome("dlport_export", status, DeviceField::DlDevice);
        if status == 0 {
            // SAFETY: a tensor dlport handed out, released once.
            unsafe { dlport_release(out, versioned) };
        }
        // SAFETY: a live handle, freed once.
        unsafe { dlport_tensor_free(handle) };
        let shape = [4i64];
        let mut alloc: *mut DlportTensor = std::ptr::null_mut();
        // SAFETY: NULL backend; `shape` holds 1 value; `alloc` is writable.
        let status = unsafe {
            dlport_alloc(
                std::ptr::null(),
                t,
                id,
                2,
                32,
                1,
                shape.as_ptr(),
                1,
                &mut alloc,
            )
        };
        outcome("dlport_alloc", status, DeviceField::Requested);
        // SAFETY: NULL or a live handle, freed once.
        unsafe { dlport_tensor_free(alloc) };
    }
    // A device id with no device type would be ignored: refused by name.
    let (m, drops) = fresh();
    let opts = DlportImportOptions {
        copy: 1,
        target_device_id: 5,
        ..Default::default()
    };
    let mut out: *mut DlportTensor = std::ptr::null_mut();
    // SAFETY: as above.
    let status = unsafe { dlport_import(m, 1, &opts, &mut out) };
    assert_eq!(status, dlport::ffi::DLPORT_INVALID_ARGUMENT);
    assert!(
        last_error().starts_with("target_device_id = 5 with target_device_type = 0"),
        "{}",
        last_error()
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let failures = failures.into_inner();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
