//! What the device registry decides for a CPU tensor, a pinned one (PyTorch-style, with the
//! capsule and `__dlpack_device__` disagreeing), an "xpu" plugin tensor and an unknown device.
//!
//! `cargo run -p dlport-core --example dispatch`

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::device::{AlignedBuffer, Backend, Buffer, ImportOptions, Registry, Tensor};
use dlport_core::{DataType, Device, DeviceType, Error, ExportBuilder, TensorStorage};

/// A plugin for kDLOneAPI (Intel XPU), registered at run time, numbering devices from 10.
struct Xpu;

impl Backend for Xpu {
    fn name(&self) -> &'static str {
        "xpu"
    }
    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::ONEAPI]
    }
    fn can_access(&self, memory: Device) -> bool {
        memory.device_type == DeviceType::ONEAPI
    }
    fn translate_device_id(&self, producer_id: i32) -> Result<i32, Error> {
        Ok(producer_id + 10)
    }
    fn export_device_id(&self, local_id: i32) -> i32 {
        local_id - 10
    }
    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        let bytes = dlport_core::device::compact_bytes(dtype, shape)?;
        let mem = XpuMemory(AlignedBuffer::zeroed(bytes, 64)?, device);
        Tensor::new(Buffer::new(Box::new(mem)), "xpu", dtype, shape, None, 0, 0)
    }
}

/// Stand-in device memory (host memory labelled kDLOneAPI).
struct XpuMemory(AlignedBuffer, Device);

// SAFETY: the aligned allocation is stable and owned alone.
unsafe impl TensorStorage for XpuMemory {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len()
    }
    fn device(&self) -> Device {
        self.1
    }
}

fn main() -> Result<(), Error> {
    let mut registry = Registry::with_cpu();
    registry.register(Arc::new(Xpu))?;
    println!("registered: {:?}", registry.names().collect::<Vec<_>>());

    let cpu = ExportBuilder::from_vec(vec![1.0f32; 4], &[4]).build()?;
    report(&registry, "cpu tensor", cpu, ImportOptions::default());

    let pinned = ExportBuilder::from_vec(vec![1.0f32; 4], &[4]).build()?;
    let opts = ImportOptions {
        advertised: Some(Device::cuda_host()),
        ..Default::default()
    };
    report(
        &registry,
        "pinned (capsule cpu, advertised cuda_host:0)",
        pinned,
        opts,
    );

    let xpu = registry
        .resolve(Device::new(DeviceType::ONEAPI, 0))?
        .clone();
    let local = xpu.allocate(
        Device::new(DeviceType::ONEAPI, 10),
        DataType::BFLOAT16,
        &[2, 8],
    )?;
    let exported = xpu.acquire_external(&local, true, local.device())?;
    report(
        &registry,
        "xpu plugin tensor",
        exported,
        ImportOptions::default(),
    );

    match registry.resolve(Device::new(DeviceType(99), 0)) {
        Ok(b) => println!("{:<46} -> backend {}", "unknown device type 99", b.name()),
        Err(e) => println!("{:<46} -> error: {e}", "unknown device type 99"),
    }
    match registry.resolve(Device::new(DeviceType::METAL, 0)) {
        Ok(b) => println!("{:<46} -> backend {}", "metal:0", b.name()),
        Err(e) => println!("{:<46} -> error: {e}", "metal:0"),
    }
    Ok(())
}

fn report(registry: &Registry, what: &str, m: dlport_core::ManagedTensor, opts: ImportOptions) {
    let capsule = m.view().device();
    let decision = registry.decide(&m.view(), &opts);
    match (decision, registry.from_dlpack(m, &opts)) {
        (Ok(d), Ok(t)) => println!(
            "{what:<46} -> capsule {capsule}, memory {}, backend {}, {}; result on {}",
            d.memory,
            d.backend,
            if d.copies { "copied" } else { "zero-copy view" },
            t.device()
        ),
        (_, Err(e)) | (Err(e), _) => println!("{what:<46} -> error: {e}"),
    }
}
