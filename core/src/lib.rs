//! # dlport-core
//!
//! The portable core of dlport: the DLPack ABI (legacy and versioned 1.x), validation of
//! untrusted tensors, safe ownership, and export of Rust storage. `#![no_std]`; the `alloc`
//! feature (default) adds owners and export, `serde` adds a serialisable [`TensorInfo`].
//!
//! - [`abi`]: `#[repr(C)]` mirrors of `dlpack.h` 1.3, layouts asserted at compile time for 64-
//!   and 32-bit targets. Device types and type codes are open newtypes.
//! - [`dtype`]: [`DataType`] names (`"float32"`, `"float8_e4m3fn"`, `"float4_e2m1fn_x2"`), byte
//!   sizes with sub-byte packing, and the sealed [`Element`] trait.
//! - [`layout`]: pure validation over raw fields (checked arithmetic everywhere), contiguity and
//!   byte spans.
//! - [`TensorRef`]: a validated, borrowed view with safe typed access.
//! - [`ManagedTensor`]: the one owner of an imported tensor; the deleter runs exactly once.
//! - [`ExportBuilder`]: `Vec<T>`, `Box<[T]>`, `Arc<[T]>` or a backend allocation become a
//!   DLPack tensor whose deleter drops them.
//!
//! ```
//! use dlport_core::{ExportBuilder, ManagedTensor};
//!
//! // Export: a Vec becomes a DLManagedTensorVersioned …
//! let raw = ExportBuilder::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).build()?.into_raw();
//! // … that any DLPack consumer can take. Import it back, validated:
//! let t = unsafe { ManagedTensor::from_raw(raw) }?;
//! assert_eq!(t.view().shape(), &[2, 3]);
//! assert_eq!(t.as_slice::<i32>()?, &[1, 2, 3, 4, 5, 6]);
//! // Dropping `t` calls the deleter, which frees the Vec.
//! # Ok::<(), dlport_core::Error>(())
//! ```
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod abi;
pub mod copy;
pub mod device;
pub mod dtype;
mod error;
#[cfg(feature = "alloc")]
mod export;
#[cfg(feature = "alloc")]
mod info;
pub mod layout;
mod managed;
mod tensor;

pub use abi::{DLPackVersion, DeviceType, TypeCode};
#[cfg(feature = "alloc")]
pub use device::{CopyPolicy, Registry, Tensor};
pub use device::{Device, MemoryClass};
pub use dtype::{Bool8, Complex32, Complex64, DataType, Element, Fp4Convention};
pub use error::{ByteCount, CopyReason, Error, ShortStr};
#[cfg(feature = "alloc")]
pub use export::{ExportBuilder, TensorStorage};
#[cfg(feature = "alloc")]
pub use info::TensorInfo;
pub use layout::{ByteSpan, Contiguity, Layout};
pub use managed::{Access, ManagedTensor, RawManaged};
pub use tensor::TensorRef;

/// The process-wide default allocation limit in bytes (`isize::MAX` unless
/// [`set_alloc_limit`] lowered it). Every allocation dlport makes for a copy is checked against
/// the limit in force (a per-call `max_alloc`, else the registry's, else this one) before
/// anything is allocated: a 1-byte tensor broadcast to `[2^40]` is refused with
/// [`Error::AllocationLimit`], not allocated.
pub fn alloc_limit() -> u64 {
    ALLOC_LIMIT.load(core::sync::atomic::Ordering::Relaxed) as u64
}

/// Sets the process-wide default allocation limit (clamped to `isize::MAX`).
pub fn set_alloc_limit(bytes: u64) {
    let clamped = usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize);
    ALLOC_LIMIT.store(clamped, core::sync::atomic::Ordering::Relaxed);
}

static ALLOC_LIMIT: core::sync::atomic::AtomicUsize =
    core::sync::atomic::AtomicUsize::new(isize::MAX as usize);

/// Checks `bytes` against `limit` (none: [`alloc_limit`]).
pub fn check_alloc(bytes: u128, limit: Option<u64>) -> Result<(), Error> {
    let limit = limit.unwrap_or_else(alloc_limit);
    if bytes > u128::from(limit) {
        return Err(Error::AllocationLimit {
            bytes: bytes.into(),
            limit,
        });
    }
    Ok(())
}

/// The crate README's Rust examples (`core/README.md`, packaged with the crate), compiled and
/// run as doc tests. The repository README's examples are doc tests of `dlport-bench`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
