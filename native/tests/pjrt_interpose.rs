//! dlport's interposed `PJRT_Api` (`pjrt::interpose`, the table `dlport.jax` puts between JAX
//! and a vendor) over the real XLA CPU plugin (`DLPORT_PJRT_PLUGIN`; skipped visibly without
//! it), with dlport's own client as the host: the renamed platform, the host's client seen,
//! a buffer learnt at `PJRT_Buffer_UnsafePointer` and exported, the host's `Destroy` deferred
//! while the export lives (memory kept, not reused), the refusals of `interpose`, and the host's
//! client borrowed (it compiles and runs after the host's `Destroy`; the last holder destroys it).

mod pjrt_common;

use std::ffi::c_void;

use dlport_core::abi::DeviceType;
use dlport_core::{CopyPolicy, ManagedTensor};
use dlport_native::pjrt::interpose::{self, Interposition};
use dlport_native::pjrt::{ClientOptions, PjrtBuffer, PjrtClient, PjrtPlugin, sys};
use pjrt_common::{AFFINE, Spec, plugin_path, tensor, vendor_table};

/// `PJRT_Buffer_UnsafePointer` called through `table`, as JAX's `unsafe_buffer_pointer()`
/// does: the address, or `None` when the call fails.
fn unsafe_pointer(table: *const c_void, buffer: *mut c_void) -> Option<usize> {
    #[repr(C)]
    struct Args {
        head: sys::Head,
        buffer: *mut c_void,
        buffer_pointer: usize,
    }
    let mut a = Args {
        head: sys::Head {
            struct_size: std::mem::size_of::<Args>(),
            extension_start: std::ptr::null_mut(),
        },
        buffer,
        buffer_pointer: 0,
    };
    // SAFETY: slot 73 (PJRT_Buffer_UnsafePointer) is inside the 0.81 table (984 bytes).
    let f = unsafe { *table.cast::<usize>().add(5 + 73) };
    assert_ne!(f, 0);
    // SAFETY: the table's function of this slot, with its args.
    let err =
        unsafe { std::mem::transmute::<usize, sys::Fn>(f)(std::ptr::from_mut(&mut a).cast()) };
    err.is_null().then_some(a.buffer_pointer)
}

fn buffer(client: &PjrtClient, values: &[f32]) -> PjrtBuffer {
    let (t, _, _) = tensor(values, &Spec::f32(&[values.len() as i64]));
    client.import(t, CopyPolicy::Always, None).expect("a copy")
}

fn read(m: &ManagedTensor) -> Vec<f32> {
    m.view().to_vec::<f32>().unwrap()
}

#[test]
fn the_host_sees_the_interposed_table_and_exports_outlive_its_destroy() {
    let Some(path) = plugin_path("interpose") else {
        return;
    };
    let table = vendor_table(&path);
    let what = Interposition {
        rename: Some("xpu".into()),
        hooks: true,
        stubs: Vec::new(),
        device_type: Some(DeviceType::CPU),
    };
    // SAFETY: the plugin's table, loaded for the rest of the process.
    let ours = unsafe { interpose::interpose(table, &what, "xpu") }.expect("interpose");
    assert_ne!(ours, table);
    // Twice: the same table; another device type: refused.
    // SAFETY: as above.
    let again = unsafe { interpose::interpose(table, &what, "xpu") }.unwrap();
    assert_eq!(again, ours);
    let other = Interposition {
        device_type: Some(DeviceType::ONEAPI),
        ..what.clone()
    };
    // SAFETY: as above.
    let e = unsafe { interpose::interpose(table, &other, "xpu") }.unwrap_err();
    assert!(e.to_string().contains("already interposed"), "{e}");
    // SAFETY: as above; dlport's own table over itself is refused.
    let e = unsafe { interpose::interpose(ours, &what, "xpu") }.unwrap_err();
    assert!(e.to_string().contains("already dlport's"), "{e}");
    // SAFETY: NULL is refused by the table check.
    assert!(unsafe { interpose::interpose(std::ptr::null(), &what, "null") }.is_err());

    assert!(interpose::host_client(ours).is_null(), "no client yet");
    // SAFETY: the interposed table lives for the process.
    let plugin = unsafe { PjrtPlugin::from_table(ours, "interposed") }.expect("the table");
    let options = ClientOptions {
        device_type: Some(DeviceType::CPU),
        ..ClientOptions::default()
    };
    let client = PjrtClient::create(&plugin, &options).expect("a client through the table");
    assert_eq!(
        client.platform(),
        "xpu",
        "PJRT_Client_PlatformName is answered"
    );
    assert!(
        !interpose::host_client(ours).is_null(),
        "the host's client is seen"
    );

    // Learnt at UnsafePointer, pinned before the vendor answers.
    let b = buffer(&client, &[1.0, 2.0, 3.0, 4.0]);
    let raw = b.as_raw();
    let (address, learnt) = interpose::learn(|| unsafe_pointer(ours, raw));
    let learnt = learnt.expect("the table saw the buffer");
    assert_eq!(interpose::pins(raw), 1);
    // Outside learn(), the table only forwards.
    let (_, none) = interpose::learn(|| ());
    assert!(none.is_none());
    assert!(unsafe_pointer(ours, raw).is_some());
    assert_eq!(interpose::pins(raw), 1);
    let export = interpose::export(learnt, true, CopyPolicy::Never).expect("export");
    let view = export.view();
    assert_eq!(Some(view.data() as usize), address, "a view, not a copy");
    assert!(
        view.flags() & dlport_core::abi::FLAG_READ_ONLY != 0,
        "READ_ONLY"
    );
    assert_eq!(view.device().device_type, DeviceType::CPU);
    assert_eq!(read(&export), [1.0, 2.0, 3.0, 4.0]);

    // The host destroys its buffer: deferred while the export lives.
    drop(b);
    assert_eq!(interpose::pins(raw), 1);
    let others: Vec<PjrtBuffer> = (0..16).map(|i| buffer(&client, &[i as f32; 4])).collect();
    for o in &others {
        let (p, l) = interpose::learn(|| unsafe_pointer(ours, o.as_raw()));
        assert_ne!(p, address, "a new buffer reused exported memory");
        drop(l);
    }
    assert_eq!(read(&export), [1.0, 2.0, 3.0, 4.0]);
    // The deleter runs the deferred Destroy, once, on another thread.
    std::thread::spawn(move || drop(export)).join().unwrap();
    assert_eq!(interpose::pins(raw), 0);
    drop(others);

    // An export outlives the host's buffer and the host's client.
    let b2 = buffer(&client, &[5.0; 4]);
    let (_, l2) = interpose::learn(|| unsafe_pointer(ours, b2.as_raw()));
    let late = interpose::export(l2.unwrap(), true, CopyPolicy::Never).unwrap();
    assert_eq!(interpose::client_holders(ours), 2, "the host and the pin");
    drop(b2);

    // The host's client, borrowed: it computes, and outlives the host's Destroy.
    let raw_client = interpose::borrow_client(ours).expect("a client to borrow");
    // SAFETY: a counted reference to a live client of the interposed table.
    let borrowed = unsafe { PjrtClient::adopt(&plugin, raw_client, &options) }.expect("adopt");
    assert_eq!(borrowed.platform(), "xpu");
    assert_eq!(borrowed.devices().len(), client.devices().len());
    drop(client);
    let exe = borrowed
        .compile_mlir(AFFINE)
        .expect("compile on the borrowed client");
    let (t, _, _) = tensor(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &Spec::f32(&[2, 3]));
    let input = borrowed.import(t, CopyPolicy::Always, None).unwrap();
    let out = exe
        .execute(&[&input])
        .expect("execute after the host's Destroy");
    let got = read(&out[0].to_dlpack(true).unwrap());
    assert_eq!(got, [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
    drop((exe, input, out, borrowed));
    assert_eq!(interpose::client_holders(ours), 1, "the pin alone");
    assert_eq!(read(&late), [5.0; 4]);
    drop(late);
    assert_eq!(
        interpose::client_holders(ours),
        0,
        "the last holder destroyed it"
    );
    assert!(interpose::borrow_client(ours).is_none());
}
