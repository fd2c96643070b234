//! [`candle_core`] tensors (CPU) as DLPack tensors, both ways (feature `candle`).
//!
//! - **Export, no copy**: [`ExportBuilder::from_candle`](crate::ExportBuilder::from_candle) (or
//!   `ManagedTensor::try_from(tensor)`) keeps the candle tensor alive in the export and points
//!   `data` at its storage, with its layout's offset and strides (broadcast ones included).
//!   The memory is shared: other candle handles of the same storage keep reading it (and a
//!   `Var` may write it), so the export is neither exclusive nor READ_ONLY unless the builder
//!   sets READ_ONLY.
//! - **Import, exactly one copy**: [`TensorRef::to_candle`](crate::TensorRef::to_candle) and
//!   [`ManagedTensor::to_candle`](crate::ManagedTensor::to_candle). A candle CPU tensor's
//!   storage is a `Vec` that candle owns, and candle offers no storage over foreign memory, so
//!   a DLPack tensor cannot become one without a copy: dlport copies the elements once,
//!   straight into the vector candle then owns (any layout, compacted on the way), and hands
//!   that vector to candle without copying it again.
//!
//! Rust version: candle-core 0.11 needs Rust 1.88 (its `zip` dependency declares it), newer
//! than dlport-core's 1.85, which holds without this feature.
//!
//! Element types: every candle `DType` (`u8`, `u32`, `i16`, `i32`, `i64`, `bf16`, `f16`, `f32`,
//! `f64`, `f8e4m3` as `float8_e4m3fn`, `f8e8m0` as `float8_e8m0fnu`, and the packed `f4`, `f6e2m3`,
//! `f6e3m2` as `float4_e2m1fn`, `float6_e2m3fn`, `float6_e3m2fn`, compact only).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use dlport_core::ManagedTensor;
//!
//! let x = Tensor::arange(0f32, 6., &Device::Cpu)?.reshape((2, 3))?.t()?; // strided
//! let t = ManagedTensor::try_from(x.clone())?; // no copy, x's storage kept alive
//! assert_eq!(t.view().shape(), &[3, 2]);
//! assert_eq!(t.view().raw_strides(), Some(&[1i64, 3][..]));
//!
//! let y = t.to_candle()?; // one copy, compact
//! assert_eq!(y.to_vec2::<f32>()?, x.to_vec2::<f32>()?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod export;
mod import;

pub use export::CandleStorage;
