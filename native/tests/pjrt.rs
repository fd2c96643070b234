//! The PJRT backend against the real XLA CPU plugin (`DLPORT_PJRT_PLUGIN`; each test skips
//! visibly without it): devices, import as a view and by copy, export as an external
//! reference, StableHLO executed on an imported view, the refusals, each release counted.

mod pjrt_common;

use dlport_core::abi::DeviceType;
use dlport_core::backend::Backend;
use dlport_core::error::{CopyReason, DispatchError};
use dlport_core::{CopyPolicy, DataType, Device, Error, ExportOptions, ImportOptions, Registry};
use dlport_native::interop::pjrt::PjrtBackend;
use dlport_native::pjrt::{ClientOptions, PjrtClient};
use pjrt_common::{AFFINE, Spec, client, count, tensor};

#[test]
fn devices_follow_the_addressable_devices() {
    let Some((plugin, client)) = client("devices") else {
        return;
    };
    assert_eq!(plugin.api_version().0, 0);
    assert!(plugin.api_version().1 >= 81, "{:?}", plugin.api_version());
    assert!(plugin.missing().is_empty(), "{:?}", plugin.missing());
    // The table's size covers the 0.81 functions; the extensions are a readable chain.
    assert!(plugin.struct_size() >= dlport_native::pjrt::sys::API_SIZE_0_81);
    let exts = plugin.extensions();
    eprintln!("extensions: {exts:?}");
    assert!(!exts.is_empty() && exts.len() < 64, "{exts:?}");
    assert!(exts.iter().all(|&(_, _, size)| size >= 24), "{exts:?}");
    assert_eq!(client.platform(), "cpu");
    assert_eq!(client.device_type(), DeviceType::CPU);
    assert!(!client.devices().is_empty());
    for (i, d) in client.devices().iter().enumerate() {
        assert_eq!(d.device, Device::new(DeviceType::CPU, i as i32));
    }
}

#[test]
fn stablehlo_runs_on_an_imported_view_and_exports_without_a_copy() {
    let Some((_plugin, client)) = client("stablehlo") else {
        return;
    };
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let (t, address, released) = tensor(&x, &Spec::f32(&[2, 3]));
    let input = client.import(t, CopyPolicy::Never, None).expect("a view");
    // The view is the producer's memory: its export shows the same address.
    let back = input.to_dlpack(true).expect("export the view");
    assert_eq!(back.view().data() as usize, address);
    assert_eq!(back.view().to_vec::<f32>().unwrap(), x);
    let exe = client.compile_mlir(AFFINE).expect("compile");
    assert_eq!(exe.num_outputs(), 1);
    let out = exe.execute(&[&input]).expect("execute");
    assert_eq!(count(&released), 0, "released while viewed");
    let result = out[0].to_dlpack(true).expect("export the result");
    let ptr = result.view().data() as usize;
    assert_ne!(ptr, address, "the result is the plugin's memory");
    let got = result.view().to_vec::<f32>().unwrap();
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(got, want);
    // The result's export is the buffer itself: its pointer is the plugin's data pointer.
    let again = out[0].to_dlpack(false).expect("a legacy export");
    assert_eq!(again.view().data() as usize, ptr);
    drop((exe, input));
    assert_eq!(
        count(&released),
        0,
        "released while an export holds the view"
    );
    drop(back);
    assert_eq!(count(&released), 1);
    drop(out);
    assert_eq!(
        result.view().to_vec::<f32>().unwrap(),
        want,
        "the export holds the result"
    );
    drop((result, again));
    assert_eq!(count(&released), 1);
}

#[test]
fn the_view_is_released_once_when_its_last_holder_goes() {
    let Some((_plugin, client)) = client("release") else {
        return;
    };
    let (t, _, released) = tensor(&[1.0; 6], &Spec::f32(&[2, 3]));
    let b = client.import(t, CopyPolicy::IfNeeded, None).unwrap();
    let b2 = b.clone();
    drop(b);
    assert_eq!(count(&released), 0);
    let m = b2.to_dlpack(true).unwrap();
    drop(b2);
    assert_eq!(count(&released), 0, "the export holds the buffer");
    std::thread::spawn(move || drop(m)).join().unwrap();
    assert_eq!(count(&released), 1);
}

#[test]
fn column_major_is_copied_into_row_major() {
    let Some((_plugin, client)) = client("layout") else {
        return;
    };
    // [[0, 1, 2], [3, 4, 5]] stored column by column. XLA's CPU plugin would take a view of
    // it, but its programs read a view row-major: dlport copies it (the plugin honours byte
    // strides), and refuses under copy=Never.
    let mem = [0.0f32, 3.0, 1.0, 4.0, 2.0, 5.0];
    let mut spec = Spec::f32(&[2, 3]);
    spec.strides = Some(vec![1, 2]);
    let (t, _, released) = tensor(&mem, &spec);
    let e = client.import(t, CopyPolicy::Never, None).unwrap_err();
    assert!(
        matches!(copy_required(&e), Some(CopyReason::Layout { .. })),
        "{e}"
    );
    assert_eq!(count(&released), 1);
    let (t, address, released) = tensor(&mem, &spec);
    let b = client
        .import(t, CopyPolicy::IfNeeded, None)
        .expect("a copy");
    assert_eq!(count(&released), 1);
    assert_eq!(b.info().unwrap().strides, vec![3, 1]);
    assert_ne!(b.to_dlpack(true).unwrap().view().data() as usize, address);
    let out = client.compile_mlir(AFFINE).unwrap().execute(&[&b]).unwrap();
    let got = out[0]
        .to_dlpack(true)
        .unwrap()
        .view()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(got, vec![1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
}

fn copy_required(e: &Error) -> Option<CopyReason> {
    match e {
        Error::Dispatch(DispatchError::CopyRequired { reason }) => Some(*reason),
        _ => None,
    }
}

#[test]
fn what_pjrt_cannot_view_is_refused_or_copied() {
    let Some((_plugin, client)) = client("refusals") else {
        return;
    };
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mut read_only = Spec::f32(&[2, 3]);
    read_only.read_only = true;
    let mut strided = Spec::f32(&[2, 3]);
    strided.strides = Some(vec![6, 2]);
    let mut misaligned = Spec::f32(&[2, 3]);
    misaligned.offset = 4;
    let strided_mem: Vec<f32> = (0..12)
        .map(|k| if k % 2 == 0 { x[k / 2] } else { -1.0 })
        .collect();
    for (what, spec, mem) in [
        ("read-only", read_only, x.to_vec()),
        ("strided", strided, strided_mem),
        ("misaligned", misaligned, x.to_vec()),
    ] {
        let (t, address, released) = tensor(&mem, &spec);
        let e = client.import(t, CopyPolicy::Never, None).expect_err(what);
        match (what, copy_required(&e)) {
            ("read-only", Some(CopyReason::Writable))
            | ("strided", Some(CopyReason::Layout { .. }))
            | ("misaligned", Some(CopyReason::Alignment { .. })) => {}
            (_, reason) => panic!("{what}: {reason:?} {e}"),
        }
        assert_eq!(count(&released), 1, "{what}: released once on refusal");
        // Where a copy is allowed, the plugin copies during the call and the tensor goes.
        let (t, _, released) = tensor(&mem, &spec);
        let b = client.import(t, CopyPolicy::IfNeeded, None).expect(what);
        assert_eq!(
            count(&released),
            1,
            "{what}: released on return from a copy"
        );
        let m = b.to_dlpack(true).unwrap();
        assert_ne!(m.view().data() as usize, address, "{what}");
        assert_eq!(m.view().to_vec::<f32>().unwrap(), x, "{what}");
    }
    // A dtype PJRT lacks: refused by name, whatever the policy.
    let mut f6 = Spec::f32(&[8]);
    f6.dtype = DataType::FLOAT6_E2M3FN;
    let (t, _, released) = tensor(&[0.0; 2], &f6);
    let e = client.import(t, CopyPolicy::IfNeeded, None).unwrap_err();
    assert!(e.to_string().contains("dtype"), "{e}");
    assert_eq!(count(&released), 1);
    // Memory of a device the platform does not serve: never viewed, never copied.
    let mut cuda = Spec::f32(&[2, 3]);
    cuda.device = Device::cuda(0);
    let (t, _, released) = tensor(&x, &cuda);
    let e = client.import(t, CopyPolicy::Never, None).unwrap_err();
    assert!(
        matches!(copy_required(&e), Some(CopyReason::Device { .. })),
        "{e}"
    );
    assert_eq!(count(&released), 1);
    let (t, _, released) = tensor(&x, &cuda);
    let e = client.import(t, CopyPolicy::IfNeeded, None).unwrap_err();
    assert!(e.to_string().contains("host"), "{e}");
    assert_eq!(count(&released), 1);
    // A device id the client does not have.
    let (t, _, released) = tensor(&x, &Spec::f32(&[2, 3]));
    let e = client
        .import(t, CopyPolicy::IfNeeded, Some(99))
        .unwrap_err();
    assert!(e.to_string().contains("99"), "{e}");
    assert_eq!(count(&released), 1);
    // copy=Always copies viewable memory too.
    let (t, address, released) = tensor(&x, &Spec::f32(&[2, 3]));
    let b = client.import(t, CopyPolicy::Always, None).unwrap();
    assert_eq!(count(&released), 1);
    assert_ne!(b.to_dlpack(true).unwrap().view().data() as usize, address);
}

#[test]
fn a_plugin_serves_its_device_type_in_a_registry() {
    let Some((plugin, cpu)) = client("registry") else {
        return;
    };
    // The CPU platform is a backend that serves no type: host memory stays the CPU
    // backend's, whatever is registered after it.
    let host = PjrtBackend::new(cpu);
    assert!(host.device_types().is_empty());
    let mut registry = Registry::with_cpu();
    registry.register(host).unwrap();
    assert_eq!(registry.resolve(Device::cpu()).unwrap().name(), "cpu");
    assert_eq!(registry.get("pjrt:cpu").unwrap().name(), "pjrt:cpu");
    // The CPU plugin presented as an "xpu" (kDLOneAPI) device: its memory is host memory, so
    // the test can label host tensors kDLOneAPI as a oneAPI plugin's would be.
    let options = ClientOptions {
        device_type: Some(DeviceType::ONEAPI),
        ..ClientOptions::default()
    };
    let xpu = PjrtClient::create(&plugin, &options).unwrap();
    assert_eq!(xpu.devices()[1].device, Device::oneapi(1));
    let backend = PjrtBackend::new(xpu.clone());
    let mut registry = Registry::with_cpu();
    registry.register(backend).unwrap();
    // A registered client resolves by its device type.
    assert_eq!(
        registry.resolve(Device::oneapi(1)).unwrap().name(),
        "pjrt:cpu"
    );
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mut spec = Spec::f32(&[2, 3]);
    spec.device = Device::oneapi(1);
    let (t, address, released) = tensor(&x, &spec);
    let imported = registry.from_dlpack(t, &ImportOptions::default()).unwrap();
    assert_eq!(imported.backend(), "pjrt:cpu");
    assert_eq!(imported.device(), Device::oneapi(1));
    let out = registry
        .to_dlpack(&imported, &ExportOptions::default())
        .unwrap();
    assert_eq!(out.view().data() as usize, address);
    assert_eq!(out.view().device(), Device::oneapi(1));
    drop(imported);
    assert_eq!(count(&released), 0);
    drop(out);
    assert_eq!(count(&released), 1);
    // What the plugin cannot view is refused under copy=Never, naming the reason.
    spec.offset = 4;
    let (t, _, released) = tensor(&x, &spec);
    let never = ImportOptions {
        copy: CopyPolicy::Never,
        ..ImportOptions::default()
    };
    let e = registry.from_dlpack(t, &never).unwrap_err();
    assert!(
        matches!(copy_required(&e), Some(CopyReason::Alignment { .. })),
        "{e}"
    );
    assert_eq!(count(&released), 1);
}

#[test]
fn every_mapped_dtype_goes_in_and_out_with_its_bytes() {
    let Some((_plugin, client)) = client("dtypes") else {
        return;
    };
    let int4 = DataType::new(dlport_core::abi::TypeCode::INT, 4, 1);
    for dtype in [
        DataType::INT8,
        DataType::UINT16,
        DataType::INT32,
        DataType::INT64,
        DataType::FLOAT16,
        DataType::BFLOAT16,
        DataType::FLOAT64,
        DataType::COMPLEX64,
        DataType::BOOL,
        int4,
    ] {
        let mut spec = Spec::f32(&[8]);
        spec.dtype = dtype;
        let bytes = dtype.bytes_for(8, false).unwrap() as usize;
        // f32 words as raw bytes: 1.0 is 00 00 80 3f, so every byte is a valid bool (0 or 1)
        // only for bool's own pattern below.
        let words = if dtype == DataType::BOOL {
            vec![f32::from_ne_bytes([1, 0, 1, 0]); 4]
        } else {
            (0..16).map(|i| i as f32 + 0.5).collect::<Vec<_>>()
        };
        let (t, address, released) = tensor(&words, &spec);
        let want: Vec<u8> = words
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .take(bytes)
            .collect();
        let b = client
            .import(t, CopyPolicy::Never, None)
            .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        let m = b.to_dlpack(true).unwrap();
        let v = m.view();
        assert_eq!((v.dtype(), v.shape()), (dtype, &[8i64][..]), "{dtype}");
        assert_eq!(v.data() as usize, address, "{dtype}: a view");
        // SAFETY: the export's memory, `bytes` long (the builder checked its span).
        let got = unsafe { std::slice::from_raw_parts(v.data().cast::<u8>(), bytes) };
        assert_eq!(got, &want[..], "{dtype}");
        drop((m, b));
        assert_eq!(count(&released), 1, "{dtype}");
    }
}

#[test]
fn a_pjrt_copy_follows_the_registry_limit_and_alignment() {
    let Some((_plugin, client)) = client("registry-limit") else {
        return;
    };
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mut misaligned = Spec::f32(&[2, 3]);
    misaligned.offset = 4;
    // 24 bytes to copy, over a registry limit of 16: refused by the registry's rule, nothing
    // copied, the tensor released once.
    let mut registry = Registry::with_cpu();
    registry.set_alloc_limit(16);
    let (t, _, released) = tensor(&x, &misaligned);
    let e = client
        .import_with(&registry, t, &ImportOptions::default(), None)
        .unwrap_err();
    assert!(
        matches!(e, Error::Dispatch(DispatchError::AllocationLimit { .. })),
        "{e}"
    );
    assert_eq!(count(&released), 1);
    // The call's own limit too.
    let (t, _, released) = tensor(&x, &misaligned);
    let options = ImportOptions {
        max_alloc: Some(8),
        ..ImportOptions::default()
    };
    let e = client
        .import_with(&Registry::with_cpu(), t, &options, None)
        .unwrap_err();
    assert!(
        matches!(e, Error::Dispatch(DispatchError::AllocationLimit { .. })),
        "{e}"
    );
    assert_eq!(count(&released), 1);
    // The caller's alignment is the registry's rule: 64-byte-aligned memory asked for 128
    // bytes is copied (or refused under copy=Never with the address and the requirement).
    let spec = Spec::f32(&[2, 3]);
    let (t, address, _) = tensor(&x, &spec);
    let need = ImportOptions {
        copy: CopyPolicy::Never,
        requirements: Some(dlport_core::backend::ViewRequirements {
            layout: dlport_core::backend::LayoutNeed::Any,
            alignment: 128,
        }),
        ..ImportOptions::default()
    };
    match client.import_with(&Registry::with_cpu(), t, &need, None) {
        Ok(b) if address % 128 == 0 => assert_eq!(b.info().unwrap().shape, [2, 3]),
        Ok(_) => panic!("a view of memory at {address:#x} was asked 128-byte aligned"),
        Err(e) => assert!(
            matches!(
                copy_required(&e),
                Some(CopyReason::Alignment { required: 128, .. })
            ),
            "{e}"
        ),
    }
}

#[test]
fn a_pjrt_export_is_the_registry_export() {
    let Some((_plugin, client)) = client("registry-export") else {
        return;
    };
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let (t, address, released) = tensor(&x, &Spec::f32(&[2, 3]));
    let b = client.import(t, CopyPolicy::Never, None).unwrap();
    let registry = Registry::with_cpu();
    let cpu = dlport_core::Tensor::from_vec(x.to_vec(), &[2, 3]).unwrap();
    // The consumer's stream: the same answer as any CPU export's.
    for stream in [Some(-1), Some(0), Some(7), None] {
        let options = ExportOptions {
            stream,
            ..ExportOptions::default()
        };
        let pjrt = b.to_dlpack_with(&registry, &options).map(|_| ());
        let other = registry.to_dlpack(&cpu, &options).map(|_| ());
        assert_eq!(
            pjrt.map_err(|e| e.to_string()),
            other.map_err(|e| e.to_string()),
            "stream={stream:?}"
        );
    }
    // copy=Always: one copy, said so, under the registry's limit.
    let always = ExportOptions {
        copy: CopyPolicy::Always,
        max_version: Some(dlport_core::abi::DLPackVersion::CURRENT),
        ..ExportOptions::default()
    };
    let m = b.to_dlpack_with(&registry, &always).unwrap();
    assert_ne!(m.view().data() as usize, address);
    assert!(m.view().is_copied());
    assert_eq!(m.view().to_vec::<f32>().unwrap(), x);
    let mut limited = Registry::with_cpu();
    limited.set_alloc_limit(8);
    let e = b.to_dlpack_with(&limited, &always).unwrap_err();
    assert!(
        matches!(e, Error::Dispatch(DispatchError::AllocationLimit { .. })),
        "{e}"
    );
    // A device the buffer is not on, under copy=Never: the registry's refusal.
    let elsewhere = ExportOptions {
        dl_device: Some(Device::cuda(0)),
        copy: CopyPolicy::Never,
        ..ExportOptions::default()
    };
    let e = b.to_dlpack_with(&registry, &elsewhere).unwrap_err();
    assert!(
        matches!(copy_required(&e), Some(CopyReason::Device { .. })),
        "{e}"
    );
    drop((m, b));
    assert_eq!(count(&released), 1);
}

#[test]
fn a_client_registers_in_the_default_registry() {
    let Some((plugin, cpu)) = client("registry-default") else {
        return;
    };
    let options = ClientOptions {
        device_type: Some(DeviceType::ONEAPI),
        ..ClientOptions::default()
    };
    let xpu = PjrtClient::create(&plugin, &options).unwrap();
    let r = dlport_native::install_or_default();
    // Before registration no backend serves the type; after it, the PJRT host does.
    dlport_native::interop::pjrt::register_default(&cpu).unwrap();
    dlport_native::interop::pjrt::register_default(&xpu).unwrap();
    assert_eq!(
        r.resolve(Device::oneapi(0)).unwrap().name(),
        dlport_native::interop::pjrt::PJRT_HOST_NAME
    );
    assert_eq!(r.resolve(Device::cpu()).unwrap().name(), "cpu");
    let names: Vec<_> = dlport_native::interop::pjrt::registered()
        .iter()
        .map(|b| b.name())
        .collect();
    assert!(names.contains(&"pjrt:cpu"), "{names:?}");
    // A oneAPI-labelled tensor imports through the default registry as a PJRT view.
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mut spec = Spec::f32(&[2, 3]);
    spec.device = Device::oneapi(0);
    let (t, address, released) = tensor(&x, &spec);
    let imported = r.from_dlpack(t, &ImportOptions::default()).unwrap();
    assert_eq!(imported.backend(), "pjrt:cpu");
    let out = r.to_dlpack(&imported, &ExportOptions::default()).unwrap();
    assert_eq!(out.view().data() as usize, address);
    drop((imported, out));
    assert_eq!(count(&released), 1);
}
