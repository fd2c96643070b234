//! Device dispatch: resolution of every device type, host-accessible imports without copies,
//! device reconciliation, a run-time "xpu" plugin with its own device numbering, and the copy
//! policy matrix.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::DeviceType;
use dlport_core::backend::platform_id;
use dlport_core::error::{AccessError, DispatchError};
use dlport_core::{DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions, Registry};
use dlport_testkit::storage::HostAs;

#[test]
fn every_device_type_resolves_to_the_expected_backend_or_error() {
    let registry = Registry::with_cpu();
    for n in (1..=21).chain([99]) {
        let device = Device::new(DeviceType(n), 0);
        let got = registry.resolve(device).map(|b| b.name());
        match n {
            // Plain host memory, and every host-accessible class: the CPU backend reads them.
            1 | 3 | 11 | 13 | 20 => assert_eq!(got.unwrap(), "cpu", "device type {n}"),
            _ => {
                let err = got.unwrap_err();
                assert_eq!(
                    err.code(),
                    Error::Dispatch(DispatchError::NoBackend {
                        device_type: DeviceType(0),
                        device_id: 0,
                        registered: dlport_core::error::BackendNames::default()
                    })
                    .code()
                );
                let text = err.to_string();
                let expected_name = DeviceType(n).to_string();
                assert!(
                    text.starts_with(&format!("no backend for {expected_name} device 0")),
                    "{text}"
                );
                assert!(
                    text.contains("; registered: cpu (register a backend"),
                    "{text}"
                );
            }
        }
    }
    let err = registry
        .resolve(Device::new(DeviceType::ONEAPI, 0))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no backend for kDLOneAPI (14) device 0; registered: cpu (register a backend that \
         serves it, or ask for a device one of these serves)"
    );
    let err = registry
        .resolve(Device::new(DeviceType(99), 2))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no backend for device_type(99) device 2; registered: cpu (register a backend that \
         serves it, or ask for a device one of these serves)"
    );
    assert_eq!(Registry::default().names().collect::<Vec<_>>(), ["cpu"]);
    let empty = Registry::new();
    assert!(
        empty
            .resolve(Device::cpu())
            .unwrap_err()
            .to_string()
            .contains("; registered: none (register a backend")
    );
}

#[test]
fn host_accessible_imports_share_the_address() {
    let registry = Registry::with_cpu();
    for device in [
        Device::cpu(),
        Device::cuda_host(),
        Device::new(DeviceType::ROCM_HOST, 0),
        Device::new(DeviceType::CUDA_MANAGED, 0),
        Device::new(DeviceType::TPU_HOST, 0),
    ] {
        let m = ExportBuilder::new(HostAs(vec![1.0, 2.0, 3.0], device), DataType::FLOAT32, &[3])
            .build()
            .unwrap();
        let address = m.view().first_element_address().unwrap();
        let t = registry.from_dlpack(m, &ImportOptions::default()).unwrap();
        assert_eq!(t.backend(), "cpu", "{device}");
        assert_eq!(t.device(), device, "the memory keeps its class");
        assert_eq!(
            t.first_element_address(),
            Some(address),
            "{device}: must be a view, not a copy"
        );
        assert!(!t.is_copied());
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    }
}

#[test]
fn pytorch_pinned_mismatch_means_pinned_host_memory() {
    // PyTorch: the capsule says kDLCPU, __dlpack_device__ says kDLCUDAHost.
    let registry = Registry::with_cpu();
    let m = ExportBuilder::from_vec(vec![5i32; 4], &[4])
        .build()
        .unwrap();
    let address = m.view().first_element_address().unwrap();
    let opts = ImportOptions {
        advertised: Some(Device::cuda_host()),
        ..Default::default()
    };
    let decision = registry.decide(&m.view(), &opts).unwrap();
    assert_eq!(decision.memory, Device::cuda_host());
    assert_eq!(decision.backend, "cpu");
    assert!(!decision.copies);
    let t = registry.from_dlpack(m, &opts).unwrap();
    assert_eq!(t.device(), Device::cuda_host());
    assert_eq!(t.first_element_address(), Some(address));
    // And JAX-style consumers that ask for the CPU get the same view.
    let m = ExportBuilder::from_vec(vec![5i32; 4], &[4])
        .build()
        .unwrap();
    let opts = ImportOptions {
        advertised: Some(Device::cuda_host()),
        device: Some(Device::cpu()),
        ..Default::default()
    };
    let t = registry.from_dlpack(m, &opts).unwrap();
    assert!(!t.is_copied());
}

#[test]
fn a_true_contradiction_is_an_error_naming_both() {
    let registry = Registry::with_cpu();
    let counter = Arc::new(AtomicUsize::new(0));
    let m = dlport_testkit::xpu::counted_export(&counter, Device::cuda(0));
    let opts = ImportOptions {
        advertised: Some(Device::cpu()),
        ..Default::default()
    };
    let err = registry.from_dlpack(m, &opts).unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::DeviceMismatch {
            capsule: Device::cuda(0),
            advertised: Device::cpu()
        })
    );
    let text = err.to_string();
    assert!(
        text.contains("device = cuda:0") && text.contains("advertises cpu"),
        "{text}"
    );
    assert_eq!(
        counter.load(Ordering::SeqCst),
        1,
        "the refused tensor is released"
    );
    let err =
        dlport_core::backend::reconcile_device(Device::cuda(0), Some(Device::cuda(1))).unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::DeviceMismatch {
            capsule: Device::cuda(0),
            advertised: Device::cuda(1)
        })
    );
}

#[test]
fn xpu_plugin_registered_at_run_time() {
    let (registry, freed) = dlport_testkit::xpu::registry();
    assert_eq!(registry.names().collect::<Vec<_>>(), ["cpu", "xpu"]);
    let xpu = registry
        .resolve(Device::new(DeviceType::ONEAPI, 0))
        .unwrap();
    assert_eq!(xpu.name(), "xpu");
    assert_eq!(xpu.platform_id(), platform_id("xpu"));

    // The plugin allocates on its local device 10 (= producer/DLPack device 0).
    let t = xpu
        .allocate(
            Device::new(DeviceType::ONEAPI, 10),
            DataType::UINT8,
            &[2, 4],
        )
        .unwrap();
    let exported = registry.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    assert!(exported.is_versioned());
    assert_eq!(
        exported.view().device(),
        Device::new(DeviceType::ONEAPI, 0),
        "exported in DLPack numbering"
    );
    assert_eq!(
        t.buffer().users(),
        1,
        "the export holds a counted reference"
    );

    // Imported back through the registry: a view, renumbered into the plugin's ids.
    let imported = registry
        .from_dlpack(exported, &ImportOptions::default())
        .unwrap();
    assert_eq!(imported.backend(), "xpu");
    assert_eq!(imported.device(), Device::new(DeviceType::ONEAPI, 10));
    assert_eq!(imported.buffer().ptr(), t.buffer().ptr(), "zero-copy");

    // Freed exactly once, only after both sides dropped.
    drop(t);
    assert_eq!(
        freed.load(Ordering::SeqCst),
        0,
        "the importer still holds it"
    );
    drop(imported);
    assert_eq!(freed.load(Ordering::SeqCst), 1);

    // A producer id the plugin does not know is a clear error, and the tensor is released.
    let n = Arc::new(AtomicUsize::new(0));
    let err = registry.from_dlpack(
        dlport_testkit::xpu::counted_export(&n, Device::new(DeviceType::ONEAPI, 7)),
        &ImportOptions::default(),
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "backend \"xpu\" has no device for producer device_id = 7"
    );
    assert_eq!(n.load(Ordering::SeqCst), 1);

    // Unregistered at run time: resolution fails again, existing tensors stay valid.
    let mut registry = registry;
    let t = registry
        .resolve(Device::new(DeviceType::ONEAPI, 0))
        .unwrap()
        .allocate(Device::new(DeviceType::ONEAPI, 10), DataType::UINT8, &[3]);
    let t = t.unwrap();
    assert!(registry.unregister("xpu").is_some());
    assert!(
        registry
            .resolve(Device::new(DeviceType::ONEAPI, 0))
            .is_err()
    );
    let guard = t.view().unwrap();
    assert_eq!(guard.tensor_ref().shape(), &[3]);
    // Device memory is never read as host memory.
    assert_eq!(
        guard.tensor_ref().as_bytes().unwrap_err(),
        Error::Access(AccessError::NotHostAccessible {
            device: Device::new(DeviceType::ONEAPI, 10)
        })
    );
}

#[test]
fn release_ownership_makes_later_use_an_error() {
    let (registry, freed) = dlport_testkit::xpu::registry();
    let xpu = registry.get("xpu").unwrap().clone();
    let t = xpu
        .allocate(Device::new(DeviceType::ONEAPI, 11), DataType::FLOAT32, &[4])
        .unwrap();
    let alias = t.clone();

    // Not while an external reference exists.
    let external = xpu.acquire_external(&t, true, t.device()).unwrap();
    assert_eq!(
        xpu.release_ownership(&t, true, t.device()).unwrap_err(),
        Error::Access(AccessError::BufferInUse { users: 1 })
    );
    drop(external);

    let released = xpu.release_ownership(&t, true, t.device()).unwrap();
    assert_eq!(released.view().device(), Device::new(DeviceType::ONEAPI, 1));
    // Every later use through the plugin's handles is an error, not a dangling access.
    assert_eq!(
        t.view().err(),
        Some(Error::Access(AccessError::BufferReleased))
    );
    assert_eq!(
        alias.view().err(),
        Some(Error::Access(AccessError::BufferReleased))
    );
    assert_eq!(
        xpu.acquire_external(&alias, true, alias.device())
            .unwrap_err(),
        Error::Access(AccessError::BufferReleased)
    );
    assert_eq!(
        registry
            .to_dlpack(&alias, &ExportOptions::legacy())
            .unwrap_err(),
        Error::Access(AccessError::BufferReleased)
    );
    assert_eq!(
        xpu.release_ownership(&t, true, t.device()).unwrap_err(),
        Error::Access(AccessError::BufferReleased)
    );
    assert!(
        Error::Access(AccessError::BufferReleased)
            .to_string()
            .contains("release_ownership")
    );

    // The consumer now owns the memory: freed once, when it drops it.
    assert_eq!(freed.load(Ordering::SeqCst), 0);
    drop((t, alias));
    assert_eq!(freed.load(Ordering::SeqCst), 0);
    drop(released);
    assert_eq!(freed.load(Ordering::SeqCst), 1);
}

/// Handles and uses share one count: the memory is freed exactly once, by whichever goes last,
/// on whichever thread, and a release succeeds only while no use exists, whatever the handles do.
#[test]
fn handles_and_uses_free_the_buffer_once_whoever_goes_last() {
    let (registry, freed) = dlport_testkit::xpu::registry();
    let xpu = registry.get("xpu").unwrap().clone();
    let device = Device::new(DeviceType::ONEAPI, 11);

    // Exports outlive every handle; the last export, dropped on another thread, frees it.
    let t = xpu.allocate(device, DataType::FLOAT32, &[4]).unwrap();
    let alias = t.clone();
    assert_eq!((t.buffer().handles(), t.buffer().users()), (2, 0));
    let first = xpu.acquire_external(&t, true, t.device()).unwrap();
    let second = xpu.acquire_external(&alias, false, t.device()).unwrap();
    {
        let view = t.view().unwrap();
        assert_eq!(view.tensor_ref().shape(), &[4]);
        assert_eq!((t.buffer().handles(), t.buffer().users()), (2, 3));
    }
    assert_eq!(t.buffer().users(), 2);
    drop((t, alias));
    assert_eq!(freed.load(Ordering::SeqCst), 0);
    drop(first);
    assert_eq!(freed.load(Ordering::SeqCst), 0);
    std::thread::spawn(move || drop(second)).join().unwrap();
    assert_eq!(freed.load(Ordering::SeqCst), 1);

    // Threads clone, view and export while the main thread releases: every use either works
    // or sees the release, never a freed buffer; the consumer frees the memory, once.
    let rounds = if cfg!(miri) { 8 } else { 2_000 };
    let t = xpu.allocate(device, DataType::FLOAT32, &[4]).unwrap();
    let progress = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (t, xpu, progress) = (t.clone(), xpu.clone(), progress.clone());
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    progress.fetch_add(1, Ordering::Relaxed);
                    let alias = t.clone();
                    let view = alias.view();
                    let export = xpu.acquire_external(&alias, true, alias.device());
                    match (view, export) {
                        (Ok(view), Ok(export)) => {
                            assert_eq!(view.tensor_ref().shape(), export.view().shape());
                        }
                        (Err(e), _) | (_, Err(e)) => {
                            assert_eq!(e, Error::Access(AccessError::BufferReleased));
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    // Release once the workers are under way (a third of their rounds).
    while progress.load(Ordering::Relaxed) < rounds {
        std::thread::yield_now();
    }
    let mut refused = 0;
    let released = loop {
        match xpu.release_ownership(&t, true, t.device()) {
            Ok(released) => break released,
            Err(Error::Access(AccessError::BufferInUse { users })) => {
                assert!(users >= 1);
                refused += 1;
            }
            Err(e) => panic!("unexpected {e}"),
        }
        std::thread::yield_now();
    };
    for w in workers {
        w.join().unwrap();
    }
    println!("released after {refused} refusals while in use");
    assert!(t.buffer().is_released());
    assert_eq!(t.buffer().users(), 0);
    drop(t);
    assert_eq!(freed.load(Ordering::SeqCst), 1);
    drop(released);
    assert_eq!(freed.load(Ordering::SeqCst), 2);
}

/// With the 32-bit state word (`--cfg dlport_word32`, as on targets without 64-bit atomics; the
/// test command runs this), the limits are small enough to reach: leaking uses or handles past
/// them panics and leaves the count as it was, never carrying into the next field.
#[cfg(dlport_word32)]
#[test]
fn leaked_uses_and_handles_past_the_limit_panic_without_corrupting_the_count() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let t = dlport_core::Tensor::from_vec(vec![0u8; 4], &[4]).unwrap();
    let uses = 1 << 14;
    for _ in 0..uses {
        std::mem::forget(t.view().unwrap());
    }
    assert_eq!((t.buffer().users(), t.buffer().handles()), (uses, 1));
    assert!(catch_unwind(AssertUnwindSafe(|| t.view().map(drop))).is_err());
    assert_eq!((t.buffer().users(), t.buffer().handles()), (uses, 1));
    assert!(!t.buffer().is_released());

    let handles = 1 << 15;
    for _ in 1..handles {
        std::mem::forget(t.clone());
    }
    assert_eq!(t.buffer().handles(), handles);
    assert!(catch_unwind(AssertUnwindSafe(|| t.clone())).is_err());
    assert_eq!((t.buffer().users(), t.buffer().handles()), (uses, handles));
    assert!(!t.buffer().is_released());
}
