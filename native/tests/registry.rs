//! `dlport_native::registry()` holds exactly the backends that work here, and says why the
//! others are missing.

use dlport_core::abi::DeviceType;
use dlport_core::{CopyPolicy, Device, ExportBuilder, ImportOptions};

#[test]
fn registry_holds_the_backends_that_really_work() {
    let (registry, report) = dlport_native::registry_with_report();
    let names: Vec<_> = registry.names().collect();
    assert_eq!(&names[..2], ["cpu", "pinned"]);
    assert!(
        report.iter().any(|l| l.starts_with("cpu: registered")),
        "{report:?}"
    );
    let cuda_line = report.iter().find(|l| l.starts_with("cuda:")).unwrap();
    if names.contains(&"cuda") {
        assert!(cuda_line.starts_with("cuda: registered"), "{cuda_line}");
    } else {
        // No GPU here: the reason is spelled out.
        assert!(
            cuda_line.contains("no CUDA driver: libcuda.so.1 not found")
                || cuda_line.contains("built without the `cuda` feature")
                || cuda_line.contains("cuInit"),
            "{cuda_line}"
        );
        let err = registry.resolve(Device::cuda(0)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("no backend for kDLCUDA (2) device 0; registered: cpu, pinned"),
            "{err}"
        );
    }
}

#[test]
fn native_cpu_backend_compacts_with_the_fast_copy() {
    let registry = dlport_native::registry();
    // A transposed 64×48 float64 matrix, imported with a copy forced.
    let data: Vec<f64> = (0..64 * 48).map(f64::from).collect();
    let m = ExportBuilder::from_vec(data, &[64, 48])
        .strides(&[1, 64])
        .build()
        .unwrap();
    let opts = ImportOptions {
        copy: CopyPolicy::Always,
        ..Default::default()
    };
    let t = registry.from_dlpack(m, &opts).unwrap();
    assert!(t.is_copied() && t.contiguity().is_row_major());
    assert_eq!(t.buffer().ptr() as usize % 64, 0);
    let v = t.to_vec::<f64>().unwrap();
    for r in 0..64 {
        for c in 0..48 {
            assert_eq!(v[r * 48 + c], (c * 64 + r) as f64);
        }
    }
}

#[test]
fn managed_memory_is_viewed_by_the_cpu_backend() {
    struct Managed(Vec<f32>);
    // SAFETY: a Vec's stable buffer, owned alone; labelled as managed memory for this test.
    unsafe impl dlport_core::backend::TensorStorage for Managed {
        fn data_ptr(&mut self) -> *mut std::ffi::c_void {
            self.0.as_mut_ptr().cast()
        }
        fn byte_len(&self) -> usize {
            self.0.len() * 4
        }
        fn device(&self) -> Device {
            Device::new(DeviceType::CUDA_MANAGED, 0)
        }
    }
    let registry = dlport_native::registry();
    let m = ExportBuilder::new(Managed(vec![2.0; 8]), dlport_core::DataType::FLOAT32, &[8])
        .build()
        .unwrap();
    let addr = m.view().data();
    let opts = ImportOptions {
        device: Some(Device::cpu()),
        copy: CopyPolicy::Never,
        ..Default::default()
    };
    let t = registry.from_dlpack(m, &opts).unwrap();
    assert_eq!(t.buffer().ptr(), addr);
    assert_eq!(t.to_vec::<f32>().unwrap(), [2.0; 8]);
}
