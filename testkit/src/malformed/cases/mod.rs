//! The cases, by concern. Each file lists the rules first from the conformance suite, then
//! those first written for the C ABI's malformed-input catalogue (a case listed twice is listed
//! once, under every name), then those added when the two were merged.

// Address cases are written for 64-bit address spaces (where the tests run); 32-bit targets
// only compile the table.
#[cfg(target_pointer_width = "64")]
pub(super) mod addresses;
pub(super) mod devices;
pub(super) mod dtypes;
pub(super) mod shapes;
pub(super) mod versions;

/// The whole table, by concern.
pub fn table() -> Vec<(super::Case, super::Expect)> {
    let mut t = Vec::new();
    t.extend(shapes::cases());
    #[cfg(target_pointer_width = "64")]
    t.extend(addresses::cases());
    t.extend(dtypes::cases());
    t.extend(versions::cases());
    t.extend(devices::cases());
    t
}
