//! Export: owned storage becomes a DLPack managed tensor whose deleter drops it.
//!
//! One heap block holds the `DLManagedTensorVersioned` (or legacy `DLManagedTensor`) header,
//! the shape and strides arrays, and the storage itself; `manager_ctx` points at that block and
//! the deleter frees all of it at once. Every exported tensor is what
//! [`ManagedTensor::from_raw`] validates, by construction (debug builds re-validate it).
//!
//! # The fields DLPack leaves open, as dlport fills them
//! Consumers read more than the spec requires, so every export (Rust, the C ABI, the Python
//! package, the wasm glue: all build their tensors here) fills them the way every tested peer
//! (NumPy, JAX, PyTorch, tvm-ffi, Paddle) reads them:
//! - `manager_ctx` is never NULL: it is the block (the C ABI's tracked exports point it at their
//!   own block). Paddle 3.3 never calls the deleter of a tensor whose `manager_ctx` is NULL.
//! - `byte_offset` is 0 for host-accessible memory: it is folded into `data`
//!   ([`host_address`]), as PyTorch, CuPy and TVM write their tensors. Paddle 3.3 ignores
//!   `byte_offset` and would read the wrong bytes. Device memory keeps `data` as the handle it
//!   is and carries the offset in `byte_offset` (OpenCL's `cl_mem`, WebGPU buffer ids).
//! - `shape` and `strides` are never NULL, also for a 0-d tensor (a pointer to no values): a
//!   consumer that asked for DLPack 1.2 or less, where a NULL shape is not allowed, reads the
//!   tensor as well as one that knows 1.3. Strides are always written out, compact or not.
//! - `version` is 1.3 whatever minor the consumer asked for (the array API lets a producer
//!   answer another minor; every 1.x consumer reads 1.3, whose layout is 1.0's), and `flags`
//!   carry READ_ONLY and IS_COPIED exactly as the tensor has them.
//! - The capsule names are DLPack's: `dltensor_versioned` / `dltensor`, renamed `used_*` by the
//!   consumer that takes the tensor.

mod block;
mod builder;
#[cfg(test)]
mod tests;

pub use block::host_address;
pub use builder::ExportBuilder;

pub(crate) use block::*;
pub(crate) use builder::*;
