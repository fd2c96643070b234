//! The cases, by concern. Each file lists the rules first from the conformance suite, then
//! those first written for the C ABI's malformed-input catalogue (a case listed twice is listed
//! once, under every name), then those added when the two were merged.

pub(super) mod addresses;
pub(super) mod dtypes;
pub(super) mod shapes;
pub(super) mod versions;
