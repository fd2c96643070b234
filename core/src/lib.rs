#![doc = include_str!("../README.md")]
#![no_std]
// The README (the crate's front page) shows complete programs that compile when pasted into
// `main.rs`, so its examples keep their `fn main`.
#![allow(clippy::needless_doctest_main)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod abi;
#[cfg(feature = "alloc")]
pub mod backend;
#[cfg(feature = "alloc")]
mod copy;
mod device;
#[cfg(feature = "alloc")]
mod dispatch;
pub mod dtype;
mod error;
#[cfg(feature = "alloc")]
mod export;
#[cfg(feature = "alloc")]
mod front;
#[cfg(feature = "alloc")]
mod info;
#[cfg(feature = "alloc")]
pub mod interop;
pub mod layout;
mod managed;
mod tensor;

pub use abi::{DLPackVersion, DeviceType, TypeCode};
pub use device::{Device, DeviceField, MemoryClass, StreamRequest};
#[cfg(feature = "alloc")]
pub use dispatch::{
    CopyPolicy, Decision, ExportOptions, ImportOptions, MAX_ALIGNMENT, Registry, Tensor,
    TensorView, reconcile_device,
};
pub use dtype::{Bool8, Complex32, Complex64, DataType, Element, Fp4Convention};
pub use error::{
    AccessError, Address, AddressRange, BackendError, BackendReport, ByteCount, CopyReason,
    DispatchError, Driver, Error, Flag, LayoutError, NameKind, OptionRule, ShortStr, StaticReport,
    StreamReason, ValueRule,
};
#[cfg(feature = "alloc")]
pub use error::{BackendNames, ShownValue};
#[cfg(feature = "alloc")]
pub use export::{ExportBuilder, TensorStorage};
#[cfg(feature = "alloc")]
pub use front::{default_registry, from_dlpack, to_dlpack};
#[cfg(feature = "alloc")]
pub use info::TensorInfo;
pub use layout::{ByteSpan, Contiguity, Layout};
pub use managed::{Access, ManagedTensor, RawManaged};
pub use tensor::TensorRef;

/// The process-wide default allocation limit in bytes (`isize::MAX` unless
/// [`set_alloc_limit`] lowered it). Every allocation dlport makes for a copy is checked against
/// the limit in force (a per-call `max_alloc`, else the registry's, else this one) before
/// anything is allocated: a 1-byte tensor broadcast to `[2^40]` is refused with
/// [`DispatchError::AllocationLimit`], not allocated.
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
        return Err(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: bytes.into(),
            limit,
        }));
    }
    Ok(())
}
