//! The capability probe (`dlport_native::pjrt::probe`) against the real XLA CPU plugin
//! (`DLPORT_PJRT_PLUGIN`; each test skips visibly without it) and against a copy of its table
//! whose `PJRT_Client_CreateViewOfDeviceBuffer` and `PJRT_Buffer_UnsafePointer` are stubs: in
//! the table, not NULL, answering `UNIMPLEMENTED`. A stub is no implementation, and the probe
//! says so; what dlport does then (a copy) follows.

mod pjrt_common;

use std::ffi::{c_char, c_void};

use dlport_native::pjrt::sys::{self, Slot};
use dlport_native::pjrt::{PjrtPlugin, ProbeReport, probe};
use pjrt_common::{WORDS, plugin_path, real, real_table, real_words};

/// The stubs' error: an address the real plugin never hands out, answered by the wrappers of
/// the error functions below (every other error goes to the real plugin).
static STUB_ERROR: u8 = 0;
const STUB_MESSAGE: &str = "stubbed: UNIMPLEMENTED";

fn stub_error() -> *mut sys::PJRT_Error {
    std::ptr::from_ref(&STUB_ERROR).cast_mut().cast()
}

unsafe extern "C" fn unimplemented(_args: *mut c_void) -> *mut sys::PJRT_Error {
    stub_error()
}

unsafe extern "C" fn error_message(args: *mut c_void) {
    // SAFETY: PJRT_Error_Message's args (the plugin contract).
    let a = unsafe { &mut *args.cast::<sys::Error_Message_Args>() };
    if a.error.cast_mut() == stub_error() {
        a.message = STUB_MESSAGE.as_ptr().cast::<c_char>();
        a.message_size = STUB_MESSAGE.len();
        return;
    }
    // SAFETY: the real PJRT_Error_Message, of the VoidFn signature, forwarded as received.
    unsafe { std::mem::transmute::<sys::Fn, sys::VoidFn>(real(sys::ERROR_MESSAGE))(args) }
}

unsafe extern "C" fn error_code(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: PJRT_Error_GetCode's args (the plugin contract).
    let a = unsafe { &mut *args.cast::<sys::Error_GetCode_Args>() };
    if a.error.cast_mut() == stub_error() {
        a.code = 12; // UNIMPLEMENTED
        return std::ptr::null_mut();
    }
    // SAFETY: forwarded as received.
    unsafe { real(sys::ERROR_GET_CODE)(args) }
}

unsafe extern "C" fn error_destroy(args: *mut c_void) {
    // SAFETY: PJRT_Error_Destroy's args (the plugin contract).
    let a = unsafe { &*args.cast::<sys::Error_Destroy_Args>() };
    if a.error == stub_error() {
        return;
    }
    // SAFETY: the real PJRT_Error_Destroy, of the VoidFn signature, forwarded as received.
    unsafe { std::mem::transmute::<sys::Fn, sys::VoidFn>(real(sys::ERROR_DESTROY))(args) }
}

/// A copy of the real table (0.81's functions), `stubbed` answering UNIMPLEMENTED, leaked (a
/// plugin's table lives for the process).
fn stubbed_table(stubbed: &[Slot]) -> *const c_void {
    let mut t = [0usize; WORDS];
    t.copy_from_slice(real_words());
    let mut set = |slot: Slot, f: usize| t[slot.end() / 8 - 1] = f;
    set(sys::ERROR_MESSAGE, error_message as sys::VoidFn as usize);
    set(sys::ERROR_GET_CODE, error_code as sys::Fn as usize);
    set(sys::ERROR_DESTROY, error_destroy as sys::VoidFn as usize);
    for &s in stubbed {
        set(s, unimplemented as sys::Fn as usize);
    }
    Box::leak(Box::new(t)).as_ptr().cast()
}

fn verdict<'a>(r: &'a ProbeReport, key: &str) -> &'a str {
    match r.get(key) {
        Some(l) => &l.verdict,
        None => panic!("no line {key:?} in:\n{r}"),
    }
}

#[test]
fn the_real_plugin_implements_what_dlport_uses_and_gets_views_both_ways() {
    let Some(path) = plugin_path("probe (real)") else {
        return;
    };
    let r = probe(&path).expect("probe");
    eprintln!("{r}");
    let plugin = PjrtPlugin::load(&path).unwrap();
    let (major, minor) = plugin.api_version();
    assert_eq!(verdict(&r, "PJRT API"), format!("{major}.{minor}"));
    assert_eq!(verdict(&r, "struct_size"), plugin.struct_size().to_string());
    for (t, name, _) in plugin.extensions() {
        assert_eq!(
            verdict(&r, &format!("extension {t}")),
            name.unwrap_or("unknown")
        );
    }
    assert_eq!(verdict(&r, "platform"), "cpu");
    assert!(
        verdict(&r, "memory kinds (device 0)").contains("host"),
        "{r}"
    );
    for l in r.lines().iter().filter(|l| l.key.starts_with("primitive ")) {
        assert_eq!(l.verdict, "implemented", "{r}");
    }
    assert_eq!(
        r.lines()
            .iter()
            .filter(|l| l.key.starts_with("primitive "))
            .count(),
        11,
        "{r}"
    );
    assert_eq!(verdict(&r, "dtype F32"), "float32; view yes, copy yes");
    assert_eq!(
        verdict(&r, "import host, 64-byte aligned, writable"),
        "a view"
    );
    assert_eq!(verdict(&r, "import host, READ_ONLY"), "one copy");
    assert_eq!(verdict(&r, "export PJRT buffer to DLPack"), "by reference");
    // The text is the lines, `key: verdict — why`.
    let text = r.to_string();
    assert!(text.contains("import host, 4 bytes off 64-byte alignment: one copy — "));
    assert_eq!(text.lines().count(), r.lines().len());
}

#[test]
fn a_stub_answering_unimplemented_is_no_implementation() {
    let Some(path) = plugin_path("probe (stubbed)") else {
        return;
    };
    PjrtPlugin::load(&path).expect("load the real plugin");
    real_table(&path);
    let table = stubbed_table(&[sys::CLIENT_CREATE_VIEW, sys::BUFFER_UNSAFE_POINTER]);
    // SAFETY: a leaked copy of the real table, its stubs following the C API's signatures.
    let plugin = unsafe { PjrtPlugin::from_table(table, "stubbed") }.unwrap();
    // The table has every slot: nothing is missing by its size or a NULL.
    assert!(plugin.missing().is_empty(), "{:?}", plugin.missing());
    let r = ProbeReport::of(&plugin).expect("probe");
    eprintln!("{r}");
    for f in [
        "PJRT_Client_CreateViewOfDeviceBuffer",
        "PJRT_Buffer_UnsafePointer",
    ] {
        let l = r.get(&format!("primitive {f}")).expect("a line");
        assert_eq!(l.verdict, "not implemented", "{r}");
        assert!(l.why.contains(STUB_MESSAGE), "{r}");
    }
    for f in [
        "PJRT_Client_BufferFromHostBuffer",
        "PJRT_Buffer_OpaqueDeviceMemoryDataPointer",
        "PJRT_Client_Compile",
        "PJRT_LoadedExecutable_Execute",
    ] {
        assert_eq!(verdict(&r, &format!("primitive {f}")), "implemented", "{r}");
    }
    // No type is viewed; every one the real plugin copies is still copied.
    assert_eq!(verdict(&r, "dtype F32"), "float32; view no, copy yes");
    assert!(
        r.lines()
            .iter()
            .filter(|l| l.key.starts_with("dtype "))
            .all(|l| l.verdict.contains("view no")),
        "{r}"
    );
    // What dlport does: one copy where the plugin answers UNIMPLEMENTED to a view, as where
    // the function is missing, and the line says why in the plugin's words (the refusal of a
    // CopyPolicy::Never import); an export by reference still.
    let aligned = r
        .get("import host, 64-byte aligned, writable")
        .expect("a line");
    assert_eq!(aligned.verdict, "one copy", "{r}");
    assert!(aligned.why.contains(STUB_MESSAGE), "{r}");
    assert_eq!(verdict(&r, "export PJRT buffer to DLPack"), "by reference");
}

#[test]
fn a_table_too_short_for_the_memory_functions_says_so() {
    let Some(path) = plugin_path("probe (short)") else {
        return;
    };
    PjrtPlugin::load(&path).expect("load the real plugin");
    real_table(&path);
    let mut t = [0usize; WORDS];
    t.copy_from_slice(real_words());
    // The table ends before PJRT_Device_AddressableMemories (and CreateViewOfDeviceBuffer).
    t[0] = sys::DEVICE_ADDRESSABLE_MEMORIES.end() - 8;
    let table: *const c_void = Box::leak(Box::new(t)).as_ptr().cast();
    // SAFETY: a leaked copy of the real table, readable past its (shortened) size.
    let plugin = unsafe { PjrtPlugin::from_table(table, "short") }.unwrap();
    let r = ProbeReport::of(&plugin).expect("probe");
    eprintln!("{r}");
    let kinds = r.get("memory kinds (device 0)").expect("a line");
    assert_eq!(kinds.verdict, "not implemented", "{r}");
    assert!(kinds.why.contains("too old"), "{r}");
    assert_eq!(
        verdict(&r, "primitive PJRT_Client_CreateViewOfDeviceBuffer"),
        "not implemented"
    );
}
