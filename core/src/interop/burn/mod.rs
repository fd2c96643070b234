//! burn's [`TensorData`](burn_std::TensorData) as DLPack tensors, both ways (feature `burn`).
//!
//! `TensorData` is what burn's tensors are made from (`Tensor::from_data`) and read into
//! (`Tensor::into_data`); `burn::tensor::TensorData` is this type, re-exported. Its bytes live
//! in burn's `Bytes`, which may be shared between handles and copies itself before a write.
//!
//! - **Export, no copy**: [`ExportBuilder::from_burn`](crate::ExportBuilder::from_burn) (or
//!   `ManagedTensor::try_from(data)`) moves the data into the export and points `data` at its
//!   bytes, compact row-major. Bytes the data owns alone make an exclusive export (the
//!   consumer may write); bytes shared with other handles (a clone of shared bytes, bytes made
//!   from a `bytes::Bytes`) make a READ_ONLY one, since burn expects them never to change.
//! - **Import, no copy where the layout allows**:
//!   [`ManagedTensor::into_burn`](crate::ManagedTensor::into_burn) hands a compact, aligned
//!   host tensor to burn as shared bytes that hold the DLPack tensor (its deleter runs when
//!   burn drops the last handle); burn reads the memory in place and copies it before it
//!   writes. Any other layout, and [`TensorRef::to_burn`](crate::TensorRef::to_burn), copy
//!   once into bytes burn owns.
//!
//! Rust version: burn 0.22 needs Rust 1.95 (its `cubecl-zspace` dependency declares it), newer
//! than dlport-core's 1.85, which holds without this feature.
//!
//! Element types: `f64`, `f32`, `f16`, `bf16`, `i64`, `i32`, `i16`, `i8`, `u64`, `u32`, `u16`,
//! `u8` and `bool` both ways; burn's `flex32` exports as `float32` (the same bits) and imports
//! as `f32`. A quantized `TensorData` and a `bool` stored as `u32` have no DLPack type and are
//! refused, naming the dtype.
//!
//! ```
//! use burn_std::{DType, TensorData};
//! use dlport_core::ManagedTensor;
//!
//! let data = TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
//! let t = ManagedTensor::try_from(data)?; // no copy; the data is the export's
//! assert_eq!(t.view().shape(), &[2, 3]);
//! let address = t.view().as_bytes()?.as_ptr();
//!
//! let back = t.into_burn()?; // no copy: burn reads the DLPack tensor's memory
//! assert_eq!(back.dtype(), DType::F32);
//! assert_eq!(back.as_slice::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! assert_eq!(back.as_bytes().as_ptr(), address);
//! # Ok::<(), dlport_core::Error>(())
//! ```

mod export;
mod import;

pub use export::BurnStorage;
