//! `dlport_pjrt_probe` from C's side: the report of dlport-native's probe as a string freed by
//! `dlport_string_free`, and the argument errors. The report itself is tested in
//! native/tests/pjrt_probe.rs; this checks the entry. With the real XLA CPU plugin
//! (`DLPORT_PJRT_PLUGIN`; skipped visibly without it) and with a library that is no plugin.

use std::ffi::{CStr, CString, c_char};

use dlport::cabi::{DLPORT_ERR_BACKEND, DLPORT_INVALID_ARGUMENT, DLPORT_OK};
use dlport::ffi::dlport_string_free;
use dlport::pjrt_probe::dlport_pjrt_probe;

#[test]
fn arguments_are_checked_and_the_output_is_untouched_on_error() {
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: a NULL path is refused before anything is read.
    let rc = unsafe { dlport_pjrt_probe(std::ptr::null(), &mut out) };
    assert_eq!(rc, DLPORT_INVALID_ARGUMENT);
    assert!(out.is_null());
    let path = CString::new("/nonexistent/libno_pjrt.so").unwrap();
    // SAFETY: a NUL-terminated path; NULL output refused.
    let rc = unsafe { dlport_pjrt_probe(path.as_ptr(), std::ptr::null_mut()) };
    assert_eq!(rc, DLPORT_INVALID_ARGUMENT);
    // SAFETY: as above, a writable output.
    let rc = unsafe { dlport_pjrt_probe(path.as_ptr(), &mut out) };
    assert_eq!(rc, DLPORT_ERR_BACKEND);
    assert!(out.is_null());
}

#[test]
fn the_report_is_the_probes_text() {
    let Ok(plugin) = std::env::var("DLPORT_PJRT_PLUGIN") else {
        eprintln!(
            "SKIP the probe's report: DLPORT_PJRT_PLUGIN is not set (scripts/pjrt-test.sh sets it)"
        );
        return;
    };
    let path = CString::new(plugin.clone()).unwrap();
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path to a plugin the test trusts, a writable output.
    let rc = unsafe { dlport_pjrt_probe(path.as_ptr(), &mut out) };
    assert_eq!(rc, DLPORT_OK);
    assert!(!out.is_null());
    // SAFETY: a NUL-terminated string from dlport_pjrt_probe, freed once below.
    let text = unsafe { CStr::from_ptr(out) }.to_str().unwrap().to_owned();
    // SAFETY: the string dlport_pjrt_probe returned, freed once.
    unsafe { dlport_string_free(out) };
    let rust = dlport_native::pjrt::probe(&plugin).unwrap().to_string();
    assert_eq!(text.lines().next(), rust.lines().next());
    assert_eq!(text.lines().count(), rust.lines().count(), "{text}");
    assert!(
        text.contains("\nprimitive PJRT_Client_Compile: implemented\n"),
        "{text}"
    );
}
