//! The plugin guarantees of issue #47 through the C entries (`dlport_register_backend`,
//! `dlport_alloc`, `dlport_export`, `dlport_unregister_backend`, `dlport_load_plugin`), with
//! dlport-native's fake C plugin: each tensor's operations go to the plugin that made it; a
//! plugin never takes a host-class or built-in device type; loading by path uses the path's
//! bytes and refuses an empty one; `dlport_alloc` takes the plugin names `dlport_backends`
//! lists. Each test uses device types of its own (tests run in parallel, one plugin table), and
//! waits for a plugin's `destroy` (`dlport_testkit::wait`): another test's call may hold the
//! plugin for a moment, and then `destroy` runs on that test's thread when the call returns.

#[path = "../../native/tests/fake_plugin/mod.rs"]
mod fake_plugin;

use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::Ordering;

use dlport::ffi::{
    dlport_alloc, dlport_backends, dlport_export, dlport_last_error, dlport_load_plugin,
    dlport_register_backend, dlport_release, dlport_string_free, dlport_tensor_free,
    dlport_unregister_backend,
};
use dlport_testkit::wait::count_reaches;
use fake_plugin::{EXT, leak_fake, plugin_struct};

const COPY_IF_NEEDED: i32 = 1;
const ERR_NO_BACKEND: i32 = 23;
const ERR_BACKEND: i32 = 32;

fn last_error() -> String {
    let p = dlport_last_error();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: dlport's message for this thread, a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn register(raw: &dlport_native::plugin::DlportPlugin) -> i32 {
    // SAFETY: a complete struct over a 'static fake (its device types may be wrong on
    // purpose).
    unsafe { dlport_register_backend(raw) }
}

fn unregister(name: &CStr) -> i32 {
    // SAFETY: a NUL-terminated name.
    unsafe { dlport_unregister_backend(name.as_ptr()) }
}

/// A float32 tensor of 4 elements allocated by `backend` (NULL: by device) on `device_type`.
fn alloc(backend: Option<&CStr>, device_type: i32) -> (i32, *mut dlport::ffi::DlportTensor) {
    let shape = [4i64];
    let mut t = std::ptr::null_mut();
    let name = backend.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: a NUL-terminated name or NULL, one shape value, a writable out.
    let st = unsafe { dlport_alloc(name, device_type, 0, 2, 32, 1, shape.as_ptr(), 1, &mut t) };
    (st, t)
}

/// Exports `t` to `device_type` (0: its own device); releases the result. The status.
fn export(t: *const dlport::ffi::DlportTensor, device_type: i32) -> i32 {
    let mut m: *mut c_void = std::ptr::null_mut();
    let mut versioned = 0;
    // SAFETY: a live handle and writable outs.
    let st = unsafe {
        dlport_export(
            t,
            1,
            3,
            device_type,
            0,
            COPY_IF_NEEDED,
            &mut m,
            &mut versioned,
        )
    };
    if st == 0 {
        // SAFETY: a managed tensor from dlport_export, released once.
        assert_eq!(unsafe { dlport_release(m, versioned) }, 0);
    }
    st
}

#[test]
fn two_plugins_on_one_type_each_tensor_goes_to_the_plugin_that_made_it() {
    let (a, b) = (leak_fake(), leak_fake());
    let raw_a = plugin_struct(a, c"cabi_two_a");
    let raw_b = plugin_struct(b, c"cabi_two_b");
    // SAFETY: complete structs over 'static fakes.
    assert_eq!(register(&raw_a), 0, "{}", last_error());
    let (st, t) = alloc(None, EXT.0);
    assert_eq!(st, 0, "{}", last_error());
    assert_eq!(a.allocations.load(Ordering::SeqCst), 1);
    // SAFETY: as above.
    assert_eq!(register(&raw_b), 0, "{}", last_error());
    // To the host and on its own device: A's callbacks only.
    assert_eq!(export(t, 1), 0, "{}", last_error());
    assert_eq!(export(t, 0), 0, "{}", last_error());
    assert_eq!(a.to_host.load(Ordering::SeqCst), 1);
    assert_eq!(a.refs.load(Ordering::SeqCst), 1);
    assert_eq!(b.to_host.load(Ordering::SeqCst), 0);
    assert_eq!(b.refs.load(Ordering::SeqCst), 0);
    // A unregistered: DLPORT_ERR_NO_BACKEND for A's tensor, as the header promises; B is never
    // given A's handle.
    // SAFETY: a NUL-terminated name.
    assert_eq!(unregister(c"cabi_two_a"), 0);
    for device_type in [0, 1] {
        assert_eq!(export(t, device_type), ERR_NO_BACKEND, "{}", last_error());
        assert!(
            last_error().contains("no backend for kDLExtDev"),
            "{}",
            last_error()
        );
    }
    assert_eq!(b.to_host.load(Ordering::SeqCst), 0);
    assert_eq!(b.refs.load(Ordering::SeqCst), 0);
    // SAFETY: a live handle, freed once.
    unsafe { dlport_tensor_free(t) };
    assert_eq!(a.deallocations.load(Ordering::SeqCst), 1);
    // A's `destroy` runs when the last handle to A is gone: here, or a moment later on the
    // thread of a neighbouring test whose listing, lookup or registration still holds A.
    count_reaches(
        "plugin A's destroy after its last tensor was freed",
        1,
        || a.destroyed.load(Ordering::SeqCst),
    );
    // SAFETY: a NUL-terminated name.
    assert_eq!(unregister(c"cabi_two_b"), 0);
}

#[test]
fn a_plugin_asking_for_a_host_class_device_type_is_refused() {
    static TYPES: [i32; 6] = [1, 2, 3, 11, 13, 20];
    for t in &TYPES {
        let fake = leak_fake();
        let mut raw = plugin_struct(fake, c"cabi_hosty");
        raw.device_types = t;
        let st = register(&raw);
        assert_eq!(st, ERR_BACKEND, "device type {t} was accepted");
        let text = last_error();
        assert!(text.contains(&format!("device_types has {t} (")), "{text}");
        assert_eq!(
            fake.destroyed.load(Ordering::SeqCst),
            0,
            "the caller keeps its state"
        );
    }
}

fn load(path: &[u8]) -> (i32, String) {
    let mut bytes = path.to_vec();
    bytes.push(0);
    // SAFETY: a NUL-terminated path; NULL name_out.
    let st = unsafe { dlport_load_plugin(bytes.as_ptr().cast::<c_char>(), std::ptr::null_mut()) };
    (st, last_error())
}

#[test]
fn loading_by_path_refuses_the_empty_path_and_uses_the_bytes_given() {
    let (st, text) = load(b"");
    assert_ne!(st, 0);
    assert!(text.contains("the path is empty"), "{text}");
    // Not UTF-8: the bytes reach dlopen (which cannot find the file), never a lossy copy.
    let (st, text) = load(b"/nonexistent/lib\xff\xfe.so");
    assert_ne!(st, 0);
    assert!(
        text.contains("dlopen") && text.contains("cannot load"),
        "{text}"
    );
    assert!(!text.contains("not UTF-8"), "{text}");
}

#[test]
fn dlport_alloc_takes_a_plugin_name_that_dlport_backends_lists() {
    static TYPES: [i32; 1] = [99];
    let fake = leak_fake();
    let mut raw = plugin_struct(fake, c"cabi_named");
    raw.device_types = TYPES.as_ptr();
    // SAFETY: a complete struct over a 'static fake.
    assert_eq!(register(&raw), 0, "{}", last_error());
    let mut json: *mut c_char = std::ptr::null_mut();
    // SAFETY: writable.
    assert_eq!(unsafe { dlport_backends(&mut json) }, 0);
    // SAFETY: a string from dlport, freed once below.
    let listed = unsafe { CStr::from_ptr(json) }
        .to_string_lossy()
        .contains("\"cabi_named\"");
    // SAFETY: from dlport_backends.
    unsafe { dlport_string_free(json) };
    assert!(listed);
    let (st, t) = alloc(Some(c"cabi_named"), 99);
    assert_eq!(st, 0, "{}", last_error());
    assert_eq!(fake.allocations.load(Ordering::SeqCst), 1);
    // SAFETY: a live handle, freed once.
    unsafe { dlport_tensor_free(t) };
    assert_eq!(fake.deallocations.load(Ordering::SeqCst), 1);
    // A device type the named plugin does not serve.
    let (st, _) = alloc(Some(c"cabi_named"), EXT.0 + 1);
    assert_ne!(st, 0);
    assert!(last_error().contains("does not serve"), "{}", last_error());
    // SAFETY: a NUL-terminated name.
    assert_eq!(unregister(c"cabi_named"), 0);
}
