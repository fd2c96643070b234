//! **Not API.** Helpers dlport's own fuzz targets, test kit, benches and tests reach into: the
//! validation rules as separate pure functions, which the public API applies together
//! ([`TensorRef::from_raw`](crate::TensorRef::from_raw),
//! [`layout::validate_metadata`](crate::layout::validate_metadata)).
//!
//! Nothing here is covered by semantic versioning: any item may change or disappear in any
//! release, a patch release included. Hidden from the documentation; do not depend on it.

pub use crate::layout::address::{USER_ADDRESS_END, address_alignment, check_address};
pub use crate::layout::rules::{check_version, contiguity, element_count, element_span};
pub use crate::layout::summary::RawFields;
pub use crate::layout::validate::validate;
