//! Makes a pinned tensor (CUDA-pinned with a driver, `mlock`-ed otherwise), exports it through
//! DLPack, imports it into the CPU backend without a copy, and prints both addresses.
//!
//! `cargo run -p dlport-native --example pinned_to_host [--features cuda]`

use dlport_core::{CopyPolicy, DataType, Device, ExportOptions, ImportOptions};
use dlport_native::pinned::PinnedBackend;

fn main() -> Result<(), dlport_core::Error> {
    let (registry, report) = dlport_native::registry_with_report();
    for line in &report {
        println!("{line}");
    }
    let pinned = PinnedBackend::new();
    println!("\npinned memory: {}", pinned.describe());
    let t = pinned.zeros(DataType::FLOAT32, &[4, 1024])?;
    println!(
        "pinned tensor: device {}, {} bytes at {:p}",
        t.device(),
        t.buffer().len(),
        t.buffer().ptr()
    );

    let exported = registry.to_dlpack(&t, &ExportOptions::versioned())?;
    println!(
        "exported:      DLPack {} tensor on {}",
        exported.version().unwrap(),
        exported.view().device()
    );

    // A consumer that only knows the CPU, and forbids copies.
    let opts = ImportOptions {
        device: Some(Device::cpu()),
        copy: CopyPolicy::Never,
        ..Default::default()
    };
    let imported = registry.from_dlpack(exported, &opts)?;
    println!(
        "imported:      backend {}, device {}, data at {:p}, copied: {}",
        imported.backend(),
        imported.device(),
        imported.buffer().ptr(),
        imported.is_copied()
    );
    assert_eq!(imported.buffer().ptr(), t.buffer().ptr());
    println!(
        "same address:  {}",
        imported.buffer().ptr() == t.buffer().ptr()
    );
    Ok(())
}
