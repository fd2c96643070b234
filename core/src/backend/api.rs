//! The [`Backend`] trait: what a device backend or plugin provides to the registry.

use alloc::sync::Arc;

use crate::abi::DeviceType;
use crate::device::{Device, StreamRequest};
use crate::dtype::DataType;
use crate::error::{BackendError, CopyReason, DispatchError, Error};
use crate::managed::ManagedTensor;
use crate::options::ViewRequirements;
use crate::tensor::Tensor;
use crate::view::TensorRef;

/// The stable platform id of a backend name: 64-bit FNV-1a over the name's UTF-8 bytes
/// (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`).
///
/// It never changes for a given name, on any platform or release, so it can be stored and
/// compared across processes (as PJRT's platform ids are).
///
/// ```
/// use dlport_core::backend::platform_id;
/// assert_eq!(platform_id(""), 0xcbf2_9ce4_8422_2325); // the FNV-1a test vectors
/// assert_eq!(platform_id("a"), 0xaf63_dc4c_8601_ec8c);
/// assert_ne!(dlport_core::backend::platform_id("cuda"), dlport_core::backend::platform_id("cpu"));
/// ```
pub const fn platform_id(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// A device backend or plugin, as the registry sees it.
///
/// Import is a *view of external memory*: [`view_external`](Self::view_external) wraps a DLPack
/// tensor without copying, and its deleter runs when the last user drops it. Export is an
/// *external reference*: [`acquire_external`](Self::acquire_external) returns a DLPack tensor
/// that keeps the buffer alive by a reference count.
/// [`release_ownership`](Self::release_ownership) hands the buffer over instead; later use of
/// it through the backend's handles is an error, never undefined behaviour.
///
/// A backend with streams makes a consumer's stream wait for a tensor's pending work
/// ([`stream_hand_off`](Self::stream_hand_off)), which the registry's export asks for.
///
/// Only [`name`](Self::name), [`device_types`](Self::device_types) and
/// [`can_access`](Self::can_access) are required; the rest have working defaults built on
/// [`Tensor`] (and, for the hand-off, on work that is done when a call returns).
pub trait Backend: Send + Sync + 'static {
    /// A short, stable name: `"cpu"`, `"cuda"`, `"cuda_host"`, `"webgpu"`, or a plugin's own.
    fn name(&self) -> &'static str;

    /// A stable id derived from the name ([`platform_id`]).
    fn platform_id(&self) -> u64 {
        platform_id(self.name())
    }

    /// The device types this backend serves. A [`Registry`](crate::Registry) asks when the
    /// backend is registered and keeps the answer (its table of serving backends), so it does
    /// not change over the backend's life.
    fn device_types(&self) -> &[DeviceType];

    /// Whether this backend reaches memory on `memory` without a copy.
    fn can_access(&self, memory: Device) -> bool;

    /// What it needs to view foreign memory without a copy.
    fn view_requirements(&self) -> ViewRequirements {
        ViewRequirements::ANY
    }

    /// Why this backend cannot view `view` without a copy, or `None` when it can: the
    /// registry's view rule asks it of the target's backend on every import
    /// ([`Registry::decide`](crate::Registry::decide)). The default is
    /// [`view_requirements`](Self::view_requirements)' [`unmet`](ViewRequirements::unmet); a
    /// backend whose views need more (a PJRT plugin views only writable, non-padded memory
    /// at an aligned, non-NULL address, empty tensors included) says so here, with the reason
    /// a copy fixes.
    fn view_obstacle(&self, view: &TensorRef<'_>) -> Option<CopyReason> {
        self.view_requirements().unmet(view)
    }

    /// Maps a producer's device id to this backend's numbering (a plugin may number devices
    /// differently, as the XPU device selector does). Identity by default.
    fn translate_device_id(&self, producer_id: i32) -> Result<i32, Error> {
        Ok(producer_id)
    }

    /// The inverse of [`translate_device_id`](Self::translate_device_id), for export.
    fn export_device_id(&self, local_id: i32) -> i32 {
        local_id
    }

    /// Import: a view of the DLPack tensor's memory. The default refuses memory the backend
    /// cannot reach and renumbers the device with
    /// [`translate_device_id`](Self::translate_device_id).
    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        if !self.can_access(memory) {
            return Err(Error::Dispatch(DispatchError::CopyRequired {
                reason: CopyReason::Device {
                    from: memory,
                    to: memory,
                },
            }));
        }
        let local = Device::new(
            memory.device_type,
            self.translate_device_id(memory.device_id)?,
        );
        Tensor::from_external(tensor, self.name(), memory, local)
    }

    /// Export: a DLPack tensor that keeps `tensor`'s buffer alive by a counted reference.
    /// `as_device` is the device to write (the tensor's own, or `cpu` for host-accessible
    /// memory shown to a consumer that knows only the CPU); its id is in this backend's
    /// numbering and is translated back with [`export_device_id`](Self::export_device_id).
    fn acquire_external(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        tensor.acquire_external(versioned, exported_device(self, as_device))
    }

    /// Export that hands the buffer over: afterwards the backend's handles get
    /// [`AccessError::BufferReleased`](crate::error::AccessError::BufferReleased).
    fn release_ownership(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        tensor.release_ownership(versioned, exported_device(self, as_device))
    }

    /// The DLPack stream hand-off, which `__dlpack__(stream=)` asks of a producer: makes the
    /// consumer's stream wait for the work pending on memory of `memory` (a device in this
    /// backend's numbering), so that the consumer reads a tensor only after it is written.
    ///
    /// `producer` is the stream that work is queued on, as this backend's own handle; `None`
    /// is the stream this backend orders its own work and its imports on (CUDA: the legacy
    /// default stream). `consumer` is the consumer's stream, parsed by DLPack's rules for the
    /// device type ([`StreamRequest::parse`]). The registry calls it after every export whose
    /// request is not [`StreamRequest::NoSync`]
    /// ([`Registry::to_dlpack`](crate::Registry::to_dlpack) with
    /// [`ExportOptions::stream`](crate::ExportOptions::stream),
    /// [`Registry::stream_hand_off`](crate::Registry::stream_hand_off)).
    ///
    /// The default does nothing: right for a backend whose work is done when its calls return
    /// (the CPU, a plugin without streams). A backend with streams orders them here (the CUDA
    /// backend records an event on `producer` and makes `consumer` wait on it).
    fn stream_hand_off(
        &self,
        memory: Device,
        producer: Option<usize>,
        consumer: StreamRequest,
    ) -> Result<(), Error> {
        let _ = (memory, producer, consumer);
        Ok(())
    }

    /// Allocates a compact tensor (zeroed where the backend can) on `device`: the backend's
    /// side of [`Registry::allocate`](crate::Registry::allocate), which checks the limit in
    /// force (the registry's and the process's) before it asks. An implementation sizes what it
    /// allocates with [`allocation_bytes`](crate::backend::allocation_bytes), so that a direct
    /// call is bounded by the process's limit too.
    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        let _ = (device, dtype, shape);
        Err(Error::Backend(BackendError::unsupported(
            self.name(),
            "allocation",
        )))
    }

    /// Copies `src` into a new compact tensor on `target`, if this backend can perform that
    /// pair of devices; `Ok(None)` if it cannot (the registry then asks the other side).
    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        let _ = (src, target);
        Ok(None)
    }
}

/// The device an export of `backend` writes for `as_device`: its id translated back to the
/// producers' numbering ([`Backend::export_device_id`]).
fn exported_device<B: Backend + ?Sized>(backend: &B, as_device: Device) -> Device {
    Device::new(
        as_device.device_type,
        backend.export_device_id(as_device.device_id),
    )
}

impl core::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Backend({})", self.name())
    }
}

/// Shared handle to a registered backend.
pub type BackendRef = Arc<dyn Backend>;
