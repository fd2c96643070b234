//! The main demo: export a Rust tensor through DLPack, import it back validated, and print it.
//!
//! `cargo run -p dlport-core --example roundtrip`

use dlport_core::layout::TensorInfo;
use dlport_core::{DataType, ExportBuilder, ManagedTensor};

fn main() -> Result<(), dlport_core::Error> {
    // A 2×3 float32 matrix, exported as a DLPack 1.3 DLManagedTensorVersioned.
    let data: Vec<f32> = vec![0.5, 1.5, 2.5, 3.5, 4.5, 5.5];
    let exported = ExportBuilder::from_vec(data, &[2, 3]).build()?;
    let raw = exported.into_raw();
    println!("exported a DLManagedTensorVersioned at {:#x}", raw.addr());

    // Any DLPack consumer could take `raw` now. We import it back: validated once, owned.
    // SAFETY: `raw` came from our own export and is handed over exactly once.
    let imported = unsafe { ManagedTensor::from_raw(raw) }?;
    let view = imported.view();
    println!("imported: {}", describe(&TensorInfo::from(&view)));
    for row in view.as_slice::<f32>()?.chunks(3) {
        println!("  {row:?}");
    }

    // The same memory seen column-major through strides, without a copy.
    let t = ExportBuilder::from_vec(vec![1i32, 4, 2, 5, 3, 6], &[2, 3])
        .strides(&[1, 2])
        .build()?;
    println!("strided:  {}", describe(&TensorInfo::from(&t.view())));
    println!("  row-major values: {:?}", t.view().to_vec::<i32>()?);

    // Bad input is an error that names the field, never a crash.
    let err = "float33x".parse::<DataType>().unwrap_err();
    println!("parsing \"float33x\": {err}");
    // Dropping `imported` runs the deleter exactly once, which frees the Vec.
    Ok(())
}

fn describe(info: &TensorInfo) -> String {
    format!(
        "{} {:?} strides {:?} on {} ({}), {} elements, span {:?}",
        info.dtype,
        info.shape,
        info.strides,
        info.device,
        info.contiguity,
        info.numel,
        (info.byte_span.lo, info.byte_span.hi)
    )
}
