//! The two primitives every backend is built on, as free functions: a *view of external
//! memory* (import) and an *external reference* (export), plus the hand-over of ownership.

use crate::device::Device;
use crate::error::Error;
use crate::managed::ManagedTensor;
use crate::tensor::Tensor;

/// Imports a DLPack tensor as a view of its memory (no copy), held by the backend `backend`.
/// The DLPack deleter runs when the last handle onto the view, and the last reference
/// re-exported from it, are dropped.
///
/// `memory` is where the memory really is: the capsule's device, or the more specific
/// host-accessible class the producer advertised (see [`reconcile_device`](super::reconcile_device));
/// anything that contradicts the capsule is refused with a device mismatch (and the tensor
/// released).
/// It becomes the buffer's device, the one source of truth for describe, device queries and
/// export.
pub fn view_external(
    managed: ManagedTensor,
    backend: &'static str,
    memory: Device,
) -> Result<Tensor, Error> {
    Tensor::from_external(managed, backend, memory, memory)
}

/// Exports a DLPack tensor that keeps `tensor`'s buffer alive by a counted reference (XLA's
/// external reference). The buffer cannot be released while it exists. `versioned` picks a
/// DLPack 1.3 or a legacy struct; `device` is the device to write (after any device-id
/// translation by the backend).
pub fn acquire_external(
    tensor: &Tensor,
    versioned: bool,
    device: Device,
) -> Result<ManagedTensor, Error> {
    tensor.acquire_external(versioned, device)
}

/// Hands `tensor`'s memory itself to a DLPack consumer. Afterwards every handle onto the
/// buffer gets a released-buffer error. Fails while views or external references use it.
pub fn release_ownership(
    tensor: &Tensor,
    versioned: bool,
    device: Device,
) -> Result<ManagedTensor, Error> {
    tensor.release_ownership(versioned, device)
}
