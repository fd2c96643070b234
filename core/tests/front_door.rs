//! The front door: `from_dlpack` / `to_dlpack` over the process-wide default registry.
//!
//! One test function, because the default is process-wide and installed once: the order of
//! the steps matters and tests in one binary run in parallel.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::DLPackVersion;
use dlport_core::backend::TensorStorage;
use dlport_core::{
    CopyPolicy, Device, ExportOptions, ImportOptions, ManagedTensor, Registry, Tensor, from_dlpack,
    to_dlpack,
};

/// Host memory that counts its frees.
struct Counted(Vec<f32>, Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: a Vec's buffer, stable, owned alone, `4 * len` bytes.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut std::ffi::c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len() * 4
    }
    fn device(&self) -> Device {
        Device::cpu()
    }
}

#[test]
fn the_default_registry_is_installed_once_and_serves_both_directions() {
    // Nothing installed yet: the first use installs core's default, from any thread, once.
    assert!(Registry::get_default().is_none());
    let seen: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Registry::process_default() as *const Registry as usize))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:x?}");
    let default = Registry::get_default().expect("installed by the first use");
    assert_eq!(default as *const Registry as usize, seen[0]);
    assert_eq!(default.names().collect::<Vec<_>>(), ["cpu"]);

    // A later install is refused, naming the default in force and what to do.
    let err = Registry::new()
        .install_default()
        .expect_err("a default is in place");
    assert_eq!(err.code(), 40);
    let text = err.to_string();
    assert!(
        text.contains("already installed (backends: cpu)") && text.contains("start of main"),
        "{text}"
    );
    assert_eq!(
        Registry::process_default() as *const Registry as usize,
        seen[0]
    );

    // Export a Rust vector through the front door: a counted reference, no copy.
    let t = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, 3.5, 4.5, 5.5], &[2, 3]).unwrap();
    let address = t.first_element_address().unwrap();
    let exported = to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    assert_eq!(exported.version(), Some(DLPackVersion::CURRENT));
    assert_eq!(exported.view().data() as usize, address);
    let raw = exported.into_raw();

    // Import it back: validated, the same memory, readable like an imported tensor.
    // SAFETY: `raw` is our own export, handed over once.
    let m = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    let back = from_dlpack(m, &ImportOptions::default()).unwrap();
    assert_eq!(back.first_element_address(), Some(address));
    assert!(!back.is_copied());
    assert_eq!(back.view().unwrap().tensor_ref().shape(), &[2, 3]);
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    );
    assert_eq!(
        back.view().unwrap().tensor_ref().as_slice::<f32>().unwrap()[4],
        4.5,
        "typed access through the view"
    );

    // A foreign producer's tensor: its deleter runs once, when the last handle is gone.
    let frees = Arc::new(AtomicUsize::new(0));
    let foreign = dlport_core::ExportBuilder::new(
        Counted(vec![1.0; 4], Arc::clone(&frees)),
        dlport_core::DataType::FLOAT32,
        &[4],
    )
    .build()
    .unwrap();
    let imported = from_dlpack(foreign, &ImportOptions::default()).unwrap();
    let again = to_dlpack(&imported, &ExportOptions::versioned()).unwrap();
    drop(imported);
    assert_eq!(
        frees.load(Ordering::SeqCst),
        0,
        "the re-export keeps it alive"
    );
    drop(again);
    assert_eq!(frees.load(Ordering::SeqCst), 1, "freed exactly once");

    // The copy policy travels through the front door too.
    let opts = ImportOptions {
        copy: CopyPolicy::Always,
        ..Default::default()
    };
    let m = dlport_core::ExportBuilder::from_vec(vec![7i32; 3], &[3])
        .build()
        .unwrap();
    let copied = from_dlpack(m, &opts).unwrap();
    assert!(copied.is_copied());
    assert_eq!(copied.to_vec::<i32>().unwrap(), [7, 7, 7]);
}
