//! # dlport-testkit
//!
//! What dlport's tests, examples and benches share, written once:
//! - [`xpu`]: a plugin backend for `kDLOneAPI` written the way the backend guide
//!   (`dlport_core::backend`) says, with its own device numbering and counted frees;
//! - the malformed-input table, driven through the Rust API by dlport-core's tests and through
//!   the C ABI by dlport-native's.
//!
//! Not published: it exists so that no test, example or bench carries its own copy.

pub mod xpu;
