//! The pinned backend without a CUDA driver: `mlock`-ed memory exported as plain kDLCPU,
//! imported into the CPU backend without a copy, and clear errors when locking fails.

use std::sync::Mutex;

use dlport_core::abi::DeviceType;
use dlport_core::backend::Backend;
use dlport_core::error::{BackendError, CopyReason, DispatchError};
use dlport_core::{CopyPolicy, DataType, Device, Error, ExportOptions, ImportOptions};
use dlport_native::pinned::{LockedBuffer, PinnedBackend, lock_error};

/// Tests that lock memory run one at a time, so VmLck readings are theirs.
static LOCKING: Mutex<()> = Mutex::new(());

/// Locked memory of this process, in bytes (from /proc/self/status).
fn vm_locked() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmLck:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[test]
fn mlock_memory_is_locked_and_claims_only_cpu() {
    let _serial = LOCKING.lock().unwrap();
    let pinned = PinnedBackend::mlock();
    assert_eq!(
        pinned.device(),
        Device::cpu(),
        "without a driver the memory is plain host memory"
    );
    assert!(pinned.describe().contains("page-locked"));
    assert!(pinned.device_types().is_empty(), "it claims no device type");
    let before = vm_locked();
    let t = pinned.zeros(DataType::FLOAT32, &[256, 1024]).unwrap();
    let during = vm_locked();
    assert!(
        during >= before + 1024 * 1024,
        "VmLck went from {before} to {during}"
    );
    assert_eq!(t.device(), Device::cpu());
    assert_eq!(t.buffer().ptr() as usize % 4096, 0, "page-aligned");
    assert!(t.to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
    drop(t);
    assert!(vm_locked() <= during - 1024 * 1024, "unlocked on drop");
}

#[test]
fn pinned_tensor_exported_and_imported_into_cpu_without_a_copy() {
    let _serial = LOCKING.lock().unwrap();
    let registry = dlport_native::registry();
    let pinned = registry.get("pinned").unwrap().clone();
    let device = registry.resolve(Device::cuda_host()).map(|b| b.name());
    // Without a driver, cuda_host memory is still readable by the CPU backend.
    assert!(matches!(device, Ok("cpu") | Ok("pinned")));
    let t = pinned
        .allocate(pinned_device(&registry), DataType::INT32, &[1000])
        .unwrap();
    let exported = registry.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    let opts = ImportOptions {
        device: Some(Device::cpu()),
        copy: CopyPolicy::Never,
        ..Default::default()
    };
    let imported = registry.from_dlpack(exported, &opts).unwrap();
    assert_eq!(imported.backend(), "cpu");
    assert_eq!(
        imported.buffer().ptr(),
        t.buffer().ptr(),
        "same address: no copy"
    );
    assert!(!imported.is_copied());
    assert_eq!(
        t.buffer().users(),
        1,
        "the import keeps the pinned buffer alive"
    );
    drop(imported);
    assert_eq!(t.buffer().users(), 0);
}

fn pinned_device(registry: &dlport_core::Registry) -> Device {
    match registry.get("pinned").unwrap().device_types().first() {
        Some(&DeviceType::CUDA_HOST) => Device::cuda_host(),
        _ => Device::cpu(),
    }
}

#[test]
fn a_refused_lock_is_a_clear_error_and_frees_the_memory() {
    fn enomem(_: *const std::ffi::c_void, _: usize) -> Result<(), i32> {
        Err(libc::ENOMEM)
    }
    let pinned = PinnedBackend::with_locker(enomem);
    let err = pinned.zeros(DataType::UINT8, &[1 << 20]).unwrap_err();
    assert_eq!(err.code(), 32);
    let text = err.to_string();
    assert!(
        text.starts_with("backend \"pinned\": mlock failed with code 12: ENOMEM"),
        "{text}"
    );
    assert!(text.contains("ulimit -l"), "{text}");
    assert!(LockedBuffer::new(4096, enomem).is_err());
    assert!(lock_error(libc::EPERM).to_string().contains("CAP_IPC_LOCK"));
    // Zero bytes need no lock.
    assert!(!LockedBuffer::new(0, enomem).unwrap().is_locked());
}

#[test]
fn pinned_copies_compact_into_locked_memory() {
    let _serial = LOCKING.lock().unwrap();
    let pinned = PinnedBackend::mlock();
    let src = dlport_core::ExportBuilder::from_vec(vec![1u16, 2, 3, 4, 5, 6], &[2, 3])
        .strides(&[1, 2])
        .build()
        .unwrap();
    let t = pinned.copy(&src.view(), Device::cpu()).unwrap().unwrap();
    assert!(t.is_copied());
    assert_eq!(t.to_vec::<u16>().unwrap(), [1, 3, 5, 2, 4, 6]);
    assert!(matches!(
        pinned.copy(&src.view(), Device::cuda(0)),
        Ok(None)
    ));
    let err = pinned
        .allocate(Device::cuda(0), DataType::UINT8, &[1])
        .unwrap_err();
    assert!(matches!(
        err,
        Error::Backend(BackendError::Unsupported { .. })
    ));
}

#[test]
fn host_memory_asked_for_as_cuda_host_answers_one_way_for_every_policy() {
    // The native registry: without a CUDA driver no backend makes kDLCUDAHost memory, and plain
    // host memory is never presented as pinned, so every policy refuses; with one, every policy
    // but Never copies into pinned memory.
    let _serial = LOCKING.lock().unwrap();
    let registry = dlport_native::registry();
    let driver = registry.get("cuda").is_some();
    let plain = || {
        dlport_core::ExportBuilder::from_vec(vec![1.0f32, 2.0], &[2])
            .build()
            .unwrap()
    };
    let asked = |copy| ImportOptions {
        device: Some(Device::cuda_host()),
        copy,
        ..ImportOptions::default()
    };
    let err = registry
        .from_dlpack(plain(), &asked(CopyPolicy::Never))
        .unwrap_err();
    assert_eq!(
        err,
        Error::Dispatch(DispatchError::CopyRequired {
            reason: CopyReason::Device {
                from: Device::cpu(),
                to: Device::cuda_host(),
            },
        })
    );
    for copy in [CopyPolicy::IfNeeded, CopyPolicy::Always] {
        match registry.from_dlpack(plain(), &asked(copy)) {
            Ok(t) => {
                assert!(driver, "{copy:?}: a copy without a driver");
                assert_eq!((t.device(), t.is_copied()), (Device::cuda_host(), true));
                assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0]);
            }
            Err(e) => {
                assert!(!driver, "{copy:?}: {e}");
                assert!(
                    e.to_string().contains("needs the CUDA driver"),
                    "{copy:?}: {e}"
                );
            }
        }
    }
}
