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

// The rooms, each below the ones that use it (DESIGN.md draws the map).
pub mod abi;
mod access;
#[cfg(feature = "alloc")]
pub mod backend;
#[cfg(feature = "alloc")]
mod buffer;
#[cfg(feature = "alloc")]
mod copy;
mod device;
pub mod dtype;
mod error;
#[cfg(feature = "alloc")]
mod export;
#[cfg(feature = "alloc")]
pub mod interop;
pub mod layout;
mod limit;
mod managed;
#[cfg(feature = "alloc")]
mod options;
#[cfg(feature = "alloc")]
mod registry;
#[cfg(feature = "alloc")]
mod storage;
#[cfg(feature = "alloc")]
mod tensor;
#[cfg(feature = "alloc")]
mod tensor_info;
mod view;

pub use abi::{DLPackVersion, DeviceType, TypeCode};
pub use access::Access;
pub use device::{Device, DeviceField, MemoryClass, StreamRequest, reconcile_device};
pub use dtype::{Bool8, Complex32, Complex64, DataType, Element, Fp4Convention};
pub use error::{
    AccessError, Address, AddressRange, BackendError, BackendReport, ByteCount, CopyReason,
    DispatchError, Driver, Error, Flag, LayoutError, NameKind, OptionRule, ShortStr, StaticReport,
    StreamReason, ValueRule,
};
#[cfg(feature = "alloc")]
pub use error::{BackendNames, ShownValue};
#[cfg(feature = "alloc")]
pub use export::ExportBuilder;
pub use layout::{ByteSpan, Contiguity, Layout};
pub use limit::{alloc_limit, check_alloc, set_alloc_limit};
pub use managed::{ManagedTensor, RawManaged};
#[cfg(feature = "alloc")]
pub use options::{CopyPolicy, ExportOptions, ImportOptions, MAX_ALIGNMENT};
#[cfg(feature = "alloc")]
pub use registry::{Decision, Registry, default_registry, from_dlpack, to_dlpack};
#[cfg(feature = "alloc")]
pub use storage::TensorStorage;
#[cfg(feature = "alloc")]
pub use tensor::{Tensor, TensorView};
#[cfg(feature = "alloc")]
pub use tensor_info::TensorInfo;
pub use view::TensorRef;
