//! The fake C plugin of the plugin tests (`plugin.rs`, and dlport-capi's `plugin.rs`): a
//! `DlportPlugin` written in Rust with `extern "C"` callbacks, exactly as the C interface sees
//! it, whose "device" memory is host memory labelled `kDLExtDev`. It fails or lies on request and counts every call. A folder
//! module, so that cargo does not build it as a test of its own.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::DeviceType;
use dlport_native::plugin::DlportPlugin;

/// The fake plugin's device type (kDLExtDev).
pub const EXT: DeviceType = DeviceType(12);

/// What the fake plugin does wrong, and what it has done.
#[derive(Default)]
pub struct Fake {
    pub fail: Mutex<Option<&'static str>>,
    pub null: Mutex<Option<&'static str>>,
    pub views: AtomicUsize,
    pub views_destroyed: AtomicUsize,
    pub refs: AtomicUsize,
    pub refs_released: AtomicUsize,
    pub allocations: AtomicUsize,
    pub deallocations: AtomicUsize,
    pub to_host: AtomicUsize,
    pub from_host: AtomicUsize,
    pub destroyed: AtomicUsize,
    /// The order of view_destroy and producer deleters ("view", "deleter").
    pub log: Mutex<Vec<&'static str>>,
}

/// # Safety
/// `state` is a live `Fake`.
unsafe fn fake<'a>(state: *mut c_void) -> &'a Fake {
    // SAFETY: every plugin made here passes a `Fake` that outlives it (contract).
    unsafe { &*state.cast::<Fake>() }
}

impl Fake {
    fn fails(&self, callback: &str) -> bool {
        *self.fail.lock().unwrap() == Some(callback)
    }
    fn nulls(&self, callback: &str) -> bool {
        *self.null.lock().unwrap() == Some(callback)
    }
}

unsafe extern "C" fn last_error(_: *mut c_void) -> *const c_char {
    c"the fake device is on fire".as_ptr()
}

unsafe extern "C" fn view_create(
    s: *mut c_void,
    t: *const dlport_core::abi::DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: a live Fake; `t` and `out` valid during the call (plugin contract).
    let (f, t) = unsafe { (fake(s), &*t) };
    if f.fails("view_create") {
        return -7;
    }
    f.views.fetch_add(1, Ordering::SeqCst);
    // SAFETY: writable (contract).
    unsafe {
        *out = if f.nulls("view_create") {
            std::ptr::null_mut()
        } else {
            t.data
        }
    };
    0
}

unsafe extern "C" fn view_destroy(s: *mut c_void, _: *mut c_void) {
    // SAFETY: a live Fake.
    let f = unsafe { fake(s) };
    f.views_destroyed.fetch_add(1, Ordering::SeqCst);
    f.log.lock().unwrap().push("view");
}

unsafe extern "C" fn acquire(
    s: *mut c_void,
    t: *const dlport_core::abi::DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: as in view_create.
    let (f, t) = unsafe { (fake(s), &*t) };
    if f.fails("acquire") {
        return -8;
    }
    f.refs.fetch_add(1, Ordering::SeqCst);
    // SAFETY: writable (contract).
    unsafe {
        *out = if f.nulls("acquire") {
            std::ptr::null_mut()
        } else {
            t.data
        }
    };
    0
}

unsafe extern "C" fn release(s: *mut c_void, _: *mut c_void) {
    // SAFETY: a live Fake.
    unsafe { fake(s) }
        .refs_released
        .fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn copy_to_host(
    s: *mut c_void,
    src: *const dlport_core::abi::DLTensor,
    dst: *mut c_void,
    bytes: usize,
    _: *mut c_void,
) -> c_int {
    // SAFETY: as in view_create; the fake's memory is host memory, compact here.
    let (f, src) = unsafe { (fake(s), &*src) };
    if f.fails("copy_to_host") {
        return -9;
    }
    f.to_host.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `bytes` bytes behind both (the tests use compact tensors).
    unsafe {
        std::ptr::copy_nonoverlapping(
            src.data.cast::<u8>().add(src.byte_offset as usize),
            dst.cast::<u8>(),
            bytes,
        )
    };
    0
}

unsafe extern "C" fn copy_from_host(
    s: *mut c_void,
    src: *const c_void,
    bytes: usize,
    dst: *const dlport_core::abi::DLTensor,
    _: *mut c_void,
) -> c_int {
    // SAFETY: as in copy_to_host.
    let (f, dst) = unsafe { (fake(s), &*dst) };
    if f.fails("copy_from_host") {
        return -10;
    }
    f.from_host.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `bytes` bytes behind both (dlport's compact allocation).
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.data.cast::<u8>(), bytes) };
    0
}

unsafe extern "C" fn allocate(
    s: *mut c_void,
    _: i32,
    _: i32,
    bytes: usize,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: a live Fake.
    let f = unsafe { fake(s) };
    if f.fails("allocate") {
        return -11;
    }
    if f.nulls("allocate") {
        return 0;
    }
    f.allocations.fetch_add(1, Ordering::SeqCst);
    let mem = vec![0u8; bytes.max(1)].into_boxed_slice();
    // SAFETY: writable (contract). The length is recovered from `bytes` in deallocate.
    unsafe { *out = Box::into_raw(mem).cast::<c_void>() };
    let _ = bytes;
    0
}

unsafe extern "C" fn deallocate(s: *mut c_void, _: i32, _: i32, _handle: *mut c_void) {
    // The boxes are leaked on purpose: their length is not passed back, and the test counts
    // calls only (a real plugin frees its handle here).
    // SAFETY: a live Fake.
    unsafe { fake(s) }
        .deallocations
        .fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn destroy(s: *mut c_void) {
    // SAFETY: a live Fake.
    unsafe { fake(s) }.destroyed.fetch_add(1, Ordering::SeqCst);
}

static TYPES: [i32; 1] = [EXT.0];

/// The fake plugin's struct, named `name`, with every callback but `wait` and the device-id
/// maps, over the state `fake`.
pub fn plugin_struct(fake: &Fake, name: &'static CStr) -> DlportPlugin {
    let mut p = DlportPlugin::empty();
    p.name = name.as_ptr();
    p.device_types = TYPES.as_ptr();
    p.num_device_types = 1;
    p.state = std::ptr::from_ref(fake).cast_mut().cast();
    p.last_error = Some(last_error);
    p.view_create = Some(view_create);
    p.view_destroy = Some(view_destroy);
    p.acquire = Some(acquire);
    p.release = Some(release);
    p.copy_to_host = Some(copy_to_host);
    p.copy_from_host = Some(copy_from_host);
    p.allocate = Some(allocate);
    p.deallocate = Some(deallocate);
    p.destroy = Some(destroy);
    p
}

/// A fresh `Fake` that lives as long as the test binary (plugins may outlive a test).
pub fn leak_fake() -> &'static Fake {
    Box::leak(Box::default())
}
