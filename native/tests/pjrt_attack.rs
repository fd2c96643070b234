//! What an attack of the PJRT door tried, each as a test (issue #54): a foreign buffer given
//! to an executable, sub-byte copies, an on-delete callback called early or twice, the CPU
//! platform's devices 1..N, thousands of failed loads and compiles, empty tensors, a
//! device type that is no DLPack type. Against the real XLA CPU plugin (`DLPORT_PJRT_PLUGIN`;
//! each test skips visibly without it), and a copy of its table with callbacks patched in.

mod pjrt_common;

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use dlport_core::abi::{DeviceType, TypeCode};
use dlport_core::backend::TensorStorage;
use dlport_core::{CopyPolicy, DataType, Device, ExportBuilder};
use dlport_native::pjrt::sys::{self, Slot};
use dlport_native::pjrt::{ClientOptions, PjrtClient, PjrtPlugin};
use pjrt_common::{AFFINE, Spec, client, count, plugin_path, real, real_table, real_words, tensor};

static SERIAL: Mutex<()> = Mutex::new(());

/// Loads the real plugin, keeps its table and serializes the tests; `None` skips.
fn setup(test: &str) -> Option<(MutexGuard<'static, ()>, String)> {
    let path = plugin_path(test)?;
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    PjrtPlugin::load(&path).expect("load the real plugin");
    real_table(&path);
    Some((guard, path))
}

/// A leaked copy of the real table with `(slot, function)` patched in.
fn client_with(patches: &[(Slot, sys::Fn)], name: &str) -> PjrtClient {
    let mut t = real_words().to_vec();
    for (slot, f) in patches {
        t[slot.end() / 8 - 1] = *f as usize;
    }
    let table: &'static [usize] = Box::leak(t.into_boxed_slice());
    // SAFETY: a copy of the real table, its patches following the C API's signatures.
    let plugin = unsafe { PjrtPlugin::from_table(table.as_ptr().cast(), name) }.unwrap();
    PjrtClient::create(&plugin, &ClientOptions::default()).unwrap()
}

#[test]
fn an_executable_refuses_a_buffer_of_another_client() {
    let Some((_g, _)) = setup("foreign buffer") else {
        return;
    };
    let (_, first) = client("foreign buffer").unwrap();
    let exe = first.compile_mlir(AFFINE).unwrap();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    // A second client of the same plugin, and a client of a second plugin (another table).
    let (_, same_plugin) = client("foreign buffer").unwrap();
    let other_plugin = client_with(&[], "second-plugin");
    for other in [&same_plugin, &other_plugin] {
        let (t, _, released) = tensor(&x, &Spec::f32(&[2, 3]));
        let b = other.import(t, CopyPolicy::IfNeeded, None).unwrap();
        let e = exe.execute(&[&b]).unwrap_err().to_string();
        assert!(
            e.contains("argument 0") && e.contains("another client"),
            "{e}"
        );
        drop(b);
        assert_eq!(count(&released), 1);
    }
    // Its own client's buffer still runs.
    let (t, _, _) = tensor(&x, &Spec::f32(&[2, 3]));
    let b = first.import(t, CopyPolicy::IfNeeded, None).unwrap();
    let out = exe.execute(&[&b]).unwrap();
    let m = out[0].to_dlpack(true).unwrap();
    assert_eq!(m.view().to_vec::<f32>().unwrap()[5], 13.0);
}

/// Host bytes as a tensor of `dtype` and `shape`, `offset` bytes past a 64-byte boundary.
fn bytes_tensor(
    bytes: &[u8],
    dtype: DataType,
    shape: &[i64],
    offset: usize,
) -> (
    dlport_core::ManagedTensor,
    usize,
    std::sync::Arc<AtomicUsize>,
) {
    let mut words = vec![0u8; bytes.len().div_ceil(4) * 4];
    words[..bytes.len()].copy_from_slice(bytes);
    let words: Vec<f32> = words
        .chunks(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut spec = Spec::f32(shape);
    spec.dtype = dtype;
    spec.offset = offset;
    tensor(&words, &spec)
}

#[test]
fn sub_byte_copies_read_the_packed_tensor_and_keep_its_values() {
    let Some((_plugin, client)) = client("sub-byte copies") else {
        return;
    };
    let int4 = DataType::new(TypeCode::INT, 4, 1);
    let uint2 = DataType::new(TypeCode::UINT, 2, 1);
    // Six int4 elements packed as 21 43 65, followed by bytes the tensor does not own.
    let cases: [(DataType, &[u8], &[u8]); 4] = [
        (
            int4,
            &[0x21, 0x43, 0x65, 0x77, 0x88, 0x99],
            &[0x21, 0x43, 0x65],
        ),
        (int4, &[0xf8, 0x7e, 0x09, 0xff], &[0xf8, 0x7e, 0x09]),
        (
            uint2,
            &[0b1110_0100, 0b0001_1011, 0xff],
            &[0b1110_0100, 0b0001_1011],
        ),
        (
            DataType::FLOAT4_E2M1FN,
            &[0x3a, 0xc1, 0x5f, 0xee],
            &[0x3a, 0xc1, 0x5f],
        ),
    ];
    for (dtype, bytes, want) in cases {
        let n = (want.len() * 8 / dtype.storage_bits(false) as usize) as i64;
        for (policy, offset) in [(CopyPolicy::Always, 0), (CopyPolicy::IfNeeded, 1)] {
            let (t, address, released) = bytes_tensor(bytes, dtype, &[n], offset);
            let b = client
                .import(t, policy, None)
                .unwrap_or_else(|e| panic!("{dtype} {policy:?}: {e}"));
            assert_eq!(
                count(&released),
                1,
                "{dtype} {policy:?}: a copy releases at once"
            );
            let m = b.to_dlpack(true).unwrap();
            let v = m.view();
            assert_ne!(v.data() as usize, address, "{dtype}: a copy");
            assert_eq!((v.dtype(), v.shape()), (dtype, &[n][..]));
            // SAFETY: the export's packed bytes (the builder checked its span).
            let got = unsafe { std::slice::from_raw_parts(v.data().cast::<u8>(), want.len()) };
            assert_eq!(got, want, "{dtype} {policy:?} offset {offset}");
        }
    }
}

/// The on-delete callback and argument of the last view the patched plugin made.
static CALLBACK: Mutex<Option<(usize, usize)>> = Mutex::new(None);
/// 1: call the callback right after making the view; 2: call it again after the destroy.
static MODE: AtomicUsize = AtomicUsize::new(0);

fn call_back() {
    if let Some((f, arg)) = *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner) {
        // SAFETY: the callback dlport gave the plugin, with its argument (a plugin calling
        // it early or twice is what this test checks).
        let f: unsafe extern "C" fn(*mut c_void, *mut c_void) = unsafe { std::mem::transmute(f) };
        // SAFETY: as above.
        unsafe { f(std::ptr::null_mut(), arg as *mut c_void) };
    }
}

unsafe extern "C" fn early_view(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: forwarded as received (the plugin contract's args struct).
    let err = unsafe { real(sys::CLIENT_CREATE_VIEW)(args) };
    // SAFETY: as above.
    let a = unsafe { &*args.cast::<sys::Client_CreateViewOfDeviceBuffer_Args>() };
    let cb = a.on_delete_callback.map_or(0, |f| f as usize);
    *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner) =
        Some((cb, a.on_delete_callback_arg as usize));
    if err.is_null() && MODE.load(Ordering::SeqCst) == 1 {
        call_back();
    }
    err
}

unsafe extern "C" fn destroy_twice(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: forwarded as received.
    let err = unsafe { real(sys::BUFFER_DESTROY)(args) };
    call_back();
    err
}

#[test]
fn an_on_delete_callback_early_or_twice_releases_once_after_the_destroy() {
    let Some((_g, _)) = setup("on_delete abuse") else {
        return;
    };
    let c = client_with(
        &[
            (sys::CLIENT_CREATE_VIEW, early_view),
            (sys::BUFFER_DESTROY, destroy_twice),
        ],
        "callback-abuser",
    );
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for mode in [0, 1] {
        MODE.store(mode, Ordering::SeqCst);
        let (t, address, released) = tensor(&x, &Spec::f32(&[2, 3]));
        let b = c.import(t, CopyPolicy::Never, None).unwrap();
        // Called early (mode 1): the request is recorded, the producer stays.
        assert_eq!(
            count(&released),
            0,
            "mode {mode}: released while the view lives"
        );
        let m = b.to_dlpack(true).unwrap();
        assert_eq!(m.view().data() as usize, address);
        assert_eq!(m.view().to_vec::<f32>().unwrap(), x);
        drop(m);
        assert_eq!(count(&released), 0, "mode {mode}");
        // The destroy runs the callback (XLA), then the patch calls it once more.
        drop(b);
        assert_eq!(
            count(&released),
            1,
            "mode {mode}: released once, after the destroy"
        );
        call_back();
        assert_eq!(count(&released), 1, "mode {mode}: a late call does nothing");
    }
    MODE.store(0, Ordering::SeqCst);
    *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

#[test]
fn a_buffer_on_any_cpu_device_exports_as_host_memory() {
    let Some((_plugin, client)) = client("cpu devices") else {
        return;
    };
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for id in 0..client.devices().len() as i32 {
        for policy in [CopyPolicy::IfNeeded, CopyPolicy::Always] {
            let (t, _, _) = tensor(&x, &Spec::f32(&[2, 3]));
            let b = client.import(t, policy, Some(id)).unwrap();
            assert_eq!(b.info().unwrap().device, Device::cpu(), "device {id}");
            let m = b
                .to_dlpack(true)
                .unwrap_or_else(|e| panic!("device {id}: {e}"));
            assert_eq!(m.view().device(), Device::cpu());
            assert_eq!(m.view().to_vec::<f32>().unwrap(), x);
        }
    }
}

#[test]
fn thousands_of_failed_loads_and_compiles_keep_every_message_and_the_next_load() {
    let Some((_g, path)) = setup("failed loads") else {
        return;
    };
    let (_, c) = client("failed loads").unwrap();
    for i in 0..4200 {
        let missing = format!("/nonexistent/dlport-{i}/libpjrt.so");
        let e = PjrtPlugin::load(&missing).unwrap_err().to_string();
        assert!(e.contains(&missing), "load {i}: {e}");
    }
    for i in 0..300 {
        let e = c
            .compile_mlir(&format!("module @m{i} {{ bad{i} }}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("bad{i}")), "compile {i}: {e}");
    }
    // A path not loaded yet, after all of that: loaded as given.
    let dir = std::env::temp_dir().join(format!("dlport-pjrt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libxla_again.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let plugin = PjrtPlugin::load(link.to_str().unwrap()).unwrap();
    assert_eq!(plugin.origin(), link.to_str().unwrap());
    PjrtClient::create(&plugin, &ClientOptions::default()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// No memory at all: `data` is any address, `len` 0.
struct Nothing(usize);

// SAFETY: zero bytes at any address: nothing is ever read.
unsafe impl TensorStorage for Nothing {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0 as *mut c_void
    }
    fn byte_len(&self) -> usize {
        0
    }
    fn device(&self) -> Device {
        Device::cpu()
    }
}

#[test]
fn an_empty_tensor_imports_with_the_default_policy() {
    let Some((_plugin, client)) = client("empty") else {
        return;
    };
    for address in [0x1001, 0x1040, 4] {
        let t = ExportBuilder::new(Nothing(address), DataType::FLOAT32, &[0, 3])
            .build()
            .unwrap();
        let b = client
            .import(t, CopyPolicy::IfNeeded, None)
            .unwrap_or_else(|e| panic!("{address:#x}: {e}"));
        let m = b.to_dlpack(true).unwrap();
        assert_eq!(m.view().shape(), &[0, 3]);
    }
}

#[test]
fn a_device_type_that_is_no_dlpack_type_is_refused() {
    let Some((plugin, _)) = client("device type") else {
        return;
    };
    for code in [-7, 0x7fff_0000] {
        let options = ClientOptions {
            device_type: Some(DeviceType(code)),
            ..ClientOptions::default()
        };
        let e = PjrtClient::create(&plugin, &options)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("device_type") && e.contains(&code.to_string()),
            "{e}"
        );
    }
}

#[test]
fn an_argument_of_another_type_or_shape_than_the_parameter_is_refused() {
    let Some((_plugin, client)) = client("parameter types") else {
        return;
    };
    let exe = client.compile_mlir(AFFINE).unwrap();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut int32 = Spec::f32(&[2, 3]);
    int32.dtype = DataType::INT32;
    for (spec, given) in [(int32, "int32[2,3]"), (Spec::f32(&[3, 2]), "float32[3,2]")] {
        let (t, _, _) = tensor(&x, &spec);
        let b = client.import(t, CopyPolicy::IfNeeded, None).unwrap();
        let e = exe.execute(&[&b]).unwrap_err().to_string();
        assert!(
            e.contains(&format!("argument 0 is {given}")) && e.contains("float32[2,3]"),
            "{e}"
        );
    }
    let e = exe.execute(&[]).unwrap_err().to_string();
    assert!(e.contains("takes 1 parameters; 0 arguments"), "{e}");
}
