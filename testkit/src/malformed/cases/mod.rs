//! The cases, by concern. Each file lists the rules first from the conformance suite, then
//! those first written for the C ABI's malformed-input catalogue; a case both had is listed once,
//! with both names.

pub(super) mod addresses;
pub(super) mod dtypes;
pub(super) mod shapes;
pub(super) mod versions;
