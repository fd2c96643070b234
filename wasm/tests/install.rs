//! `dlport_wasm::install`: the process-wide default gets the CPU backend and WebGPU, so the
//! core's front door reaches WebGPU tensors. One test: the default is process-wide.
#![cfg(not(target_arch = "wasm32"))]

use dlport_core::backend::Backend;
use dlport_core::{
    DataType, Device, ExportOptions, ImportOptions, Registry, from_dlpack, to_dlpack,
};
use dlport_wasm::WebGpuBackend;

#[test]
fn install_puts_webgpu_behind_the_front_door() {
    let webgpu = WebGpuBackend::new_blocking().expect("a WebGPU adapter (mesa-vulkan-drivers)");
    let registry = dlport_wasm::install(webgpu.clone()).unwrap();
    assert_eq!(registry.names().collect::<Vec<_>>(), ["cpu", "webgpu"]);
    assert!(std::ptr::eq(registry, Registry::process_default()));

    // A WebGPU tensor goes out and comes back through the default: the same buffer handle.
    let t = webgpu
        .allocate(Device::webgpu(0), DataType::FLOAT32, &[2, 8])
        .unwrap();
    let out = to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    let handle = out.view().data() as usize;
    let back = from_dlpack(out, &ImportOptions::default()).unwrap();
    assert_eq!(back.backend(), "webgpu");
    assert_eq!(back.device(), Device::webgpu(0));
    assert_eq!(back.view().unwrap().tensor_ref().data() as usize, handle);
    assert!(!back.is_copied());

    // A second install is refused, naming what is in force.
    let err = dlport_wasm::install(webgpu).unwrap_err();
    assert_eq!(err.code(), 40);
    assert!(err.to_string().contains("backends: cpu, webgpu"), "{err}");
    assert!(Registry::get_default().is_some());
}
