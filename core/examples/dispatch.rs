//! What the device registry decides for a CPU tensor, a pinned one (PyTorch-style, with the
//! capsule and `__dlpack_device__` disagreeing), an "xpu" plugin tensor and an unknown device.
//!
//! `cargo run -p dlport-core --example dispatch`

use std::sync::Arc;

use dlport_core::{DataType, Device, DeviceType, Error, ExportBuilder};
use dlport_core::{ImportOptions, Registry};
use dlport_testkit::xpu::Xpu;

fn main() -> Result<(), Error> {
    let mut registry = Registry::with_cpu();
    // The "xpu" plugin of dlport-testkit, written as the backend guide says.
    registry.register(Arc::new(Xpu::new()))?;
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
