//! Device dispatch, continued: the copy policy matrix, alignment requirements, `to_dlpack`'s
//! arguments, pinned memory shown to CPU-only consumers, and the stream argument.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::{DLPackVersion, DeviceType};
use dlport_core::backend::{LayoutNeed, ViewRequirements};
use dlport_core::error::{CopyReason, DispatchError};
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions,
    ManagedTensor, Registry,
};

use dlport_testkit::storage::HostAs;

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
            dlport_testkit::xpu::counted_export(registry_freed, Device::new(DeviceType::ONEAPI, 0)),
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
    let (registry, _) = dlport_testkit::xpu::registry();
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
                                contiguity: dlport_core::layout::Contiguity::ColumnMajor,
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
    let legacy = registry.to_dlpack(&t, &ExportOptions::legacy()).unwrap();
    assert!(!legacy.is_versioned(), "no max_version → legacy");
    let legacy0 = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                max_version: Some(DLPackVersion::new(0, 8)),
                ..ExportOptions::legacy()
            },
        )
        .unwrap();
    assert!(!legacy0.is_versioned(), "max_version 0.x → legacy");
    let v = registry
        .to_dlpack(
            &t,
            &ExportOptions {
                max_version: Some(DLPackVersion::new(1, 1)),
                ..ExportOptions::legacy()
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
                ..ExportOptions::legacy()
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
                ..ExportOptions::legacy()
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
                ..ExportOptions::legacy()
            },
        )
        .unwrap();
    assert_eq!(out.view().device(), Device::cpu());
    assert_eq!(out.view().data(), t.buffer().ptr());
}

#[test]
fn stream_argument_follows_the_dlpack_protocol() {
    use dlport_core::backend::StreamRequest as S;
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

// ── host memory asked for as pinned ──

#[test]
fn host_memory_is_never_presented_as_pinned_memory_it_is_not_whatever_the_policy() {
    // A CPU-only registry: the CPU backend reaches kDLCUDAHost memory but makes none.
    let r = Registry::with_cpu();
    let plain = || {
        ExportBuilder::from_vec(vec![1.0f32, 2.0], &[2])
            .build()
            .unwrap()
    };
    let pinned = || {
        ExportBuilder::new(
            HostAs(vec![1.0, 2.0], Device::cuda_host()),
            DataType::FLOAT32,
            &[2],
        )
        .build()
        .unwrap()
    };
    let asked = |copy| ImportOptions {
        device: Some(Device::cuda_host()),
        copy,
        ..ImportOptions::default()
    };
    let to_pinned = CopyReason::Device {
        from: Device::cpu(),
        to: Device::cuda_host(),
    };
    // Plain host memory: a view would present cpu memory as pinned, so every policy needs a
    // copy into pinned memory, which no backend here makes.
    let d = r
        .decide(&plain().view(), &asked(CopyPolicy::IfNeeded))
        .unwrap();
    assert_eq!((d.copies, d.copy_reason), (true, Some(to_pinned)));
    assert_eq!(
        r.from_dlpack(plain(), &asked(CopyPolicy::Never))
            .unwrap_err(),
        Error::Dispatch(DispatchError::CopyRequired { reason: to_pinned })
    );
    for copy in [CopyPolicy::IfNeeded, CopyPolicy::Always] {
        let err = r.from_dlpack(plain(), &asked(copy)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Dispatch(DispatchError::NoBackend {
                    device_type: DeviceType::CUDA_HOST,
                    ..
                })
            ),
            "{copy:?}: {err}"
        );
    }
    // Memory that is pinned is presented as itself without a copy.
    for copy in [CopyPolicy::Never, CopyPolicy::IfNeeded] {
        let t = r.from_dlpack(pinned(), &asked(copy)).unwrap();
        assert_eq!((t.device(), t.is_copied()), (Device::cuda_host(), false));
    }
}
