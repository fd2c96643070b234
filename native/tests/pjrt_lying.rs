//! A lying PJRT plugin: the real XLA CPU plugin's function table, copied, with lies patched
//! in (a short table, a wrong version, NULL functions, NULL results, a buffer smaller than its
//! shape, an unknown type) and counting wrappers around the external reference and destroy
//! calls. Each lie is an error naming the plugin and the function; every reference and buffer
//! is given back exactly once, error paths included.

mod pjrt_common;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use dlport_core::abi::DeviceType;
use dlport_core::{CopyPolicy, Device, Error};
use dlport_native::pjrt::sys::{self, Slot};
use dlport_native::pjrt::{ClientOptions, PjrtClient, PjrtPlugin};
use pjrt_common::{AFFINE, Spec, WORDS, count, plugin_path, real, real_table, real_words, tensor};

/// Which lies are on (one test at a time holds `SERIAL`).
static LIES: AtomicU32 = AtomicU32::new(0);
const SHORT_BUFFER: u32 = 1;
const NULL_POINTER: u32 = 2;
const TOKEN_TYPE: u32 = 4;
const NULL_DEVICES: u32 = 8;
const NULL_VIEW: u32 = 16;
const BAD_VIEW_POINTER: u32 = 32;
static SERIAL: Mutex<()> = Mutex::new(());
/// Per buffer: increases, decreases, destroys.
static CALLS: Mutex<Option<HashMap<usize, [usize; 3]>>> = Mutex::new(None);

fn lie(l: u32) -> bool {
    LIES.load(Ordering::SeqCst) & l != 0
}

fn record(buffer: *mut sys::PJRT_Buffer, which: usize) {
    let mut calls = CALLS.lock().unwrap_or_else(PoisonError::into_inner);
    calls
        .get_or_insert_with(HashMap::new)
        .entry(buffer as usize)
        .or_default()[which] += 1;
}

/// Starts counting a new buffer afresh (an address may be reused after a destroy).
fn forget(buffer: *mut c_void) {
    let mut calls = CALLS.lock().unwrap_or_else(PoisonError::into_inner);
    calls
        .get_or_insert_with(HashMap::new)
        .remove(&(buffer as usize));
}

fn calls(buffer: *mut c_void) -> [usize; 3] {
    let calls = CALLS.lock().unwrap_or_else(PoisonError::into_inner);
    calls
        .as_ref()
        .and_then(|c| c.get(&(buffer as usize)).copied())
        .unwrap_or_default()
}

macro_rules! wrapper {
    ($name:ident, $slot:expr, $args:ty, |$a:ident| $before:block, |$b:ident| $after:block) => {
        unsafe extern "C" fn $name(args: *mut c_void) -> *mut sys::PJRT_Error {
            // SAFETY: the plugin contract: `args` is this function's args struct.
            let $a = unsafe { &mut *args.cast::<$args>() };
            if let Some(e) = $before {
                return e;
            }
            // SAFETY: forwarded as received.
            let err = unsafe { real($slot)(args) };
            // SAFETY: as above.
            let $b = unsafe { &mut *args.cast::<$args>() };
            $after
            err
        }
    };
}

wrapper!(
    increase,
    sys::BUFFER_INCREASE_EXTERNAL_REF,
    sys::Buffer_IncreaseExternalReferenceCount_Args,
    |a| {
        record(a.buffer, 0);
        None
    },
    |_b| {}
);
wrapper!(
    decrease,
    sys::BUFFER_DECREASE_EXTERNAL_REF,
    sys::Buffer_DecreaseExternalReferenceCount_Args,
    |a| {
        record(a.buffer, 1);
        None
    },
    |_b| {}
);
wrapper!(
    destroy,
    sys::BUFFER_DESTROY,
    sys::Buffer_Destroy_Args,
    |a| {
        record(a.buffer, 2);
        None
    },
    |_b| {}
);
wrapper!(
    size,
    sys::BUFFER_ON_DEVICE_SIZE,
    sys::Buffer_OnDeviceSizeInBytes_Args,
    |_a| { None },
    |b| {
        if lie(SHORT_BUFFER) {
            b.on_device_size_in_bytes -= 4;
        }
    }
);
wrapper!(
    pointer,
    sys::BUFFER_OPAQUE_POINTER,
    sys::Buffer_OpaqueDeviceMemoryDataPointer_Args,
    |_a| { None },
    |b| {
        if lie(NULL_POINTER) {
            b.device_memory_ptr = std::ptr::null_mut();
        }
    }
);
wrapper!(
    element_type,
    sys::BUFFER_ELEMENT_TYPE,
    sys::Buffer_ElementType_Args,
    |_a| { None },
    |b| {
        if lie(TOKEN_TYPE) {
            b.kind = 23;
        }
    }
);
wrapper!(
    devices,
    sys::CLIENT_ADDRESSABLE_DEVICES,
    sys::Client_AddressableDevices_Args,
    |_a| { None },
    |b| {
        if lie(NULL_DEVICES) {
            b.addressable_devices = std::ptr::null();
        }
    }
);
wrapper!(
    view,
    sys::CLIENT_CREATE_VIEW,
    sys::Client_CreateViewOfDeviceBuffer_Args,
    |a| {
        if lie(NULL_VIEW) {
            // Success, and no buffer.
            a.buffer = std::ptr::null_mut();
            Some(std::ptr::null_mut())
        } else {
            if lie(BAD_VIEW_POINTER) {
                // The real plugin refuses unaligned memory: its own error comes back.
                a.device_buffer_ptr = a.device_buffer_ptr.cast::<u8>().wrapping_add(4).cast();
            }
            None
        }
    },
    |_b| {}
);

/// A copy of the real table with `patch` applied, leaked (a plugin's table lives for the
/// process).
fn table(patch: impl FnOnce(&mut [usize; WORDS])) -> *const c_void {
    let mut t = [0usize; WORDS];
    t.copy_from_slice(real_words());
    patch(&mut t);
    Box::leak(Box::new(t)).as_ptr().cast()
}

fn set(t: &mut [usize; WORDS], slot: Slot, f: usize) {
    t[slot.end() / 8 - 1] = f;
}

/// The lying table: every wrapper in place.
fn lying() -> *const c_void {
    static LYING: OnceLock<usize> = OnceLock::new();
    *LYING.get_or_init(|| {
        table(|t| {
            set(
                t,
                sys::BUFFER_INCREASE_EXTERNAL_REF,
                increase as sys::Fn as usize,
            );
            set(
                t,
                sys::BUFFER_DECREASE_EXTERNAL_REF,
                decrease as sys::Fn as usize,
            );
            set(t, sys::BUFFER_DESTROY, destroy as sys::Fn as usize);
            set(t, sys::BUFFER_ON_DEVICE_SIZE, size as sys::Fn as usize);
            set(t, sys::BUFFER_OPAQUE_POINTER, pointer as sys::Fn as usize);
            set(
                t,
                sys::BUFFER_ELEMENT_TYPE,
                element_type as sys::Fn as usize,
            );
            set(
                t,
                sys::CLIENT_ADDRESSABLE_DEVICES,
                devices as sys::Fn as usize,
            );
            set(t, sys::CLIENT_CREATE_VIEW, view as sys::Fn as usize);
        }) as usize
    }) as *const c_void
}

/// Loads the real plugin (to read its table) and serializes the tests; `None` skips.
fn setup(test: &str) -> Option<MutexGuard<'static, ()>> {
    let path = plugin_path(test)?;
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    LIES.store(0, Ordering::SeqCst);
    PjrtPlugin::load(&path).expect("load the real plugin");
    real_table(&path);
    Some(guard)
}

fn client_of(table: *const c_void, name: &str) -> Result<PjrtClient, Error> {
    // SAFETY: a leaked copy of the real table, its lies following the C API's signatures.
    let plugin = unsafe { PjrtPlugin::from_table(table, name) }?;
    PjrtClient::create(&plugin, &ClientOptions::default())
}

#[test]
fn a_wrong_table_is_refused_naming_the_plugin() {
    let Some(_g) = setup("wrong table") else {
        return;
    };
    // SAFETY: NULL is allowed (refused).
    let e = unsafe { PjrtPlugin::from_table(std::ptr::null(), "null-plugin") }.unwrap_err();
    assert!(
        e.to_string().contains("NULL") && e.to_string().contains("null-plugin"),
        "{e}"
    );
    let tiny = table(|t| t[0] = 8);
    // SAFETY: the table is readable past its (lying) size.
    let e = unsafe { PjrtPlugin::from_table(tiny, "tiny") }.unwrap_err();
    assert!(e.to_string().contains("struct_size = 8"), "{e}");
    let major = table(|t| t[4] = 1 | (81 << 32));
    // SAFETY: as above.
    let e = unsafe { PjrtPlugin::from_table(major, "major-1") }.unwrap_err();
    assert!(e.to_string().contains("PJRT API version 1.81"), "{e}");
    // A table too short for PJRT_Client_Create: an old API.
    let old = table(|t| t[0] = sys::CLIENT_CREATE.end() - 8);
    let e = client_of(old, "old").unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("PJRT_Client_Create is not implemented by this plugin (PJRT API 0.")
            && s.contains("too old")
            && s.contains("old"),
        "{s}"
    );
    // A NULL function: what needs it is disabled, and says so.
    let no_compile = table(|t| set(t, sys::CLIENT_COMPILE, 0));
    let c = client_of(no_compile, "no-compile").unwrap();
    assert!(
        c.plugin()
            .missing()
            .iter()
            .any(|m| m.contains("compilation"))
    );
    let e = c.compile_mlir(AFFINE).unwrap_err();
    assert!(
        e.to_string().contains("PJRT_Client_Compile") && e.to_string().contains("NULL"),
        "{e}"
    );
}

#[test]
fn a_table_without_views_copies_or_refuses() {
    let Some(_g) = setup("no views") else { return };
    let short = table(|t| t[0] = sys::CLIENT_CREATE_VIEW.end() - 8);
    let c = client_of(short, "no-views").unwrap();
    let missing = c.plugin().missing();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(
        missing[0].contains("PJRT_Client_CreateViewOfDeviceBuffer"),
        "{missing:?}"
    );
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let (t, _, released) = tensor(&x, &Spec::f32(&[2, 3]));
    // The refusal names the missing function, not a device.
    let e = c
        .import(t, CopyPolicy::Never, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not implement PJRT_Client_CreateViewOfDeviceBuffer")
            && e.contains("CopyPolicy::IfNeeded"),
        "{e}"
    );
    assert_eq!(count(&released), 1);
    let (t, address, released) = tensor(&x, &Spec::f32(&[2, 3]));
    let b = c.import(t, CopyPolicy::IfNeeded, None).expect("a copy");
    assert_eq!(count(&released), 1);
    let m = b.to_dlpack(true).expect("export still works");
    assert_ne!(m.view().data() as usize, address);
    assert_eq!(m.view().to_vec::<f32>().unwrap(), x);
}

#[test]
fn exports_count_every_reference_and_destroy_once() {
    let Some(_g) = setup("export counts") else {
        return;
    };
    let c = client_of(lying(), "counting").unwrap();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let (t, _, released) = tensor(&x, &Spec::f32(&[2, 3]));
    let b = c.import(t, CopyPolicy::Never, None).unwrap();
    let raw = b.as_raw();
    forget(raw);
    let (m1, m2) = (b.to_dlpack(true).unwrap(), b.to_dlpack(false).unwrap());
    assert_eq!(calls(raw), [2, 0, 0]);
    drop(b);
    drop(m1);
    assert_eq!(calls(raw), [2, 1, 0]);
    assert_eq!(count(&released), 0);
    drop(m2);
    assert_eq!(calls(raw), [2, 2, 1]);
    assert_eq!(count(&released), 1);
}

#[test]
fn lies_about_a_buffer_are_errors_and_release_everything_once() {
    let Some(_g) = setup("buffer lies") else {
        return;
    };
    let c = client_of(lying(), "liar").unwrap();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for (l, function, words) in [
        (
            SHORT_BUFFER,
            "PJRT_Buffer_OnDeviceSizeInBytes",
            "smaller than its shape",
        ),
        (
            NULL_POINTER,
            "PJRT_Buffer_OpaqueDeviceMemoryDataPointer",
            "NULL device pointer",
        ),
        (TOKEN_TYPE, "PJRT_Buffer_ElementType", "TOKEN"),
    ] {
        let (t, _, released) = tensor(&x, &Spec::f32(&[2, 3]));
        let b = c.import(t, CopyPolicy::Never, None).unwrap();
        let raw = b.as_raw();
        forget(raw);
        LIES.store(l, Ordering::SeqCst);
        let e = b.to_dlpack(true).unwrap_err().to_string();
        LIES.store(0, Ordering::SeqCst);
        assert!(
            e.contains(function) && e.contains(words) && e.contains("liar"),
            "{e}"
        );
        let [inc, dec, _] = calls(raw);
        assert_eq!(inc, dec, "{function}: every reference taken is given back");
        drop(b);
        assert_eq!(calls(raw)[2], 1, "{function}: destroyed once");
        assert_eq!(count(&released), 1, "{function}");
    }
    // A view the plugin says it made but did not return, and the plugin's own refusal.
    for (l, words) in [(NULL_VIEW, "NULL buffer"), (BAD_VIEW_POINTER, "unaligned")] {
        LIES.store(l, Ordering::SeqCst);
        let (t, _, released) = tensor(&x, &Spec::f32(&[2, 3]));
        let e = c
            .import(t, CopyPolicy::Never, None)
            .unwrap_err()
            .to_string();
        LIES.store(0, Ordering::SeqCst);
        assert!(
            e.contains("PJRT_Client_CreateViewOfDeviceBuffer") && e.contains(words),
            "{e}"
        );
        assert_eq!(count(&released), 1, "{words}: released once");
    }
    LIES.store(NULL_DEVICES, Ordering::SeqCst);
    let e = client_of(lying(), "liar").unwrap_err().to_string();
    LIES.store(0, Ordering::SeqCst);
    assert!(
        e.contains("PJRT_Client_AddressableDevices") && e.contains("NULL"),
        "{e}"
    );
}

/// The platform name the renaming table answers.
static PLATFORM: Mutex<&'static str> = Mutex::new("cpu");

wrapper!(
    platform_name,
    sys::CLIENT_PLATFORM_NAME,
    sys::Client_PlatformName_Args,
    |_a| { None },
    |b| {
        let name = *PLATFORM.lock().unwrap_or_else(PoisonError::into_inner);
        b.platform_name = name.as_ptr().cast();
        b.platform_name_size = name.len();
    }
);

#[test]
fn a_platform_name_gives_its_device_type_and_an_unknown_one_never_cuda() {
    let Some(_g) = setup("platform names") else {
        return;
    };
    let renamed = table(|t| {
        set(
            t,
            sys::CLIENT_PLATFORM_NAME,
            platform_name as sys::Fn as usize,
        )
    });
    // SAFETY: a leaked copy of the real table, its wrapper following the C API's signature.
    let plugin = unsafe { PjrtPlugin::from_table(renamed, "renamed") }.unwrap();
    let of = |name: &'static str, caller: Option<DeviceType>| {
        *PLATFORM.lock().unwrap_or_else(PoisonError::into_inner) = name;
        let options = ClientOptions {
            device_type: caller,
            ..ClientOptions::default()
        };
        let c = PjrtClient::create(&plugin, &options).expect("a client");
        assert_eq!(c.platform(), name);
        for (i, d) in c.devices().iter().enumerate() {
            assert_eq!(d.device, Device::new(c.device_type(), i as i32), "{name}");
        }
        c.device_type()
    };
    for (name, t) in [
        ("mtl", DeviceType::METAL),
        ("METAL", DeviceType::METAL),
        ("xpu", DeviceType::ONEAPI),
        ("tt", DeviceType::EXT_DEV),
        ("qaic", DeviceType::EXT_DEV),
        ("cuda", DeviceType::CUDA),
        // Names dlport does not know, "gpu" among them: kDLExtDev, never kDLCUDA.
        ("gpu", DeviceType::EXT_DEV),
        ("some-new-vendor", DeviceType::EXT_DEV),
    ] {
        assert_eq!(of(name, None), t, "{name}");
    }
    // The caller's code wins, for a known name and an unknown one.
    assert_eq!(
        of("some-new-vendor", Some(DeviceType::OPENCL)),
        DeviceType::OPENCL
    );
    assert_eq!(of("cpu", Some(DeviceType::EXT_DEV)), DeviceType::EXT_DEV);
    *PLATFORM.lock().unwrap_or_else(PoisonError::into_inner) = "cpu";
}
