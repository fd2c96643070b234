//! The guarantees, attacked through the Rust API, one class at a time: aliasing (also run under
//! Miri by the test command), flags a legacy form cannot carry, options honoured or refused,
//! allocation limits, one device per tensor, and errors that point at the culprit.

use std::sync::Arc;

use dlport_core::abi::{
    DeviceType, FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY, TypeCode,
};
use dlport_core::backend::{Access, LayoutNeed, ViewRequirements, compact_bytes};
use dlport_core::error::{AccessError, CopyReason, DispatchError, Flag, OptionRule};
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions,
    ManagedTensor, Registry,
};

fn imported(reg: &Registry, data: Vec<f32>, shape: &[i64]) -> dlport_core::Tensor {
    let src = ExportBuilder::from_vec(data, shape).build().unwrap();
    reg.from_dlpack(src, &ImportOptions::default()).unwrap()
}

// ── 1. aliasing ──

#[test]
fn two_no_copy_exports_of_one_tensor_never_both_hand_out_mut() {
    let reg = Registry::with_cpu();
    let t = imported(&reg, vec![1.0; 8], &[8]);
    let mut a = reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    let mut b = reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    assert_eq!(a.view().data(), b.view().data(), "both are views, no copy");
    for e in [&mut a, &mut b] {
        assert_eq!(e.access(), Access::Shared);
        assert!(!e.is_exclusive());
        assert_eq!(
            e.as_mut_slice::<f32>().unwrap_err(),
            Error::Access(AccessError::NotExclusive {
                access: Access::Shared
            })
        );
        // Reading stays possible.
        assert_eq!(e.as_slice::<f32>().unwrap(), &[1.0; 8]);
    }
    // The legacy form of a shared export is shared too.
    let legacy = reg
        .to_dlpack(
            &t,
            &ExportOptions {
                max_version: None,
                ..ExportOptions::versioned()
            },
        )
        .unwrap();
    assert_eq!(legacy.access(), Access::Shared);
}

#[test]
fn shared_exports_from_two_threads_are_read_only_to_rust() {
    // The TSan/Miri reproduction: two threads each take an export and try to write.
    let reg = Registry::with_cpu();
    let t = imported(&reg, vec![0.0; 64], &[64]);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let mut e = reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
            std::thread::spawn(move || {
                let refused = e.as_mut_slice::<f32>().is_err();
                let sum: f32 = e.as_slice::<f32>().unwrap().iter().sum();
                (refused, sum)
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), (true, 0.0));
    }
}

#[test]
fn exclusive_exports_are_writable_and_copies_are_exclusive() {
    // A Vec export is owned by the export alone.
    let mut e = ExportBuilder::from_vec(vec![0u8; 4], &[4]).build().unwrap();
    assert!(e.is_exclusive());
    e.as_mut_slice::<u8>().unwrap()[0] = 9;
    // A conversion keeps what the source had.
    let mut legacy = e.into_legacy(CopyPolicy::Never).unwrap();
    assert!(legacy.is_exclusive());
    legacy.as_mut_slice::<u8>().unwrap()[1] = 8;
    let mut back = legacy.into_versioned().unwrap();
    assert_eq!(back.as_mut_slice::<u8>().unwrap(), &[9, 8, 0, 0]);
    // A copy made for an export is the consumer's alone.
    let reg = Registry::with_cpu();
    let t = imported(&reg, vec![1.0; 4], &[4]);
    let mut c = reg
        .to_dlpack(
            &t,
            &ExportOptions {
                copy: CopyPolicy::Always,
                ..ExportOptions::versioned()
            },
        )
        .unwrap();
    assert!(c.is_exclusive());
    assert_ne!(c.flags() & FLAG_IS_COPIED, 0);
    c.as_mut_slice::<f32>().unwrap()[0] = 5.0;
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        [1.0; 4],
        "the original is untouched"
    );
}

#[test]
fn a_foreign_tensor_is_exclusive_only_with_is_copied() {
    let e = ExportBuilder::from_vec(vec![0u8; 4], &[4]).build().unwrap();
    // SAFETY: our own export, handed over once.
    let mut plain = unsafe { ManagedTensor::from_raw(e.into_raw()) }.unwrap();
    assert_eq!(plain.access(), Access::Shared);
    assert!(plain.as_mut_slice::<u8>().is_err());
    let e = ExportBuilder::from_vec(vec![0u8; 4], &[4])
        .copied(true)
        .build()
        .unwrap();
    // SAFETY: as above.
    let mut copied = unsafe { ManagedTensor::from_raw(e.into_raw()) }.unwrap();
    assert_eq!(copied.access(), Access::Exclusive);
    copied.as_mut_slice::<u8>().unwrap()[3] = 1;
    // A read-only tensor stays read-only even when the caller vouches for exclusivity.
    let mut ro = ExportBuilder::from_vec(vec![0u8; 4], &[4])
        .read_only(true)
        .build()
        .unwrap();
    // SAFETY: nobody else holds this fresh export.
    let vouched = unsafe { ro.assume_exclusive() };
    assert_eq!(vouched, Err(Error::Access(AccessError::ReadOnly)));
    assert_eq!(
        ro.as_mut_slice::<u8>().unwrap_err(),
        Error::Access(AccessError::ReadOnly)
    );
}

// ── 4. flags lost on the way out ──

#[test]
fn an_arc_export_never_becomes_writable_through_the_legacy_form() {
    let shared: Arc<[u16]> = Arc::from(vec![7u16; 8]);
    let borrowed: &[u16] = &shared; // a live `&[T]` into the Arc
    let e = ExportBuilder::new(Arc::clone(&shared), DataType::UINT16, &[8])
        .build()
        .unwrap();
    assert!(e.is_read_only());
    // Without a copy: refused, naming the flag.
    let e2 = ExportBuilder::new(Arc::clone(&shared), DataType::UINT16, &[8])
        .build()
        .unwrap();
    assert_eq!(
        e2.into_legacy(CopyPolicy::Never).unwrap_err(),
        Error::Access(AccessError::FlagNotRepresentable {
            flag: Flag::ReadOnly
        })
    );
    // With a copy allowed: a legacy copy, writable, that is not the Arc's memory.
    let mut legacy = e.into_legacy(CopyPolicy::IfNeeded).unwrap();
    assert!(!legacy.is_versioned());
    assert_ne!(
        legacy.view().data().cast::<u16>().cast_const(),
        borrowed.as_ptr()
    );
    legacy.as_mut_slice::<u16>().unwrap()[0] = 1;
    assert_eq!(borrowed, &[7u16; 8], "the Arc's elements never change");
    // The builder refuses a read-only legacy build too.
    assert_eq!(
        ExportBuilder::new(shared, DataType::UINT16, &[8])
            .build_legacy()
            .unwrap_err(),
        Error::Access(AccessError::FlagNotRepresentable {
            flag: Flag::ReadOnly
        })
    );
}

#[test]
fn padded_subbyte_tensors_reach_legacy_consumers_packed() {
    let padded = || {
        ExportBuilder::new(vec![1u8, 2, 3, 4], DataType::new(TypeCode::INT, 4, 1), &[4])
            .subbyte_padded(true)
            .build()
            .unwrap()
    };
    assert_eq!(
        padded().into_legacy(CopyPolicy::Never).unwrap_err(),
        Error::Access(AccessError::FlagNotRepresentable {
            flag: Flag::IsSubbyteTypePadded
        })
    );
    let legacy = padded().into_legacy(CopyPolicy::IfNeeded).unwrap();
    assert_eq!(legacy.view().as_bytes().unwrap(), &[0x21, 0x43]);
    assert_eq!(legacy.flags(), 0);
}

#[test]
fn the_registry_copies_read_only_tensors_for_legacy_consumers() {
    let reg = Registry::with_cpu();
    let src = ExportBuilder::from_vec(vec![1.0f32, 2.0], &[2])
        .read_only(true)
        .build()
        .unwrap();
    let t = reg.from_dlpack(src, &ImportOptions::default()).unwrap();
    let legacy = ExportOptions {
        max_version: None,
        ..ExportOptions::versioned()
    };
    let err = reg
        .to_dlpack(
            &t,
            &ExportOptions {
                copy: CopyPolicy::Never,
                ..legacy
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::CopyRequired {
            reason: CopyReason::Flag {
                flag: Flag::ReadOnly
            }
        })
    );
    let mut copy = reg.to_dlpack(&t, &legacy).unwrap();
    assert!(!copy.is_versioned());
    assert!(copy.is_exclusive());
    copy.as_mut_slice::<f32>().unwrap()[0] = 9.0;
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    // A versioned consumer gets the view, READ_ONLY kept.
    let view = reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    assert_ne!(view.flags() & FLAG_READ_ONLY, 0);
    assert_eq!(view.access(), Access::ReadOnly);
}

// ── 5. options honoured or refused ──

#[test]
fn alignment_is_honoured_by_copies() {
    let reg = Registry::with_cpu();
    for alignment in [1usize, 64, 128, 4096, 1 << 20] {
        // A transposed tensor needs a copy for RowMajor.
        let src = ExportBuilder::from_vec((0..12).map(|x| x as f32).collect(), &[3, 4])
            .strides(&[1, 3])
            .build()
            .unwrap();
        let opts = ImportOptions {
            requirements: Some(ViewRequirements {
                layout: LayoutNeed::RowMajor,
                alignment,
            }),
            ..ImportOptions::default()
        };
        let t = reg.from_dlpack(src, &opts).unwrap();
        let address = t.first_element_address().unwrap();
        assert_eq!(
            address % alignment,
            0,
            "alignment {alignment}: {address:#x}"
        );
        assert!(t.is_copied());
        let v = t.to_vec::<f32>().unwrap();
        assert_eq!(v[..4], [0.0, 3.0, 6.0, 9.0]);
    }
    for bad in [3usize, 0, 1 << 31] {
        let src = ExportBuilder::from_vec(vec![0f32; 4], &[4])
            .build()
            .unwrap();
        let opts = ImportOptions {
            requirements: Some(ViewRequirements {
                layout: LayoutNeed::Any,
                alignment: bad,
            }),
            ..ImportOptions::default()
        };
        let err = reg.from_dlpack(src, &opts).unwrap_err();
        assert_eq!(
            err,
            Error::Dispatch(DispatchError::InvalidOption {
                rule: OptionRule::Alignment,
                value: bad as u64,
            })
        );
        assert_eq!(
            err.to_string(),
            format!("alignment = {bad} is invalid: it must be a power of two from 1 to 2^30 bytes")
        );
    }
}

// ── 7. allocation limits ──

#[test]
fn a_broadcast_byte_cannot_allocate_past_the_limit() {
    let one = || {
        ExportBuilder::from_vec(vec![7u8], &[1 << 32])
            .strides(&[0])
            .build()
            .unwrap()
    };
    let mut reg = Registry::with_cpu();
    let always = ImportOptions {
        copy: CopyPolicy::Always,
        ..ImportOptions::default()
    };
    // Per call.
    let err = reg
        .from_dlpack(
            one(),
            &ImportOptions {
                max_alloc: Some(256 << 20),
                ..always
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::AllocationLimit {
            bytes: (1u128 << 32).into(),
            limit: 256 << 20
        })
    );
    let message = err.to_string();
    assert!(
        message.contains("4294967296 bytes") && message.contains("268435456"),
        "{message}"
    );
    // The registry's default.
    reg.set_alloc_limit(1 << 20);
    assert_eq!(
        reg.from_dlpack(one(), &always).unwrap_err(),
        Error::Dispatch(DispatchError::AllocationLimit {
            bytes: (1u128 << 32).into(),
            limit: 1 << 20
        })
    );
    // A call cannot raise it: the lowest of call, registry and process holds.
    assert_eq!(reg.alloc_limit(Some(1 << 40)), 1 << 20);
    let raised = ImportOptions {
        max_alloc: Some(1 << 40),
        ..always
    };
    let err = reg.from_dlpack(one(), &raised).unwrap_err();
    assert!(matches!(
        err,
        Error::Dispatch(DispatchError::AllocationLimit { limit: 1048576, .. })
    ));
    // Under the limit, the copy is made.
    let small = ExportBuilder::from_vec(vec![7u8], &[1000])
        .strides(&[0])
        .build()
        .unwrap();
    let t = reg.from_dlpack(small, &always).unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![7u8; 1000]);
    // Exports' copies too.
    let t = imported(&reg, vec![1.0; 4], &[4]);
    let err = reg
        .to_dlpack(
            &t,
            &ExportOptions {
                copy: CopyPolicy::Always,
                max_alloc: Some(15),
                ..ExportOptions::versioned()
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::AllocationLimit {
            bytes: 16u64.into(),
            limit: 15
        })
    );
}

#[test]
fn sizes_past_64_bits_are_reported_exactly() {
    // 2^60 float32 = 2^62 bytes: a real number, checked against the limit by the caller …
    let bytes = compact_bytes(DataType::FLOAT32, &[1 << 60]).unwrap();
    assert_eq!(bytes, 1 << 62);
    assert_eq!(
        dlport_core::backend::check_alloc(bytes as u128, Some(1 << 30)),
        Err(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: (1u128 << 62).into(),
            limit: 1 << 30
        }))
    );
    // … and 2^62 complex128 = 2^66 bytes, past 64 bits, is exact too.
    assert_eq!(
        compact_bytes(DataType::COMPLEX128, &[1 << 62]).map(|_| ()),
        Err(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: (1u128 << 66).into(),
            limit: isize::MAX as u64
        }))
    );
}

// ── 8. one device per tensor ──

#[test]
fn a_pinned_or_managed_import_is_that_device_everywhere() {
    let reg = Registry::with_cpu();
    for advertised in [
        Device::cuda_host(),
        Device::new(DeviceType::CUDA_MANAGED, 0),
    ] {
        let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
            .build()
            .unwrap();
        assert_eq!(src.view().device(), Device::cpu(), "the capsule says cpu");
        let t = reg
            .from_dlpack(
                src,
                &ImportOptions {
                    advertised: Some(advertised),
                    ..ImportOptions::default()
                },
            )
            .unwrap();
        assert_eq!(t.device(), advertised);
        assert_eq!(t.buffer().device(), advertised);
        assert_eq!(
            t.view().unwrap().tensor_ref().device(),
            advertised,
            "describe's view"
        );
        let out = reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
        assert_eq!(
            out.view().device(),
            advertised,
            "export ships what describe says"
        );
        // A CPU-only consumer asks for cpu and gets the same memory, relabelled.
        let host = reg
            .to_dlpack(
                &t,
                &ExportOptions {
                    dl_device: Some(Device::cpu()),
                    ..ExportOptions::versioned()
                },
            )
            .unwrap();
        assert_eq!(host.view().device(), Device::cpu());
        assert_eq!(host.view().data(), out.view().data());
    }
    // A contradiction is refused and the tensor released.
    let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
        .build()
        .unwrap();
    let cpu = dlport_core::backend::CpuBackend;
    let err = dlport_core::backend::Backend::view_external(&cpu, src, Device::cuda(0));
    assert!(err.is_err());
}

// ── 9. errors that point at the culprit, and copies that agree with import ──

#[test]
fn what_import_accepts_a_copy_handles() {
    let reg = Registry::with_cpu();
    let always = ImportOptions {
        copy: CopyPolicy::Always,
        ..ImportOptions::default()
    };
    // An empty tensor whose other extents overflow.
    let empty = ExportBuilder::from_vec(Vec::<f32>::new(), &[i64::MAX, i64::MAX, 0])
        .build()
        .unwrap();
    let t = reg.from_dlpack(empty, &always).unwrap();
    assert_eq!(t.shape(), &[i64::MAX, i64::MAX, 0]);
    assert_eq!(t.layout().numel, 0);
    let bytes =
        |t: &dlport_core::Tensor| t.view().unwrap().tensor_ref().as_bytes().unwrap().to_vec();
    // A padded int4 tensor and a transposed packed int4 tensor compact to packed bytes.
    let padded = ExportBuilder::new(
        vec![1u8, 2, 3, 4],
        DataType::new(TypeCode::INT, 4, 1),
        &[2, 2],
    )
    .subbyte_padded(true)
    .build()
    .unwrap();
    assert_ne!(padded.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED, 0);
    let t = reg.from_dlpack(padded, &always).unwrap();
    assert_eq!(bytes(&t), [0x21, 0x43]);
    assert_eq!(t.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED, 0);
    let transposed = ExportBuilder::new(
        vec![0x21u8, 0x43],
        DataType::new(TypeCode::INT, 4, 1),
        &[2, 2],
    )
    .strides(&[1, 2])
    .build()
    .unwrap();
    let t = reg.from_dlpack(transposed, &always).unwrap();
    assert_eq!(bytes(&t), [0x31, 0x42]);
}
