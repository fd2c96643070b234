//! The room for backend authors: what a device backend or plugin implements, and the building
//! blocks it uses. Users of dlport rarely need it (they call [`crate::from_dlpack`] and
//! [`crate::to_dlpack`]); two of its types reach them: [`TensorStorage`], to export memory of
//! their own through [`ExportBuilder::new`](crate::ExportBuilder::new), and
//! [`ViewRequirements`], a consumer's own layout needs in
//! [`ImportOptions`](crate::ImportOptions).
//!
//! # Writing a backend
//!
//! A backend makes one kind of memory reachable through the [`Registry`](crate::Registry). The
//! "xpu" plugin in `dlport-testkit` (`testkit/src/xpu.rs`, shared by dlport's tests, its
//! `dispatch` example and its bench) follows these steps:
//!
//! 1. **Own the memory.** Implement [`TensorStorage`] for the type that
//!    owns an allocation: `data_ptr` (a pointer, or an opaque handle where the device has no
//!    pointers, as WebGPU's buffer table does), `byte_len`, `device`, and `access` (who else may
//!    touch it). Dropping the value frees the memory; dlport drops it exactly once, when the last
//!    [`Tensor`](crate::Tensor) handle and the last DLPack reference are gone.
//! 2. **Say what you serve.** Implement [`Backend`]: a stable `name`, the `device_types` you
//!    serve, and `can_access` (which memory you reach without a copy). Renumber devices with
//!    `translate_device_id` / `export_device_id` if your numbering differs from the producers'.
//!    State what you need to view foreign memory in `view_requirements` (alignment, layout).
//! 3. **Allocate and copy.** `allocate` makes a compact tensor over a [`Buffer`]
//!    (`Tensor::builder(Buffer::new(Box::new(storage)), name, dtype, shape).build()`), sized by
//!    [`allocation_bytes`], which checks the process's allocation limit (users allocate through
//!    [`Registry::allocate`](crate::Registry::allocate), which checks the registry's too); `copy`
//!    moves a validated view to another device, or returns `Ok(None)` for a pair of devices you
//!    do not handle (the registry then asks the other side). Host-side copies reuse the CPU
//!    kernels: [`compact_bytes`] sizes the destination and
//!    [`TensorRef::copy_to_compact`](crate::TensorRef::copy_to_compact) fills it, in memory of
//!    the backend's own or an [`AlignedBuffer`]. Check what you allocate for a copy against the
//!    allocation limit first ([`check_alloc`]).
//! 4. **Import and export.** The trait's defaults are usually right; each is one method of
//!    [`Tensor`](crate::Tensor), which an override calls once it has done its own work:
//!    - [`Backend::view_external`]: a DLPack tensor becomes a [`Tensor`](crate::Tensor)
//!      viewing its memory (XLA's *view of external memory*); the producer's deleter runs when
//!      the last user lets go.
//!    - [`Backend::acquire_external`] ([`Tensor::acquire_external`](crate::Tensor::acquire_external)):
//!      a DLPack tensor that keeps the buffer alive by a counted reference (XLA's *external
//!      reference*).
//!    - [`Backend::release_ownership`]
//!      ([`Tensor::release_ownership`](crate::Tensor::release_ownership)): hands the memory
//!      itself to the consumer; later use of the backend's handles is
//!      [`AccessError::BufferReleased`](crate::error::AccessError::BufferReleased),
//!      never a dangling read.
//!    - [`Backend::stream_hand_off`]: a backend with streams makes the consumer's stream wait
//!      for a tensor's pending work (`__dlpack__(stream=)`); the default does nothing, right
//!      for a backend whose work is done when its calls return.
//! 5. **Register.** `registry.register(Arc::new(MyBackend))?` on a registry of your own, or
//!    build the process default with it before the first use
//!    ([`Registry::install_default`](crate::Registry::install_default)).
//!
//! Where each device type is handled: [`CpuBackend`] (here) serves `kDLCPU` and reads every
//! host-accessible class (`kDLCUDAHost`, `kDLROCMHost`, `kDLTPUHost`, `kDLCUDAManaged`)
//! without a copy; `dlport-native` adds page-locked host memory and CUDA; `dlport-wasm` adds
//! WebGPU (`kDLWebGPU`), whose `data` is a buffer-table handle, never a pointer.
//!
//! # Also here
//!
//! - Devices beyond [`Device`](crate::Device) itself: [`MemoryClass`] (whether the host reads
//!   a device's memory), [`DeviceField`] (which argument a device came from, for the rule of
//!   device ids), [`reconcile_device`] (a capsule's device against the one its producer
//!   advertised) and [`StreamRequest`] (the `__dlpack__` stream argument).
//! - Ownership: [`Access`] (who else may touch a tensor's memory) and [`TensorStorage`].
//! - The registry's plan of an import, [`Decision`]
//!   ([`Registry::decide`](crate::Registry::decide)), the options of a compaction,
//!   [`CompactOptions`] ([`Registry::compact`](crate::Registry::compact)), and the largest
//!   alignment an import or a compaction may ask for, [`MAX_ALIGNMENT`].

#[cfg(feature = "alloc")]
mod api;
#[cfg(feature = "alloc")]
mod cpu;

pub use crate::access::Access;
#[cfg(feature = "alloc")]
pub use crate::buffer::{Buffer, SharedBuffer};
#[cfg(feature = "alloc")]
pub use crate::copy::{AlignedBuffer, CPU_ALIGN, allocation_bytes, compact_bytes};
pub use crate::device::{DeviceField, MemoryClass, StreamRequest, reconcile_device};
/// How an export writes `data` and `byte_offset` (for a binding that lends a bare `DLTensor`).
#[cfg(feature = "alloc")]
pub use crate::export::host_address;
pub use crate::limit::{check_alloc, set_default_alloc_limit};
#[cfg(feature = "alloc")]
pub use crate::options::{
    CompactOptions, Decision, LayoutNeed, MAX_ALIGNMENT, ViewRequirements, check_alignment,
};
#[cfg(feature = "alloc")]
pub use crate::storage::TensorStorage;
#[cfg(feature = "alloc")]
pub use crate::tensor::TensorBuilder;
#[cfg(feature = "alloc")]
pub use api::{Backend, BackendRef, platform_id};
#[cfg(feature = "alloc")]
pub use cpu::CpuBackend;
