//! PJRT plugins as DLPack devices: any plugin that speaks PJRT's C API (`pjrt_c_api.h`, API
//! 0.x) — XLA's CPU plugin, `jax-cuda12-pjrt`, `jax-rocm7-pjrt`, `jax-oneapi-pjrt`, … — gets
//! DLPack both ways with no code from its vendor (feature `pjrt`).
//!
//! One room per layer, as cudarc keeps them:
//! - `sys`: the ABI: the args structs dlport uses and the function table's slots, read only
//!   where the table's `struct_size` covers them;
//! - `result`: one typed method per PJRT function dlport calls (the one place a slot meets its
//!   args struct), gated on the table's `struct_size`, each call a `Result`: a `PJRT_Error`
//!   becomes an error that names the plugin, the function, its message and code;
//! - the safe layer: [`PjrtPlugin`] (load, check, initialize), [`PjrtClient`] (its devices as
//!   dlport devices), [`PjrtBuffer`] (what the plugin says of a buffer), [`PjrtExecutable`]
//!   (StableHLO compiled and run on buffers);
//! - the DLPack side, behind the registry, is the interop room [`crate::interop::pjrt`]:
//!   `PjrtClient::import` / `import_with` (a view or one copy, as a registry decides),
//!   `PjrtBuffer::to_dlpack` / `to_dlpack_with` (a registry's export), `PjrtBackend` (a client
//!   as a backend) and `register_default` (the bindings' registration);
//! - [`probe`]: what a plugin offers and what dlport does with it, found by calling it.
//!
//! The plugin is trusted code, but its answers are checked: a table too short for a function,
//! a NULL function, a NULL result where one is promised, a buffer smaller than its shape, a
//! layout DLPack cannot describe: each is an error naming the plugin and the function.

pub(crate) mod buffer;
pub(crate) mod client;
mod execute;
pub mod interpose;
mod probe;
pub(crate) mod result;
pub mod sys;
pub(crate) mod types;

pub use buffer::{BufferInfo, PjrtBuffer};
pub use client::{ClientOptions, OptionValue, PjrtClient, PjrtDevice, PjrtPlugin};
pub use execute::PjrtExecutable;
pub use probe::{ProbeLine, ProbeReport, probe};
pub use types::{device_type_for, device_type_of};

use sys::Slot;

/// The functions dlport uses beyond client creation, and what each one's absence disables.
pub const OPTIONAL: &[(Slot, &str)] = &[
    (sys::CLIENT_CREATE_VIEW, "import without a copy (views)"),
    (sys::CLIENT_BUFFER_FROM_HOST_BUFFER, "import by copy"),
    (sys::BUFFER_INCREASE_EXTERNAL_REF, "export"),
    (sys::BUFFER_DECREASE_EXTERNAL_REF, "export"),
    (sys::BUFFER_OPAQUE_POINTER, "export"),
    (sys::BUFFER_GET_MEMORY_LAYOUT, "export (the layout)"),
    (sys::BUFFER_ON_DEVICE_SIZE, "export (the size check)"),
    (sys::BUFFER_READY_EVENT, "export (readiness)"),
    (sys::CLIENT_COMPILE, "compilation"),
    (sys::LOADED_EXECUTABLE_EXECUTE, "execution"),
];
