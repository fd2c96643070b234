//! The rule of device ids (`dlport_core::device`) at every door of the Rust API, for every
//! device of the testkit's list (`device_ids.txt`): a capsule's device (the malformed-input
//! table runs it), the device an import asks for, the device a producer advertises, the
//! device an export asks for, and an export's own storage. Each refusal is the rule's own
//! error naming the field and the device, and a refused import releases the tensor once.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::DeviceType;
use dlport_core::backend::{DeviceField, TensorStorage, reconcile_device};
use dlport_core::error::DispatchError;
use dlport_core::{
    DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions, ManagedTensor, Registry,
};
use dlport_testkit::malformed::device_ids;

/// Host bytes whose drop is counted (the export's deleter drops them).
struct Counted(Vec<f32>, Arc<AtomicUsize>, Device);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the vector's buffer is stable and owned by the value.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len() * 4
    }
    fn device(&self) -> Device {
        self.2
    }
}

fn counted(device: Device) -> (Result<ManagedTensor, Error>, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    let m = ExportBuilder::new(
        Counted(vec![1.0; 4], drops.clone(), device),
        DataType::FLOAT32,
        &[4],
    )
    .build();
    (m, drops)
}

fn refusal(field: DeviceField, device: Device) -> Error {
    Error::Dispatch(DispatchError::InvalidDevice { field, device })
}

fn is_rule_error(e: &Error) -> bool {
    matches!(e, Error::Dispatch(DispatchError::InvalidDevice { .. }))
}

#[test]
fn every_door_applies_the_one_rule() {
    let reg = Registry::with_cpu();
    let list = device_ids();
    assert!(list.iter().filter(|(_, ok)| !ok).count() >= 8, "{list:?}");
    let mut failures = Vec::new();
    for &(device, accepted) in &list {
        // The device an import asks for.
        let (m, drops) = counted(Device::cpu());
        let opts = ImportOptions {
            device: Some(device),
            ..ImportOptions::default()
        };
        let got = reg.from_dlpack(m.unwrap(), &opts);
        check(
            &mut failures,
            "ImportOptions::device",
            device,
            accepted,
            DeviceField::Requested,
            got.as_ref().err(),
        );
        drop(got);
        if drops.load(Ordering::SeqCst) != 1 {
            failures.push(format!(
                "device = {device}: the import's tensor dropped {} times",
                drops.load(Ordering::SeqCst)
            ));
        }
        // The device a producer advertises, also through reconciliation itself.
        let (m, _) = counted(Device::cpu());
        let opts = ImportOptions {
            advertised: Some(device),
            ..ImportOptions::default()
        };
        let got = reg.from_dlpack(m.unwrap(), &opts);
        check(
            &mut failures,
            "ImportOptions::advertised",
            device,
            accepted,
            DeviceField::Advertised,
            got.as_ref().err(),
        );
        let got = reconcile_device(Device::cpu(), Some(device));
        check(
            &mut failures,
            "reconcile_device",
            device,
            accepted,
            DeviceField::Advertised,
            got.as_ref().err(),
        );
        // The device an export asks for, in both forms.
        let (m, _) = counted(Device::cpu());
        let t = reg
            .from_dlpack(m.unwrap(), &ImportOptions::default())
            .unwrap();
        for versioned in [true, false] {
            let opts = ExportOptions {
                dl_device: Some(device),
                max_version: versioned.then_some(dlport_core::abi::DLPackVersion::CURRENT),
                ..ExportOptions::legacy()
            };
            let got = reg.to_dlpack(&t, &opts);
            check(
                &mut failures,
                "ExportOptions::dl_device",
                device,
                accepted,
                DeviceField::DlDevice,
                got.as_ref().err(),
            );
        }
        // An export's own storage.
        let (m, drops) = counted(device);
        check(
            &mut failures,
            "TensorStorage::device",
            device,
            accepted,
            DeviceField::Tensor,
            m.as_ref().err(),
        );
        drop(m);
        if drops.load(Ordering::SeqCst) != 1 {
            failures.push(format!(
                "storage on {device}: dropped {} times",
                drops.load(Ordering::SeqCst)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An accepted device may still fail for another reason (no backend, a contradiction, a
/// copy), but never by the rule; a refused one fails by the rule, with exactly its error.
fn check(
    failures: &mut Vec<String>,
    door: &str,
    device: Device,
    accepted: bool,
    field: DeviceField,
    err: Option<&Error>,
) {
    match (accepted, err) {
        (true, Some(e)) if is_rule_error(e) => failures.push(format!(
            "{door}: {device} is valid but was refused by the rule: {e}"
        )),
        (false, Some(e)) if *e == refusal(field, device) => {}
        (false, got) => failures.push(format!(
            "{door}: {device} breaks the rule; expected {:?}, got {got:?}",
            refusal(field, device)
        )),
        _ => {}
    }
}

#[test]
fn the_cases_of_the_issue_are_refused_by_name() {
    let reg = Registry::with_cpu();
    let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
        .build()
        .unwrap();
    let t = reg.from_dlpack(src, &ImportOptions::default()).unwrap();
    for id in [-1, 5, i32::MAX] {
        let opts = ExportOptions {
            dl_device: Some(Device::new(DeviceType::CPU, id)),
            ..ExportOptions::versioned()
        };
        let e = reg.to_dlpack(&t, &opts).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("dl_device = (1, {id}) is invalid: ")),
            "{text}"
        );
        assert!(
            text.contains("or None for the tensor's own device"),
            "{text}"
        );
        assert_eq!(e.code(), 42);
    }
    let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
        .build()
        .unwrap();
    let opts = ImportOptions {
        device: Some(Device::new(DeviceType::CPU, -1)),
        ..ImportOptions::default()
    };
    let text = reg.from_dlpack(src, &opts).unwrap_err().to_string();
    assert_eq!(
        text,
        "device = (1, -1) is invalid: device ids are non-negative (-1 means \"no \
         synchronisation\" only as a stream, never a device); pass the device's ordinal, or \
         None for the data's own device"
    );
    // A producer advertising (1, 3): the rule's error, not a contradiction.
    let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
        .build()
        .unwrap();
    let opts = ImportOptions {
        advertised: Some(Device::new(DeviceType::CPU, 3)),
        ..ImportOptions::default()
    };
    let text = reg.from_dlpack(src, &opts).unwrap_err().to_string();
    assert_eq!(
        text,
        "__dlpack_device__() = (1, 3) is invalid: kDLCPU has one device, device_id 0; the \
         producer must write device_id 0"
    );
}
