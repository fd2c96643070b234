//! Device dispatch: resolution of every device type, host-accessible imports without copies,
//! device reconciliation, a run-time "xpu" plugin with its own device numbering, and the copy
//! policy matrix.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::backend::{LayoutNeed, ViewRequirements, platform_id};
use dlport_core::{AccessError, CopyPolicy, DispatchError, ExportOptions, ImportOptions, Registry};
use dlport_core::{
    CopyReason, DLPackVersion, DataType, Device, DeviceType, Error, ExportBuilder, ManagedTensor,
    TensorStorage,
};
use dlport_testkit::xpu::Xpu;

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
                        registered: dlport_core::BackendNames::default()
                    })
                    .code()
                );
                let text = err.to_string();
                let expected_name = DeviceType(n).to_string();
                assert!(
                    text.starts_with(&format!("no backend for {expected_name} device 0")),
                    "{text}"
                );
                assert!(text.ends_with("registered: cpu"), "{text}");
            }
        }
    }
    let err = registry
        .resolve(Device::new(DeviceType::ONEAPI, 0))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no backend for kDLOneAPI (14) device 0; registered: cpu"
    );
    let err = registry
        .resolve(Device::new(DeviceType(99), 2))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no backend for device_type(99) device 2; registered: cpu"
    );
    assert_eq!(Registry::default().names().collect::<Vec<_>>(), ["cpu"]);
    let empty = Registry::new();
    assert!(
        empty
            .resolve(Device::cpu())
            .unwrap_err()
            .to_string()
            .ends_with("registered: none")
    );
}

/// Host memory that claims a given device type (pinned or managed memory without a driver).
struct HostAs(Vec<f32>, Device);

// SAFETY: a Vec's buffer, stable and owned alone; the device label does not change the memory.
unsafe impl TensorStorage for HostAs {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len() * 4
    }
    fn device(&self) -> Device {
        self.1
    }
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
    let m = plugin_export(&counter, Device::cuda(0));
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
    let err = dlport_core::reconcile_device(Device::cuda(0), Some(Device::cuda(1))).unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::DeviceMismatch {
            capsule: Device::cuda(0),
            advertised: Device::cuda(1)
        })
    );
}

// ── the xpu plugin (dlport-testkit) ──

fn xpu_registry() -> (Registry, Arc<AtomicUsize>) {
    let xpu = Xpu::new();
    let freed = xpu.freed();
    let mut r = Registry::with_cpu();
    r.register(Arc::new(xpu)).unwrap();
    (r, freed)
}

/// A producer tensor on any device (host memory underneath), counting its deleter calls.
fn plugin_export(counter: &Arc<AtomicUsize>, device: Device) -> ManagedTensor {
    struct Counting(Vec<f32>, Device, Arc<AtomicUsize>);
    impl Drop for Counting {
        fn drop(&mut self) {
            self.2.fetch_add(1, Ordering::SeqCst);
        }
    }
    // SAFETY: a Vec's buffer, stable and owned alone.
    unsafe impl TensorStorage for Counting {
        fn data_ptr(&mut self) -> *mut c_void {
            self.0.as_mut_ptr().cast()
        }
        fn byte_len(&self) -> usize {
            self.0.len() * 4
        }
        fn device(&self) -> Device {
            self.1
        }
    }
    ExportBuilder::new(
        Counting(vec![1.0, 2.0, 3.0, 4.0], device, Arc::clone(counter)),
        DataType::FLOAT32,
        &[2, 2],
    )
    .build()
    .unwrap()
}

#[test]
fn xpu_plugin_registered_at_run_time() {
    let (registry, freed) = xpu_registry();
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
        plugin_export(&n, Device::new(DeviceType::ONEAPI, 7)),
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
    assert_eq!(guard.shape(), &[3]);
    // Device memory is never read as host memory.
    assert_eq!(
        guard.as_bytes().unwrap_err(),
        Error::Access(AccessError::NotHostAccessible {
            device: Device::new(DeviceType::ONEAPI, 10)
        })
    );
}

#[test]
fn release_ownership_makes_later_use_an_error() {
    let (registry, freed) = xpu_registry();
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
            .to_dlpack(&alias, &ExportOptions::default())
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

// ── copy policy ──

#[derive(Clone, Copy, Debug)]
enum Situation {
    Reachable,
    NotReachable,
    NonCompact,
}

fn make(situation: Situation, registry_freed: &Arc<AtomicUsize>) -> (ManagedTensor, ImportOptions) {
    match situation {
        Situation::Reachable => (
            ExportBuilder::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])
                .build()
                .unwrap(),
            ImportOptions::default(),
        ),
        Situation::NotReachable => (
            plugin_export(registry_freed, Device::new(DeviceType::ONEAPI, 0)),
            ImportOptions {
                device: Some(Device::cpu()),
                ..Default::default()
            },
        ),
        Situation::NonCompact => (
            // Column-major [[1, 2], [3, 4]].
            ExportBuilder::from_vec(vec![1.0f32, 3.0, 2.0, 4.0], &[2, 2])
                .strides(&[1, 2])
                .build()
                .unwrap(),
            ImportOptions {
                requirements: Some(ViewRequirements {
                    layout: LayoutNeed::RowMajor,
                    alignment: 1,
                }),
                ..Default::default()
            },
        ),
    }
}

#[test]
fn copy_policy_matrix() {
    let (registry, _) = xpu_registry();
    for situation in [
        Situation::Reachable,
        Situation::NotReachable,
        Situation::NonCompact,
    ] {
        for policy in [CopyPolicy::Never, CopyPolicy::IfNeeded, CopyPolicy::Always] {
            let released = Arc::new(AtomicUsize::new(0));
            let (m, mut opts) = make(situation, &released);
            opts.copy = policy;
            let source_address = m.view().data() as usize + m.view().byte_offset() as usize;
            let result = registry.from_dlpack(m, &opts);
            let label = format!("{situation:?} × {policy:?}");
            let needs_copy = !matches!(situation, Situation::Reachable);
            match (needs_copy, policy) {
                (true, CopyPolicy::Never) => {
                    let err = result.unwrap_err();
                    let (reason, text) = match situation {
                        Situation::NotReachable => (
                            CopyReason::Device {
                                from: Device::new(DeviceType::ONEAPI, 0),
                                to: Device::cpu(),
                            },
                            "the data is on oneapi:0, which cpu cannot reach",
                        ),
                        _ => (
                            CopyReason::Layout {
                                contiguity: dlport_core::Contiguity::ColumnMajor,
                            },
                            "the layout is column-major (F) contiguous, which the target cannot view",
                        ),
                    };
                    assert_eq!(
                        err,
                        Error::Dispatch(DispatchError::CopyRequired { reason }),
                        "{label}"
                    );
                    let msg = err.to_string();
                    assert!(
                        msg.starts_with("a copy would be needed, but the copy policy is Never"),
                        "{label}: {msg}"
                    );
                    assert!(msg.contains(text), "{label}: {msg}");
                }
                (false, CopyPolicy::Never | CopyPolicy::IfNeeded) => {
                    let t = result.unwrap();
                    assert!(!t.is_copied(), "{label}");
                    assert_eq!(
                        t.first_element_address(),
                        Some(source_address),
                        "{label}: zero-copy"
                    );
                    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0], "{label}");
                }
                _ => {
                    let t = result.unwrap();
                    assert!(t.is_copied(), "{label}: IS_COPIED");
                    assert_eq!(t.device(), Device::cpu(), "{label}");
                    assert_ne!(
                        t.first_element_address(),
                        Some(source_address),
                        "{label}: a real copy"
                    );
                    assert!(t.contiguity().is_row_major(), "{label}: copies are compact");
                    assert_eq!(
                        t.first_element_address().unwrap() % 64,
                        0,
                        "{label}: 64-byte aligned"
                    );
                    // Row-major values, whatever the source layout was.
                    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0], "{label}");
                    // The copy is exported with IS_COPIED.
                    let out = registry.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
                    assert!(out.is_copied(), "{label}");
                }
            }
            if matches!(situation, Situation::NotReachable) {
                assert_eq!(
                    released.load(Ordering::SeqCst),
                    1,
                    "{label}: the source is released once"
                );
            }
        }
    }
}

#[test]
fn alignment_requirement_copies_or_explains() {
    let registry = Registry::with_cpu();
    let jax_like = ViewRequirements {
        layout: LayoutNeed::Dense,
        alignment: 64,
    };
    let m = ExportBuilder::from_vec(vec![0u8; 130], &[128])
        .byte_offset(1)
        .build()
        .unwrap();
    let address = m.view().first_element_address().unwrap();
    let opts = ImportOptions {
        copy: CopyPolicy::Never,
        requirements: Some(jax_like),
        ..Default::default()
    };
    let err = registry.from_dlpack(m, &opts).unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::CopyRequired {
            reason: CopyReason::Alignment {
                address: address.into(),
                required: 64
            }
        })
    );
    assert!(err.to_string().contains("is not 64-byte aligned"));
}

#[test]
fn to_dlpack_follows_max_version_dl_device_and_copy() {
    let registry = Registry::with_cpu();
    let cpu = registry.resolve(Device::cpu()).unwrap().clone();
    let t = cpu
        .allocate(Device::cpu(), DataType::INT16, &[3, 2])
        .unwrap();
    let legacy = registry.to_dlpack(&t, &ExportOptions::default()).unwrap();
    assert!(!legacy.is_versioned(), "no max_version → legacy");
    let legacy0 = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                max_version: Some(DLPackVersion::new(0, 8)),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(!legacy0.is_versioned(), "max_version 0.x → legacy");
    let v = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                max_version: Some(DLPackVersion::new(1, 1)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(v.version(), Some(DLPackVersion::new(1, 3)));
    assert_eq!(
        v.view().data(),
        t.buffer().ptr(),
        "an external reference, not a copy"
    );
    let copied = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                copy: CopyPolicy::Always,
                max_version: Some(DLPackVersion::new(1, 3)),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(copied.is_copied());
    assert_ne!(copied.view().data(), t.buffer().ptr());
    let err = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                dl_device: Some(Device::cuda(0)),
                copy: CopyPolicy::Never,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::CopyRequired {
            reason: CopyReason::Device {
                from: Device::cpu(),
                to: Device::cuda(0)
            }
        })
    );
    assert_eq!(
        t.buffer().users(),
        3,
        "legacy, legacy0 and v hold references"
    );
    drop((legacy, legacy0, v));
    assert_eq!(t.buffer().users(), 0);
}

#[test]
fn pinned_memory_is_shown_to_a_cpu_only_consumer_without_a_copy() {
    let registry = Registry::with_cpu();
    let m = ExportBuilder::new(
        HostAs(vec![9.0; 4], Device::cuda_host()),
        DataType::FLOAT32,
        &[4],
    )
    .build()
    .unwrap();
    let t = registry.from_dlpack(m, &ImportOptions::default()).unwrap();
    let out = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                dl_device: Some(Device::cpu()),
                copy: CopyPolicy::Never,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(out.view().device(), Device::cpu());
    assert_eq!(out.view().data(), t.buffer().ptr());
}

#[test]
fn stream_argument_follows_the_dlpack_protocol() {
    use dlport_core::StreamRequest as S;
    let cuda = DeviceType::CUDA;
    assert_eq!(S::parse(None, cuda).unwrap(), S::LegacyDefault);
    assert_eq!(S::parse(Some(1), cuda).unwrap(), S::LegacyDefault);
    assert_eq!(S::parse(Some(2), cuda).unwrap(), S::PerThreadDefault);
    assert_eq!(
        S::parse(Some(0x7f00_1234), cuda).unwrap(),
        S::Stream(0x7f00_1234)
    );
    assert_eq!(S::parse(Some(-1), cuda).unwrap(), S::NoSync);
    let zero = S::parse(Some(0), cuda).unwrap_err();
    assert_eq!(
        zero.to_string(),
        "stream = 0 is invalid for kDLCUDA (2): 0 is ambiguous for CUDA; use 1 (legacy default) or 2 (per-thread)"
    );
    assert!(S::parse(Some(-7), cuda).is_err());
    assert_eq!(
        S::parse(Some(0), DeviceType::ROCM).unwrap(),
        S::LegacyDefault
    );
    assert!(S::parse(Some(1), DeviceType::ROCM).is_err());
    assert!(S::parse(Some(2), DeviceType::ROCM).is_err());
    assert_eq!(S::parse(None, DeviceType::CPU).unwrap(), S::NoSync);
    assert!(S::parse(Some(1), DeviceType::CPU).is_err());
    assert!(S::parse(Some(5), DeviceType::CUDA_HOST).is_err());
    assert_eq!(S::LegacyDefault.cuda_handle(), Some(1));
    assert_eq!(S::PerThreadDefault.cuda_handle(), Some(2));
    assert_eq!(S::NoSync.cuda_handle(), None);
}
