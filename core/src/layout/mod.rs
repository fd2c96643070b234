//! A tensor's layout: what validation learns about it ([`Layout`], with its [`Contiguity`] and
//! [`ByteSpan`]), an owned description of everything but its data ([`TensorInfo`], with
//! `alloc`), and the rules as pure functions a caller with metadata of its own applies
//! ([`validate_metadata`], [`check_ndim`], [`compact_row_major`], [`compact_byte_count`]).
//!
//! Nothing here dereferences a pointer; every function takes plain values and slices, so it can
//! be fuzzed and tested directly. The whole rule book over a tensor's raw fields (the address
//! rule included) is what [`TensorRef::from_raw`](crate::TensorRef::from_raw) applies.

pub(crate) mod address;
mod fast;
#[cfg(feature = "alloc")]
mod info;
pub(crate) mod rules;
pub(crate) mod summary;
pub(crate) mod validate;

pub(crate) use address::address_alignment;
#[cfg(feature = "alloc")]
pub(crate) use address::{address_fits, check_address};
#[cfg(feature = "alloc")]
pub(crate) use fast::compact_fast;
pub(crate) use fast::{metadata_fast, placement_fast};
#[cfg(feature = "alloc")]
pub use info::TensorInfo;
pub(crate) use rules::check_version;
pub use rules::{check_ndim, compact_byte_count, compact_row_major};
pub(crate) use summary::RawFields;
pub use summary::{ByteSpan, Contiguity, Layout, MAX_NDIM};
pub(crate) use validate::validate;
pub use validate::validate_metadata;
