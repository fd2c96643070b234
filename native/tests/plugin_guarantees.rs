//! The plugin host's guarantees of issue #47, one test per class, through the Rust doors (a
//! `Registry` of dlport-core, and dlport-native's process-wide plugin table):
//! - two plugins on one device type: every operation on a tensor goes to the plugin that made
//!   it, or fails with `NoBackend` once that plugin is unregistered;
//! - a plugin never takes a host-class device type, nor one a built-in backend serves;
//! - device ids: one numbering per field, translated once in and once out; a failing
//!   translation fails;
//! - padded sub-byte tensors reach a plugin packed;
//! - a plugin's `destroy` runs when the last handle to it is gone, on the thread that drops it:
//!   a listing held on another thread past the plugin's last tensor delays it until then.
//!
//! The fake plugin (`fake_plugin/`) keeps its "device" memory in host memory labelled
//! `kDLExtDev`, and counts every callback.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use dlport_core::abi::{DeviceType, FLAG_IS_SUBBYTE_TYPE_PADDED};
use dlport_core::backend::Backend;
use dlport_core::{
    CopyPolicy, DataType, Device, ExportBuilder, ExportOptions, ImportOptions, Registry, Tensor,
};
use dlport_native::plugin::{DlportPlugin, PluginBackend};
use dlport_testkit::wait::count_reaches;

mod fake_plugin;
use fake_plugin::{EXT, Fake, leak_fake, plugin_struct};

/// How many times `wait` ran, per plugin state.
static WAITS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

unsafe extern "C" fn wait(s: *mut c_void, _: i32, _: i32, _: *mut c_void) -> c_int {
    *WAITS.lock().unwrap().entry(s as usize).or_default() += 1;
    0
}

fn waits(fake: &Fake) -> usize {
    let key = std::ptr::from_ref(fake) as usize;
    WAITS.lock().unwrap().get(&key).copied().unwrap_or(0)
}

fn plugin(fake: &'static Fake, name: &'static std::ffi::CStr) -> Arc<PluginBackend> {
    let mut raw = plugin_struct(fake, name);
    raw.wait = Some(wait);
    // SAFETY: a complete struct whose callbacks follow the contract; `fake` is 'static.
    unsafe { PluginBackend::from_raw(&raw, "the test", None) }.unwrap()
}

fn to_ext() -> ImportOptions {
    ImportOptions {
        device: Some(Device::new(EXT, 0)),
        copy: CopyPolicy::IfNeeded,
        ..Default::default()
    }
}

fn to_cpu() -> ExportOptions {
    ExportOptions {
        dl_device: Some(Device::cpu()),
        ..ExportOptions::legacy()
    }
}

/// A host tensor copied onto the plugin's device through `r` (the plugin serving kDLExtDev).
fn on_device(r: &Registry, values: Vec<f32>) -> Tensor {
    let n = values.len() as i64;
    let host = Tensor::from_vec(values, &[n]).unwrap();
    let m = r.to_dlpack(&host, &ExportOptions::legacy()).unwrap();
    r.from_dlpack(m, &to_ext()).unwrap()
}

#[test]
fn two_plugins_on_one_type_each_tensor_goes_to_the_plugin_that_made_it_in_a_registry() {
    let (a, b) = (leak_fake(), leak_fake());
    let mut r = Registry::with_cpu();
    r.register(plugin(a, c"reg_a")).unwrap();
    let t = on_device(&r, vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!(t.backend(), "reg_a");
    r.register(plugin(b, c"reg_b")).unwrap();
    let out = r.to_dlpack(&t, &to_cpu()).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(
        a.to_host.load(Ordering::SeqCst),
        1,
        "A made it: A copies it"
    );
    assert_eq!(
        b.to_host.load(Ordering::SeqCst),
        0,
        "B never sees A's handle"
    );
    drop(out);
    // A new tensor goes to the latest plugin serving the type.
    let u = on_device(&r, vec![5.0]);
    assert_eq!(u.backend(), "reg_b");
    assert_eq!(b.allocations.load(Ordering::SeqCst), 1);
    drop((t, u));
    assert_eq!(a.deallocations.load(Ordering::SeqCst), 1);
    assert_eq!(b.deallocations.load(Ordering::SeqCst), 1);
}

#[test]
fn two_plugins_on_one_type_each_tensor_goes_to_the_plugin_that_made_it_process_wide() {
    use dlport_native::plugin::{add_to_default, unregister_global};
    // kDLExtDev in the process-wide table is this test's alone in this binary.
    let (a, b) = (leak_fake(), leak_fake());
    add_to_default(plugin(a, c"glob_a"), false).unwrap();
    let r = dlport_native::install().unwrap();
    let t = on_device(r, vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!(t.backend(), "glob_a");
    add_to_default(plugin(b, c"glob_b"), false).unwrap();
    // To the host: A's copy_to_host, right values.
    let out = r.to_dlpack(&t, &to_cpu()).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(
        (
            a.to_host.load(Ordering::SeqCst),
            b.to_host.load(Ordering::SeqCst)
        ),
        (1, 0)
    );
    drop(out);
    // Out on its own device: A's wait and acquire.
    let out = r.to_dlpack(&t, &ExportOptions::legacy()).unwrap();
    assert_eq!((waits(a), waits(b)), (1, 0));
    assert_eq!(
        (a.refs.load(Ordering::SeqCst), b.refs.load(Ordering::SeqCst)),
        (1, 0)
    );
    drop(out);
    // A listing on another thread (what `dlport_backends` and `dlport.backends()` make) holds
    // A from before its unregistration until after its last tensor is gone.
    let (listed_tx, listed) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let listing = std::thread::spawn(move || {
        let held = dlport_native::plugin::plugins();
        listed_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        drop(held);
    });
    listed.recv().unwrap();
    // A unregistered: A's tensor has no backend any more; B is never asked.
    unregister_global("glob_a").unwrap();
    for options in [ExportOptions::legacy(), to_cpu()] {
        let err = r.to_dlpack(&t, &options).unwrap_err();
        assert_eq!(err.code(), 23, "NoBackend: {err}");
        assert!(
            err.to_string().contains("no backend for kDLExtDev"),
            "{err}"
        );
    }
    assert_eq!((waits(a), waits(b)), (1, 0), "no wait after A is gone");
    assert_eq!(b.refs.load(Ordering::SeqCst), 0);
    assert_eq!(b.to_host.load(Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(
        a.deallocations.load(Ordering::SeqCst),
        1,
        "A still frees its own"
    );
    // The last tensor is gone, but not the last handle: A's `destroy` runs on the listing's
    // thread, when the listing drops.
    assert_eq!(
        a.destroyed.load(Ordering::SeqCst),
        0,
        "the listing still holds A"
    );
    release.send(()).unwrap();
    listing.join().unwrap();
    count_reaches(
        "plugin A's destroy after the listing holding it dropped",
        1,
        || a.destroyed.load(Ordering::SeqCst),
    );
    unregister_global("glob_b").unwrap();
}

fn refused(types: &'static [i32]) -> String {
    let fake = leak_fake();
    let mut raw: DlportPlugin = plugin_struct(fake, c"hosty");
    raw.device_types = types.as_ptr();
    raw.num_device_types = types.len();
    // SAFETY: a complete struct (the device types are wrong on purpose).
    let err = unsafe { PluginBackend::from_raw(&raw, "the test", None) }.unwrap_err();
    assert_eq!(fake.destroyed.load(Ordering::SeqCst), 0);
    err.to_string()
}

#[test]
fn a_plugin_asking_for_a_host_class_or_built_in_device_type_is_refused() {
    // kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged, kDLTPUHost; each refused
    // alone and after an allowed type, naming the field and the value.
    static ONE: [[i32; 1]; 6] = [[1], [2], [3], [11], [13], [20]];
    static AFTER: [[i32; 2]; 6] = [[4, 1], [4, 2], [4, 3], [4, 11], [4, 13], [4, 20]];
    for (one, after) in ONE.iter().zip(AFTER.iter()) {
        let t = one[0];
        for text in [refused(one), refused(after)] {
            assert!(text.contains(&format!("device_types has {t} (")), "{text}");
            assert!(text.contains("\"hosty\""), "{text}");
        }
    }
    assert!(refused(&ONE[3]).contains("host-class"), "kDLROCMHost");
    assert!(refused(&ONE[1]).contains("built-in"), "kDLCUDA");
    // Device types no built-in backend serves are a plugin's (OpenCL, ROCm, ExtDev, a code
    // DLPack does not name).
    static OK: [i32; 4] = [4, 10, 12, 99];
    let mut raw = plugin_struct(leak_fake(), c"devicey");
    raw.device_types = OK.as_ptr();
    raw.num_device_types = OK.len();
    // SAFETY: a complete struct.
    let p = unsafe { PluginBackend::from_raw(&raw, "the test", None) }.unwrap();
    assert_eq!(p.device_types().len(), 4);
    for t in [1, 2, 3, 11, 13, 20] {
        assert!(dlport_native::plugin::rule::refusal(t).is_some(), "{t}");
        assert!(Device::new(DeviceType(t), 0).is_host_accessible() || t == 2);
    }
}

/// The producers' id `n` is the plugin's `n + 10`; ids below 10 have no producer id.
unsafe extern "C" fn plus_ten(_: *mut c_void, id: i32, out: *mut i32) -> c_int {
    // SAFETY: writable (contract).
    unsafe { *out = id + 10 };
    0
}

unsafe extern "C" fn minus_ten(_: *mut c_void, id: i32, out: *mut i32) -> c_int {
    if id < 10 {
        return -4;
    }
    // SAFETY: writable (contract).
    unsafe { *out = id - 10 };
    0
}

unsafe extern "C" fn never(_: *mut c_void, _: i32, _: *mut i32) -> c_int {
    -5
}

fn renumbering(
    fake: &'static Fake,
    export: dlport_native::plugin::DlportPluginDeviceId,
) -> Registry {
    let mut raw = plugin_struct(fake, c"renumber");
    raw.translate_device_id = Some(plus_ten);
    raw.export_device_id = export;
    // SAFETY: a complete struct; `fake` is 'static.
    let p = unsafe { PluginBackend::from_raw(&raw, "the test", None) }.unwrap();
    let mut r = Registry::with_cpu();
    r.register(p).unwrap();
    r
}

#[test]
fn plugin_device_ids_are_translated_once_in_and_once_out() {
    let fake = leak_fake();
    let r = renumbering(fake, Some(minus_ten));
    let dev = Device::new(EXT, 2);
    // Allocation: translated in once.
    let a = r
        .resolve(dev)
        .unwrap()
        .allocate(dev, DataType::FLOAT32, &[2])
        .unwrap();
    assert_eq!(a.device(), Device::new(EXT, 12), "the plugin's numbering");
    assert_eq!(a.buffer().device(), dev, "the producers' numbering");
    let out = r.to_dlpack(&a, &ExportOptions::legacy()).unwrap();
    assert_eq!(out.view().device(), dev, "translated out once");
    drop(out);
    // A host → plugin copy: the same numbering as an allocation.
    let host = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let m = r.to_dlpack(&host, &ExportOptions::legacy()).unwrap();
    let opts = ImportOptions {
        device: Some(dev),
        ..to_ext()
    };
    let t = r.from_dlpack(m, &opts).unwrap();
    assert_eq!(t.device(), Device::new(EXT, 12));
    let out = r.to_dlpack(&t, &ExportOptions::legacy()).unwrap();
    assert_eq!(out.view().device(), dev, "not (12, -8) nor (12, 12)");
    // Back in: a view, translated in once (2 → 12, never 12 → 22).
    let back = r.from_dlpack(out, &ImportOptions::default()).unwrap();
    assert_eq!(back.device(), Device::new(EXT, 12));
    // And to the host, the values.
    let host_back = r.to_dlpack(&back, &to_cpu()).unwrap();
    assert_eq!(host_back.as_slice::<f32>().unwrap(), [1.0, 2.0]);
    drop((host_back, back, t, a));

    // A failing export_device_id fails the export (never the plugin's own id).
    let fake = leak_fake();
    let r = renumbering(fake, Some(never));
    let a = r
        .resolve(dev)
        .unwrap()
        .allocate(dev, DataType::FLOAT32, &[2])
        .unwrap();
    let err = r.to_dlpack(&a, &ExportOptions::legacy()).unwrap_err();
    assert!(err.to_string().contains("export_device_id"), "{err}");
    assert_eq!(fake.refs.load(Ordering::SeqCst), 0, "nothing acquired");
}

#[test]
fn padded_sub_byte_copies_to_a_plugin_are_packed_first() {
    let fake = leak_fake();
    let mut r = Registry::with_cpu();
    r.register(plugin(fake, c"subbyte")).unwrap();
    // int4 [1, 2, 3, 4], one element per byte (IS_SUBBYTE_TYPE_PADDED).
    let int4 = DataType::new(dlport_core::abi::TypeCode::INT, 4, 1);
    let m = ExportBuilder::new(vec![1u8, 2, 3, 4], int4, &[4])
        .subbyte_padded(true)
        .build()
        .unwrap();
    assert_ne!(m.view().flags() & FLAG_IS_SUBBYTE_TYPE_PADDED, 0);
    let t = r.from_dlpack(m, &to_ext()).unwrap();
    assert_eq!(fake.from_host.load(Ordering::SeqCst), 1);
    // The plugin holds the packed bytes: element i at bits 4i.
    let out = r.to_dlpack(&t, &to_cpu()).unwrap();
    let bytes = out.view().data().cast::<u8>();
    // SAFETY: a host export of 2 packed bytes, alive while `out` is.
    let packed = unsafe { std::slice::from_raw_parts(bytes, 2) };
    assert_eq!(packed, [0x21, 0x43], "not 1 0 2 0");
    assert_eq!(out.view().flags() & FLAG_IS_SUBBYTE_TYPE_PADDED, 0);
}
