//! [`ndarray`] arrays as DLPack tensors, both ways (feature `ndarray`; `no_std` with `alloc`).
//!
//! - **Export**: an owned [`Array`](ndarray::Array) or an [`ArcArray`](ndarray::ArcArray)
//!   becomes a [`ManagedTensor`](crate::ManagedTensor) without a copy, with whatever strides
//!   it has (negative ones included: `data` points at the lowest element the array touches
//!   and `byte_offset` at its first element, folded into `data` as every dlport export is).
//!   The array moves into the export and is dropped by its deleter. An `Array` is exclusive
//!   (the consumer may write); a shared `ArcArray` is READ_ONLY, a unique one exclusive.
//!   [`ExportBuilder::from_ndarray`](crate::ExportBuilder::from_ndarray) gives the builder
//!   (to set READ_ONLY or build the legacy form), `ManagedTensor::try_from(array)` the tensor.
//! - **Import**: [`TensorRef::as_ndarray`](crate::TensorRef::as_ndarray) and
//!   [`ManagedTensor::as_ndarray`](crate::ManagedTensor::as_ndarray) give an
//!   [`ArrayViewD`](ndarray::ArrayViewD) of any layout DLPack can express: compact, strided,
//!   negative and zero (broadcast) strides. No copy.
//! - **Mutable import**: [`ManagedTensor::as_ndarray_mut`](crate::ManagedTensor::as_ndarray_mut)
//!   gives an [`ArrayViewMutD`](ndarray::ArrayViewMutD) only under dlport's aliasing model: the
//!   tensor is [`Access::Exclusive`](crate::backend::Access) (dlport's own export of owned
//!   storage, a producer's IS_COPIED, or `unsafe assume_exclusive`), not READ_ONLY, and no two
//!   indices reach the same element (zero strides and overlapping strides are refused).
//!
//! Elements are dlport's [`Element`](crate::dtype::Element) types, `half::f16` and `half::bf16`
//! included.
//!
//! ```
//! use dlport_core::ManagedTensor;
//! use ndarray::{Axis, array, s};
//!
//! // A reversed, transposed view of an owned array, exported without a copy.
//! let mut a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! a.invert_axis(Axis(1));
//! let t = ManagedTensor::try_from(a.reversed_axes())?;
//! assert_eq!(t.view().shape(), &[3, 2]);
//! assert_eq!(t.view().raw_strides(), Some(&[-1i64, 3][..]));
//!
//! // Imported back as a view of the same memory, strides and all.
//! let v = t.as_ndarray::<f32>()?;
//! assert_eq!(v, array![[3.0f32, 6.0], [2.0, 5.0], [1.0, 4.0]].into_dyn());
//! assert_eq!(v.slice(s![.., 1]).to_vec(), [6.0, 5.0, 4.0]);
//! # Ok::<(), dlport_core::Error>(())
//! ```

mod export;
mod import;

pub use export::{ArrayStorage, OwnedData};
