//! The C ABI (`capi/include/dlport.h`).
//!
//! Every entry is `extern "C"` and runs behind `catch_unwind`: a panic becomes the status
//! `DLPORT_PANIC`, never an unwind across the boundary. Failures return a non-zero status (the
//! dlport error code, see `Error::code`) and leave a message for `dlport_last_error()` on the
//! calling thread. Managed-tensor arguments are `void*` plus a `versioned` flag (0 = legacy
//! `DLManagedTensor`, 1 = `DLManagedTensorVersioned`). Functions documented as *consuming*
//! take ownership of their input on every path, success or error.
//!
//! Every entry also works while its thread or the process shuts down (from an `atexit`
//! handler, a C++ static destructor or a pthread-key destructor, which glibc runs after the
//! thread's TLS destructors): the only thread-local, the last error, has no destructor, and the
//! other state is in statics (`Mutex`, `OnceLock`, atomics).
//!
//! The DLPack tensors handed to C are dlport's own header blocks wrapping the
//! real export, told from foreign tensors by identity (see `ExportBlock` and `dlport_release`).

mod args;
mod status;
mod tracker;

// The entries, in the order the header lists them: the library itself,
mod library;
// tensors across the boundary,
mod dlpack;
mod handle;
mod wrap;
// Python's capsules,
mod capsule;
// and C plugins.
mod plugin;

// For `share`, the other room of entries.
pub(crate) use args::{c_string, copy_arg, out_ptr, registry, take};
pub(crate) use status::{Failure, arg, entry};
pub(crate) use tracker::give;

pub use crate::cabi::{DLPORT_INVALID_ARGUMENT, DLPORT_OK, DLPORT_PANIC, DlportCopy, DlportLayout};
pub use args::DlportImportOptions;
pub use capsule::*;
pub use dlpack::*;
pub use handle::*;
pub use library::*;
pub use plugin::*;
pub use wrap::*;
