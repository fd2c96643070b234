//! Export: owned storage becomes a DLPack managed tensor whose deleter drops it.
//!
//! One heap block holds the `DLManagedTensorVersioned` (or legacy `DLManagedTensor`) header,
//! the shape and strides arrays, and the storage itself; `manager_ctx` points at that block and
//! the deleter frees all of it at once. Every exported tensor is what
//! [`ManagedTensor::from_raw`] validates, by construction (debug builds re-validate it).

mod block;
mod builder;
mod reexport;
mod storage;
#[cfg(test)]
mod tests;

pub use builder::ExportBuilder;
pub use storage::TensorStorage;

pub(crate) use block::*;
pub(crate) use builder::*;
pub(crate) use reexport::*;
