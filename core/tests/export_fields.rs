//! The fields DLPack leaves to the producer, as every export fills them (see
//! `dlport_core::export`): `manager_ctx` never NULL, `byte_offset` folded into `data` for host
//! memory, `shape` and `strides` never NULL (also 0-d), version 1.3. Real consumers read them:
//! Paddle 3.3 never releases a tensor whose `manager_ctx` is NULL and ignores `byte_offset`.

use std::ffi::c_void;

use dlport_core::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, RawManaged,
};
use dlport_core::backend::TensorStorage;
use dlport_core::{
    CopyPolicy, DataType, Device, ExportBuilder, ExportOptions, ImportOptions, ManagedTensor,
    Registry,
};

/// The header's `manager_ctx`, version and `dl_tensor`.
fn header(m: &ManagedTensor) -> (*mut c_void, Option<DLPackVersion>, DLTensor) {
    match m.as_raw() {
        // SAFETY: `m` owns this live header.
        RawManaged::Versioned(p) => unsafe {
            let h: &DLManagedTensorVersioned = p.as_ref();
            (h.manager_ctx, Some(h.version), h.dl_tensor)
        },
        // SAFETY: as above.
        RawManaged::Legacy(p) => unsafe {
            let h: &DLManagedTensor = p.as_ref();
            (h.manager_ctx, None, h.dl_tensor)
        },
    }
}

/// Every way core makes an export: the builder in both forms, conversions, and the registry's
/// shared export and copy in both forms.
fn exports(byte_offset: u64, shape: &[i64]) -> Vec<(&'static str, ManagedTensor)> {
    let n = shape.iter().product::<i64>() as usize;
    let build = || {
        ExportBuilder::from_vec(vec![1.0f32; n + 4], shape)
            .byte_offset(byte_offset)
            .build()
            .unwrap()
    };
    let reg = Registry::with_cpu();
    let t = reg.from_dlpack(build(), &ImportOptions::default()).unwrap();
    let legacy = ExportOptions {
        max_version: None,
        ..ExportOptions::legacy()
    };
    let copied = ExportOptions {
        copy: CopyPolicy::Always,
        ..ExportOptions::versioned()
    };
    vec![
        ("ExportBuilder::build", build()),
        (
            "ExportBuilder::build_legacy",
            ExportBuilder::from_vec(vec![1.0f32; n + 4], shape)
                .byte_offset(byte_offset)
                .build_legacy()
                .unwrap(),
        ),
        (
            "into_legacy",
            build().into_legacy(CopyPolicy::Never).unwrap(),
        ),
        (
            "to_dlpack (versioned)",
            reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap(),
        ),
        ("to_dlpack (legacy)", reg.to_dlpack(&t, &legacy).unwrap()),
        ("to_dlpack (copy)", reg.to_dlpack(&t, &copied).unwrap()),
    ]
}

#[test]
fn every_export_has_a_manager_ctx_explicit_arrays_and_no_host_byte_offset() {
    for (byte_offset, shape) in [(0u64, &[2i64, 3][..]), (8, &[2, 3]), (4, &[]), (0, &[])] {
        for (path, m) in exports(byte_offset, shape) {
            let (ctx, version, t) = header(&m);
            let what = format!("{path}, byte_offset {byte_offset}, shape {shape:?}");
            assert!(!ctx.is_null(), "{what}: manager_ctx is NULL");
            assert!(
                !t.shape.is_null() && !t.strides.is_null(),
                "{what}: NULL arrays"
            );
            assert_eq!(t.byte_offset, 0, "{what}: byte_offset not folded into data");
            if let Some(v) = version {
                assert_eq!(v, DLPackVersion::CURRENT, "{what}");
            }
            // The first element is where it was: data + byte_offset of the builder's storage.
            let view = m.view();
            assert_eq!(
                view.to_vec::<f32>().unwrap(),
                vec![1.0; view.numel() as usize],
                "{what}"
            );
        }
    }
}

/// Device memory: `data` is a handle, never moved; the offset stays in `byte_offset`.
#[test]
fn a_device_handle_keeps_its_byte_offset() {
    struct Handle;
    // SAFETY: the handle is never dereferenced.
    unsafe impl TensorStorage for Handle {
        fn data_ptr(&mut self) -> *mut c_void {
            std::ptr::without_provenance_mut(0x1000)
        }
        fn byte_len(&self) -> usize {
            64
        }
        fn device(&self) -> Device {
            Device::webgpu(0)
        }
    }
    let m = ExportBuilder::new(Handle, DataType::FLOAT32, &[4])
        .byte_offset(16)
        .build()
        .unwrap();
    let (ctx, _, t) = header(&m);
    assert!(!ctx.is_null());
    assert_eq!((t.data as usize, t.byte_offset), (0x1000, 16));
}
