//! # dlport-testkit
//!
//! What dlport's tests, examples and benches share, written once:
//! - [`xpu`]: a plugin backend for `kDLOneAPI` written the way the backend guide
//!   (`dlport_core::backend`) says, with its own device numbering and counted frees;
//! - [`malformed`]: the malformed-input table, one case per DLPack rule with its exact outcome,
//!   and a producer that builds each case as a heap managed tensor with a counting deleter;
//!   dlport-core's tests drive it through the Rust API, dlport-capi's through the C ABI;
//! - [`process`]: the test binary started again as a child, also under an emulator's runner;
//! - [`harness`]: the harness of test binaries for hardware a machine may lack (skips visibly);
//! - [`storage`]: storages of the tests' own (host memory labelled as another device);
//! - [`streams`]: a backend with streams that records every stream hand-off it is asked for;
//! - [`wait`]: a bounded wait for an event another thread may cause a moment later (a
//!   plugin's `destroy` when a neighbouring test held the last handle).
//!
//! Not published: it exists so that no test, example or bench carries its own copy.

pub mod harness;
pub mod malformed;
pub mod process;
pub mod storage;
pub mod streams;
pub mod wait;
pub mod xpu;
