//! PJRT buffers ↔ DLPack, both ways, behind the registry (feature `pjrt`): the DLPack side of
//! [`crate::pjrt`], whose room holds the PJRT C API itself (the table, the client, the
//! buffers, programs).
//!
//! - **Import**: [`PjrtClient::import_with`](crate::pjrt::PjrtClient::import_with) makes a
//!   PJRT buffer of a DLPack tensor as a registry decides for the client's [`PjrtBackend`]
//!   (`Registry::decide_on`: its one view rule, PJRT's part of it being the backend's
//!   `view_obstacle`; the copy policy; the allocation limit): a view
//!   (`PJRT_Client_CreateViewOfDeviceBuffer`, the tensor released once when the last holder
//!   is gone) or one copy of host memory (`PJRT_Client_BufferFromHostBuffer`).
//! - **Export**: [`PjrtBuffer::to_dlpack_with`](crate::pjrt::PjrtBuffer::to_dlpack_with) is
//!   the registry's `to_dlpack` of the buffer's memory as a dlport tensor (an external
//!   reference; a copy, another device and the consumer's stream as every export).
//! - **Registration**: `registry.register(PjrtBackend::new(client))` in a registry of your
//!   own; [`register_default`] in the process-wide default, through its [`PjrtHost`] (what C's
//!   `dlport_pjrt_load` and Python's `dlport.pjrt.load` do).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dlport_core::{CopyPolicy, ExportOptions, ImportOptions, Registry, Tensor};
//! use dlport_native::interop::pjrt::PjrtBackend;
//! use dlport_native::pjrt::{ClientOptions, PjrtClient, PjrtPlugin};
//!
//! let plugin = PjrtPlugin::load("/path/to/xla_cpu_pjrt.so")?;
//! let client = PjrtClient::create(&plugin, &ClientOptions::default())?;
//! let mut registry = Registry::with_cpu();
//! registry.set_alloc_limit(1 << 30); // PJRT copies too
//! registry.register(PjrtBackend::new(client.clone()))?;
//!
//! let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
//! let m = registry.to_dlpack(&t, &ExportOptions::default())?;
//! let options = ImportOptions { copy: CopyPolicy::IfNeeded, ..ImportOptions::default() };
//! let buffer = client.import_with(&registry, m, &options, None)?; // a view, or one copy
//! let back = buffer.to_dlpack_with(&registry, &ExportOptions::default())?;
//! assert_eq!(back.view().to_vec::<f32>()?, [1.0, 2.0, 3.0]);
//! # Ok(())
//! # }
//! ```

mod backend;
mod default;
mod export;
mod host;
mod import;

pub use backend::PjrtBackend;
pub use backend::VIEW_ALIGN;
pub use default::register_default;
pub use host::{PJRT_HOST_NAME, PjrtHost, registered};
