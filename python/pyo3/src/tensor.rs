//! `dlport.Tensor`'s value: the class [`PyTensor`] (core's `Tensor`, the device it presents,
//! where an unpickled tensor came from) and the export every DLPack exit of it takes. Its Python
//! methods are `crate::methods`, the room above those that read and make tensors (the buffer
//! protocol, the exchange API, pickling): this room names none of them.

use dlport_core::abi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion, RawManaged};
use dlport_core::{Device, ExportOptions, ManagedTensor, Tensor};
use pyo3::prelude::*;

use crate::adapter;
use crate::errors::Failure;

/// A tensor held by dlport: memory of any producer (a view, or a copy where one was needed and
/// allowed), validated once. It is a DLPack producer (`__dlpack__`, `__dlpack_device__`, the
/// DLPack 1.3 C exchange API), exposes host memory through the buffer protocol, and answers
/// every device query from one value: the device it presents.
// `freelist`: pyo3 keeps up to 64 dead objects for the next ones, so most imports neither
// allocate nor track a new object (BENCHMARKS.md, "The Python package").
#[pyclass(module = "dlport", name = "Tensor", frozen, weakref, freelist = 64)]
#[derive(Clone, Debug)]
pub struct PyTensor {
    /// The tensor, a backend tensor of the package's registry (`adapter::registry`).
    tensor: Tensor,
    /// What `__dlpack_device__`, `device` and exports say (see [`PyTensor::new`]).
    device: Device,
    /// For a tensor unpickled by `_rebuild`: where the sender's memory was.
    origin: Option<Device>,
}

impl PyTensor {
    /// Wraps a tensor of the registry; `requested` is the device the import asked for. The
    /// device it presents (`__dlpack_device__`, `device`, exports) is core's rule,
    /// [`Device::presented`]: host-accessible memory (pinned, managed) presents as `cpu` unless
    /// the import asked for its own device by name (`device="cuda_host"`) (python/README.md,
    /// "Which device a tensor presents"); `memory` still says where the memory is. Device
    /// memory presents as itself.
    #[inline]
    pub fn new(tensor: Tensor, requested: Option<Device>) -> Self {
        let device = tensor.device().presented(requested);
        Self {
            tensor,
            device,
            origin: None,
        }
    }

    /// The same tensor, saying where the memory came from (an unpickled tensor: the sender's).
    pub fn with_origin(self, origin: Device) -> Self {
        Self {
            origin: Some(origin),
            ..self
        }
    }

    /// Another tensor (a copy of this one) presenting the same device and origin.
    pub(crate) fn with_tensor(&self, tensor: Tensor) -> Self {
        Self {
            tensor,
            device: self.device,
            origin: self.origin,
        }
    }

    /// Where the memory came from, for an unpickled tensor (the sender's memory).
    pub fn origin(&self) -> Option<Device> {
        self.origin
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// The tensor, owned.
    pub fn into_tensor(self) -> Tensor {
        self.tensor
    }

    /// The device it presents.
    pub fn device(&self) -> Device {
        self.device
    }

    /// A versioned export for a DLPack 1.x consumer (the exchange API's producer side). It
    /// makes no stream hand-off (stream -1): the API's consumer orders its work itself, after
    /// `current_work_stream`.
    pub fn export_versioned(&self) -> Result<RawManaged, Failure> {
        let options = ExportOptions {
            max_version: Some(DLPackVersion::new(
                DLPACK_MAJOR_VERSION,
                DLPACK_MINOR_VERSION,
            )),
            stream: Some(-1),
            ..ExportOptions::default()
        };
        Ok(self.export(&options)?.into_raw())
    }

    /// An export under core's `options` (the consumer's stream among them), on the device it
    /// presents unless `options` name another: released if dropped before it is handed over.
    pub(crate) fn export(&self, options: &ExportOptions) -> Result<ManagedTensor, Failure> {
        adapter::export(&self.tensor, self.device, options)
    }
}
