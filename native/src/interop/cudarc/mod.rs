//! [`cudarc`] `CudaSlice`s as `kDLCUDA` tensors, both ways (feature `cudarc`, which turns on
//! `cuda`).
//!
//! - **Export, no copy**: [`export`] moves a `CudaSlice<T>` into a DLPack tensor of the shape
//!   (and, with [`export_builder`], the strides) you give it, on the slice's device. The stream
//!   rule of DLPack holds: the work queued on the slice's stream (and, through cudarc's event
//!   tracking, on any stream that wrote it) is ordered before the consumer's stream, by an event
//!   the consumer's stream waits on (`StreamRequest::NoSync` skips it). The export owns the
//!   slice; its deleter frees it on the slice's stream, so a consumer that used the memory on
//!   another stream releases the tensor only once that work is done or ordered, as DLPack asks.
//! - **Import, no copy**: [`import`] gives a [`CudaView`] of a compact `kDLCUDA` (or
//!   `kDLCUDAManaged`) tensor: a `CudaSlice<T>` over the producer's memory, bound to the stream
//!   the caller uses it on (the stream it asked the producer to order its work before), on the
//!   tensor's device. The view never frees the memory (cudarc's slice is leaked, not dropped);
//!   dropping it runs the producer's deleter. `&CudaSlice` (reads) always;
//!   [`CudaView::slice_mut`] (writes) only for an exclusive, writable tensor (dlport's aliasing
//!   model).
//!
//! Every entry needs a CUDA driver; without one, the calls that touch it fail with
//! `BackendError::DriverNotFound` rather than panic (cudarc's own constructors panic, so make
//! slices only after [`crate::cuda::probe`] succeeds).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dlport_core::backend::StreamRequest;
//! use dlport_native::interop::cudarc::{export, import};
//!
//! dlport_native::cuda::probe()?; // a driver is present
//! let ctx = dlport_native::cuda::context(0)?;
//! let stream = ctx.default_stream();
//! let slice = stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! let t = export(slice, &[2, 3], StreamRequest::LegacyDefault)?; // no copy
//! assert_eq!(t.view().shape(), &[2, 3]);
//!
//! let view = import::<f32>(t, &stream)?; // no copy: the same device memory
//! assert_eq!(stream.clone_dtoh(&*view)?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! # Ok(())
//! # }
//! ```

mod export;
mod import;

pub use export::{CudaSliceStorage, export, export_builder};
pub use import::{CudaView, import};
