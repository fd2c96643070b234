//! What the device registry decides for a CPU tensor, a pinned one (PyTorch-style, with the
//! capsule and `__dlpack_device__` disagreeing), an "xpu" plugin tensor and an unknown device.
//!
//! `cargo run -p dlport-core --example dispatch`

use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::{DataType, Device, Error, ExportBuilder, ImportOptions, Registry};
use dlport_testkit::xpu::Xpu;

fn main() -> Result<(), Error> {
    let mut registry = Registry::with_cpu();
    // The "xpu" plugin of dlport-testkit, written as the backend guide says.
    registry.register(Arc::new(Xpu::new()))?;
    println!(
        "registered backends: {:?} (the \"xpu\" plugin serves oneapi devices)",
        registry.names().collect::<Vec<_>>()
    );
    println!(
        "For each tensor: the device its DLPack capsule names, the one its producer advertised \
         (__dlpack_device__), where the registry finds the memory really is, the backend that \
         takes it, whether that is a copy, and the device of the imported tensor as that \
         backend numbers its devices.\n"
    );

    let cpu = ExportBuilder::from_vec(vec![1.0f32; 4], &[4]).build()?;
    report(&registry, "a CPU tensor", cpu, ImportOptions::default());

    let pinned = ExportBuilder::from_vec(vec![1.0f32; 4], &[4]).build()?;
    let opts = ImportOptions {
        advertised: Some(Device::cuda_host()),
        ..Default::default()
    };
    report(
        &registry,
        "a pinned tensor as PyTorch exports one",
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
        "a tensor of the xpu plugin",
        exported,
        ImportOptions::default(),
    );

    for (what, device) in [
        (
            "a device type DLPack does not name (99)",
            Device::new(DeviceType(99), 0),
        ),
        (
            "a Metal device (no backend registered)",
            Device::new(DeviceType::METAL, 0),
        ),
    ] {
        println!("{what}:");
        match registry.resolve(device) {
            Ok(b) => println!("  {device} is served by the backend {}\n", b.name()),
            Err(e) => println!("  refused: {e}\n"),
        }
    }
    Ok(())
}

fn report(registry: &Registry, what: &str, m: dlport_core::ManagedTensor, opts: ImportOptions) {
    let capsule = m.view().device();
    let advertised = opts.advertised.map_or_else(
        || "nothing advertised".to_owned(),
        |d| format!("advertised {d}"),
    );
    println!("{what}:");
    let decision = registry.decide(&m.view(), &opts);
    match (decision, registry.from_dlpack(m, &opts)) {
        (Ok(d), Ok(t)) => {
            println!(
                "  capsule {capsule}, {advertised} -> memory {}, backend {}, {}; result on {}",
                d.memory,
                d.backend,
                if d.copies {
                    "copied"
                } else {
                    "a zero-copy view"
                },
                t.device()
            );
            if d.memory != capsule {
                println!(
                    "  (the producer wrote {capsule} in the capsule, but its memory is {}: the \
                     more specific class it advertised wins, and the memory is still read in \
                     place)",
                    d.memory
                );
            }
            if t.device() != d.memory {
                println!(
                    "  (the {} backend numbers its devices its own way: the producer's {} is \
                     its {})",
                    d.backend,
                    d.memory,
                    t.device()
                );
            }
        }
        (_, Err(e)) | (Err(e), _) => println!("  refused: {e}"),
    }
    println!();
}
