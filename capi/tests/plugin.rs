//! The C entries of plugins: `dlport_register_backend`, `dlport_backends`,
//! `dlport_unregister_backend` and `dlport_load_plugin`, with dlport-native's fake C plugin.

#[path = "../../native/tests/fake_plugin/mod.rs"]
mod fake_plugin;

use std::ffi::{CStr, CString, c_char};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::backend::{Backend, CpuBackend};
use dlport_core::{Device, ExportOptions, ImportOptions};
use dlport_testkit::wait::count_reaches;
use dlport_testkit::xpu::counted_export;
use fake_plugin::{EXT, leak_fake, plugin_struct};

#[test]
fn the_c_abi_registers_lists_and_unregisters_plugins_in_the_default_registry() {
    let fake = leak_fake();
    let raw = plugin_struct(fake, c"cabi_fake");
    // SAFETY: a complete struct; `fake` is 'static.
    let status = unsafe { dlport::ffi::dlport_register_backend(&raw) };
    assert_eq!(status, 0);
    // SAFETY: as above.
    let status = unsafe { dlport::ffi::dlport_register_backend(&raw) };
    assert_ne!(status, 0, "duplicate");
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: writable.
    assert_eq!(unsafe { dlport::ffi::dlport_backends(&mut json) }, 0);
    // SAFETY: a string from dlport, freed once below.
    let text = unsafe { CStr::from_ptr(json) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: from dlport_backends.
    unsafe { dlport::ffi::dlport_string_free(json) };
    assert!(
        text.contains("\"name\":\"cabi_fake\",\"kind\":\"plugin\",\"device_types\":[12]"),
        "{text}"
    );
    // The default registry imports onto it.
    let deleted = Arc::new(AtomicUsize::new(0));
    let r = dlport_native::install().unwrap();
    let t = r
        .from_dlpack(
            counted_export(&deleted, Device::new(EXT, 0)),
            &ImportOptions::default(),
        )
        .unwrap();
    assert_eq!(t.backend(), "cabi_fake");
    let out = r.to_dlpack(&t, &ExportOptions::legacy()).unwrap();
    assert_eq!(fake.refs.load(Ordering::SeqCst), 1);
    let name = CString::new("cabi_fake").unwrap();
    // SAFETY: a NUL-terminated name.
    let status = unsafe { dlport::ffi::dlport_unregister_backend(name.as_ptr()) };
    assert_eq!(status, 0);
    // Unregistered while `t` and an export of it live: the export stays valid, a new one is
    // refused, and the plugin is destroyed once, after the last of them.
    let err = r.to_dlpack(&t, &ExportOptions::legacy()).unwrap_err();
    assert!(
        err.to_string().contains("no backend for kDLExtDev"),
        "{err}"
    );
    assert_eq!(fake.destroyed.load(Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(
        fake.destroyed.load(Ordering::SeqCst),
        0,
        "the export holds it"
    );
    drop(out);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    // Here, or a moment later on the thread of another test's call that still holds the plugin.
    count_reaches(
        "the plugin's destroy after its last export was released",
        1,
        || fake.destroyed.load(Ordering::SeqCst),
    );
    // No backend serves the type any more.
    let err = r
        .from_dlpack(
            counted_export(&deleted, Device::new(EXT, 0)),
            &ImportOptions::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("no backend for"), "{err}");
    // SAFETY: as above.
    let status = unsafe { dlport::ffi::dlport_unregister_backend(name.as_ptr()) };
    assert_ne!(status, 0);
    let cpu: &dyn Backend = &CpuBackend;
    assert!(!cpu.can_access(Device::new(EXT, 0)));
}

#[test]
fn load_errors_name_the_path_and_the_symbol() {
    let path = CString::new("/nonexistent/libnothing.so").unwrap();
    // SAFETY: a NUL-terminated path; NULL name_out.
    let st = unsafe { dlport::ffi::dlport_load_plugin(path.as_ptr(), std::ptr::null_mut()) };
    assert_ne!(st, 0);
    // SAFETY: dlport's message for this thread.
    let text = unsafe { CStr::from_ptr(dlport::ffi::dlport_last_error()) }
        .to_string_lossy()
        .into_owned();
    assert!(
        text.contains("/nonexistent/libnothing.so") && text.contains("dlopen"),
        "{text}"
    );
    // A library without the init symbol (the C library's math part).
    let path = CString::new("libm.so.6").unwrap();
    // SAFETY: as above.
    let st = unsafe { dlport::ffi::dlport_load_plugin(path.as_ptr(), std::ptr::null_mut()) };
    assert_ne!(st, 0);
    // SAFETY: as above.
    let text = unsafe { CStr::from_ptr(dlport::ffi::dlport_last_error()) }
        .to_string_lossy()
        .into_owned();
    assert!(
        text.contains("libm.so.6 has no symbol dlport_plugin_init"),
        "{text}"
    );
}
