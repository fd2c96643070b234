//! # dlport-capi
//!
//! dlport's C ABI: the library `libdlport` (`libdlport.so.0`, `libdlport.a`), its header
//! `capi/include/dlport.h` (generated from this crate by cbindgen, `scripts/header.sh`), the
//! pkg-config package `dlport` and the CMake package `dlport` (`scripts/install-c.sh`). See
//! `capi/README.md` for C and C++ users.
//!
//! Every `dlport_*` entry is here, in three rooms:
//! - [`cabi`]: the names of the ABI (status and error codes, enums, DLPack's declarations for
//!   the header); no code;
//! - [`ffi`]: the entries on tensors, the library, Python capsules and C plugins, with the
//!   conventions every entry keeps (a status, the last error, `catch_unwind`);
//! - [`share`]: the entries that share tensors with another process;
//! - [`pjrt`]: the entries on PJRT plugins (load, devices, import, export);
//! - [`pjrt_probe`]: the PJRT capability probe (`dlport_pjrt_probe`).
//!
//! The work is dlport-native's Rust API (the default registry, [`dlport_native::plugin`],
//! [`dlport_native::share`]); this crate converts C arguments and results. The Rust items are
//! public for this crate's tests and the fuzz target, which call the entries from Rust: the
//! crate is not published, and its Rust API is no promise.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod cabi;
pub mod ffi;
pub mod pjrt;
pub mod pjrt_probe;
pub mod share;
