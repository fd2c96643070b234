//! C plugins (`DlportPlugin`) in the registry beside Rust backends: resolution, import views,
//! exports, copies, allocation, and a plugin that fails or lies. The fake plugin is in
//! `fake_plugin/`: written in Rust with `extern "C"` callbacks, exactly as the C interface sees
//! it; its "device" memory is host memory labelled `kDLExtDev`. The C entries that register,
//! list, unregister and load plugins are dlport-capi's tests (`capi/tests/plugin.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::DeviceType;
use dlport_core::backend::Backend;
use dlport_core::{CopyPolicy, DataType, Device, ExportOptions, ImportOptions, Registry, Tensor};
use dlport_native::plugin::{DLPORT_PLUGIN_INTERFACE_VERSION, DlportPlugin, PluginBackend};
use dlport_testkit::xpu::{Xpu, counted_export};

mod fake_plugin;
use fake_plugin::{EXT, Fake, leak_fake, plugin_struct};

/// A registry with the CPU backend, the testkit's Rust "xpu" plugin and a fake C plugin.
fn side_by_side(fake: &'static Fake) -> (Registry, Arc<PluginBackend>) {
    let raw = plugin_struct(fake, c"fake");
    // SAFETY: a complete struct whose callbacks follow the contract; `fake` is 'static.
    let plugin = unsafe { PluginBackend::from_raw(&raw, "the test", None) }.unwrap();
    let mut r = Registry::with_cpu();
    r.register(Arc::new(Xpu::new())).unwrap();
    r.register(plugin.clone()).unwrap();
    (r, plugin)
}

#[test]
fn c_plugins_and_rust_backends_resolve_by_the_same_rules() {
    let fake = leak_fake();
    let (mut r, plugin) = side_by_side(fake);
    assert_eq!(r.names().collect::<Vec<_>>(), ["cpu", "xpu", "fake"]);
    assert_eq!(r.resolve(Device::new(EXT, 0)).unwrap().name(), "fake");
    assert_eq!(
        r.resolve(Device::new(DeviceType::ONEAPI, 0))
            .unwrap()
            .name(),
        "xpu"
    );
    assert_eq!(r.resolve(Device::cpu()).unwrap().name(), "cpu");
    assert_eq!(
        plugin.platform_id(),
        dlport_core::backend::platform_id("fake")
    );
    // A C plugin serving kDLOneAPI, registered later, wins it as a Rust backend would.
    static ONEAPI: [i32; 1] = [14];
    let mut raw = plugin_struct(fake, c"xpu2");
    raw.device_types = ONEAPI.as_ptr();
    // SAFETY: as in side_by_side.
    let xpu2 = unsafe { PluginBackend::from_raw(&raw, "the test", None) }.unwrap();
    r.register(xpu2).unwrap();
    assert_eq!(
        r.resolve(Device::new(DeviceType::ONEAPI, 0))
            .unwrap()
            .name(),
        "xpu2"
    );
    r.unregister("xpu2");
    assert_eq!(
        r.resolve(Device::new(DeviceType::ONEAPI, 0))
            .unwrap()
            .name(),
        "xpu"
    );
    // Duplicate names are refused for plugins as for Rust backends.
    let dup = plugin_struct(fake, c"cpu");
    // SAFETY: as above.
    let dup = unsafe { PluginBackend::from_raw(&dup, "the test", None) }.unwrap();
    assert!(r.register(dup).unwrap_err().to_string().contains("cpu"));
}

#[test]
fn import_is_a_view_released_once_and_export_takes_a_plugin_reference() {
    let fake = leak_fake();
    let (r, plugin) = side_by_side(fake);
    let deleted = Arc::new(AtomicUsize::new(0));
    let m = counted_export(&deleted, Device::new(EXT, 0));
    let data = m.view().data();
    let t = r.from_dlpack(m, &ImportOptions::default()).unwrap();
    assert_eq!(t.backend(), "fake");
    assert!(!t.is_copied());
    assert_eq!(t.buffer().ptr(), data, "a view, no copy");
    assert_eq!(fake.views.load(Ordering::SeqCst), 1);
    // Out on its own device: the plugin's reference, then dlport's, released once each.
    let out = r.to_dlpack(&t, &ExportOptions::legacy()).unwrap();
    assert_eq!(out.view().data(), data, "the same memory");
    assert_eq!(fake.refs.load(Ordering::SeqCst), 1);
    // Back in: another view of the same memory.
    let back = r.from_dlpack(out, &ImportOptions::default()).unwrap();
    assert_eq!(back.buffer().ptr(), data);
    drop(back);
    assert_eq!(fake.refs_released.load(Ordering::SeqCst), 1);
    assert_eq!(fake.views_destroyed.load(Ordering::SeqCst), 1);
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        0,
        "the first view still holds it"
    );
    drop(t);
    assert_eq!(fake.views_destroyed.load(Ordering::SeqCst), 2);
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        1,
        "the producer's deleter ran once"
    );
    drop(r);
    assert_eq!(fake.destroyed.load(Ordering::SeqCst), 0, "held by `plugin`");
    drop(plugin);
    assert_eq!(
        fake.destroyed.load(Ordering::SeqCst),
        1,
        "destroyed once, after the last use"
    );
}

#[test]
fn copies_go_through_the_plugin_both_ways_and_allocations_are_freed_once() {
    let fake = leak_fake();
    let (r, _plugin) = side_by_side(fake);
    let host = Tensor::from_vec(vec![1.5f32, 2.5, 3.5, 4.5, 5.5, 6.5], &[2, 3]).unwrap();
    let m = r.to_dlpack(&host, &ExportOptions::legacy()).unwrap();
    let opts = ImportOptions {
        device: Some(Device::new(EXT, 0)),
        copy: CopyPolicy::IfNeeded,
        ..Default::default()
    };
    let on_dev = r.from_dlpack(m, &opts).unwrap();
    assert_eq!(on_dev.backend(), "fake");
    assert!(on_dev.is_copied());
    assert_eq!(fake.from_host.load(Ordering::SeqCst), 1);
    assert_eq!(fake.allocations.load(Ordering::SeqCst), 1);
    // Back to the host: one copy by the plugin.
    let out = r
        .to_dlpack(
            &on_dev,
            &ExportOptions {
                dl_device: Some(Device::cpu()),
                ..ExportOptions::legacy()
            },
        )
        .unwrap();
    assert_eq!(fake.to_host.load(Ordering::SeqCst), 1);
    assert_eq!(out.view().device(), Device::cpu());
    assert_eq!(
        out.as_slice::<f32>().unwrap(),
        [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]
    );
    // A transposed host view is compacted before the plugin sees it.
    let t = Tensor::from_vec((0..6).map(|i| i as f32).collect::<Vec<_>>(), &[2, 3]).unwrap();
    let m = r.to_dlpack(&t, &ExportOptions::legacy()).unwrap();
    drop(out);
    drop(on_dev);
    drop(m);
    assert_eq!(fake.deallocations.load(Ordering::SeqCst), 1, "freed once");
    // Allocation through the registry.
    let a = r
        .resolve(Device::new(EXT, 0))
        .unwrap()
        .allocate(Device::new(EXT, 0), DataType::FLOAT32, &[4])
        .unwrap();
    assert_eq!(a.backend(), "fake");
    drop(a);
    assert_eq!(fake.deallocations.load(Ordering::SeqCst), 2);
}

#[test]
fn a_failing_callback_is_an_error_naming_the_plugin_and_the_callback() {
    let fake = leak_fake();
    let (r, _plugin) = side_by_side(fake);
    *fake.fail.lock().unwrap() = Some("view_create");
    let deleted = Arc::new(AtomicUsize::new(0));
    let err = r
        .from_dlpack(
            counted_export(&deleted, Device::new(EXT, 0)),
            &ImportOptions::default(),
        )
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("\"fake\""), "{text}");
    assert!(text.contains("view_create"), "{text}");
    assert!(text.contains("code -7"), "{text}");
    assert!(text.contains("the fake device is on fire"), "{text}");
    assert_eq!(err.code(), 32);
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        1,
        "the producer's tensor was released once"
    );
    assert_eq!(
        fake.views_destroyed.load(Ordering::SeqCst),
        0,
        "nothing to destroy"
    );

    // Copies and allocation: the same, and nothing leaks.
    *fake.fail.lock().unwrap() = Some("copy_from_host");
    let host = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
    let m = r.to_dlpack(&host, &ExportOptions::legacy()).unwrap();
    let opts = ImportOptions {
        device: Some(Device::new(EXT, 0)),
        ..Default::default()
    };
    let text = r.from_dlpack(m, &opts).unwrap_err().to_string();
    assert!(
        text.contains("copy_from_host") && text.contains("\"fake\""),
        "{text}"
    );
    assert_eq!(
        fake.allocations.load(Ordering::SeqCst),
        fake.deallocations.load(Ordering::SeqCst),
        "the allocation made for the failed copy was freed"
    );
    *fake.fail.lock().unwrap() = Some("acquire");
    let t = r
        .from_dlpack(
            counted_export(&deleted, Device::new(EXT, 0)),
            &ImportOptions::default(),
        )
        .unwrap();
    let text = r
        .to_dlpack(&t, &ExportOptions::legacy())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("acquire") && text.contains("\"fake\""),
        "{text}"
    );
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 2);
    assert_eq!(fake.refs_released.load(Ordering::SeqCst), 0);
}

#[test]
fn a_lying_plugin_is_refused_without_a_leak_or_a_second_release() {
    let fake = leak_fake();
    let (r, _plugin) = side_by_side(fake);
    *fake.null.lock().unwrap() = Some("view_create");
    let deleted = Arc::new(AtomicUsize::new(0));
    let text = r
        .from_dlpack(
            counted_export(&deleted, Device::new(EXT, 0)),
            &ImportOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("view_create") && text.contains("NULL view"),
        "{text}"
    );
    assert!(text.contains("\"fake\""), "{text}");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    assert_eq!(
        fake.views_destroyed.load(Ordering::SeqCst),
        0,
        "a NULL view is never destroyed"
    );
    *fake.null.lock().unwrap() = Some("allocate");
    let text = r
        .resolve(Device::new(EXT, 0))
        .unwrap()
        .allocate(Device::new(EXT, 0), DataType::FLOAT32, &[4])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("allocate") && text.contains("NULL handle"),
        "{text}"
    );
    assert_eq!(fake.deallocations.load(Ordering::SeqCst), 0);
    *fake.null.lock().unwrap() = Some("acquire");
    let t = r
        .from_dlpack(
            counted_export(&deleted, Device::new(EXT, 0)),
            &ImportOptions::default(),
        )
        .unwrap();
    let text = r
        .to_dlpack(&t, &ExportOptions::legacy())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("acquire") && text.contains("NULL reference"),
        "{text}"
    );
    assert_eq!(
        fake.refs_released.load(Ordering::SeqCst),
        0,
        "a NULL reference is never released"
    );
}

fn refused(raw: &DlportPlugin) -> String {
    // SAFETY: a complete struct (the fields under test are wrong on purpose).
    unsafe { PluginBackend::from_raw(raw, "the test", None) }
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_plugin_structs_are_refused_naming_the_field() {
    let fake = leak_fake();
    let good = plugin_struct(fake, c"fake");
    let mut p = good;
    p.struct_size = 16;
    assert!(refused(&p).contains("struct_size = 16"), "{}", refused(&p));
    let mut p = good;
    p.interface_version = DLPORT_PLUGIN_INTERFACE_VERSION + 1;
    let text = refused(&p);
    assert!(
        text.contains("interface_version = 2") && text.contains("\"fake\""),
        "{text}"
    );
    let mut p = good;
    p.name = std::ptr::null();
    assert!(refused(&p).contains("name is NULL"));
    let mut p = good;
    p.name = c"has space".as_ptr();
    assert!(refused(&p).contains("\"has space\""), "{}", refused(&p));
    let mut p = good;
    p.num_device_types = 0;
    assert!(refused(&p).contains("num_device_types = 0"));
    static CPU: [i32; 1] = [1];
    let mut p = good;
    p.device_types = CPU.as_ptr();
    assert!(refused(&p).contains("kDLCPU"));
    let mut p = good;
    p.view_destroy = None;
    let text = refused(&p);
    assert!(
        text.contains("view_create is set but view_destroy is NULL"),
        "{text}"
    );
    // SAFETY: NULL is refused before anything is read.
    let text = unsafe { PluginBackend::from_raw(std::ptr::null(), "the test", None) }
        .unwrap_err()
        .to_string();
    assert!(text.contains("NULL"), "{text}");
    assert_eq!(
        fake.destroyed.load(Ordering::SeqCst),
        0,
        "a refused plugin is never destroyed"
    );
}
