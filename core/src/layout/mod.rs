//! Pure validation of tensor metadata: shapes, strides, spans and contiguity.
//!
//! Nothing here dereferences a pointer; every function takes plain values and slices, so it can
//! be fuzzed and tested directly. [`validate`] applies every DLPack rule to a [`RawFields`] and
//! returns a [`Layout`] summary, or the first [`Error`](crate::Error) found.

mod address;
mod fast;
mod rules;
mod summary;
mod validate;

#[cfg(feature = "alloc")]
pub(crate) use address::address_fits;
pub use address::{USER_ADDRESS_END, address_alignment, check_address};
#[cfg(feature = "alloc")]
pub(crate) use fast::compact_fast;
pub(crate) use fast::{metadata_fast, placement_fast};
pub use rules::{
    check_ndim, check_version, compact_row_major, contiguity, element_count, element_span,
};
pub use summary::{ByteSpan, Contiguity, Layout, MAX_NDIM, RawFields};
pub use validate::{validate, validate_metadata};
