//! [`PjrtBackend`]: a PJRT client as a dlport backend for its device type, so that a tensor
//! on that type (`kDLOneAPI` for an `xpu` plugin, `kDLROCM` for `rocm`, …) resolves to it in a
//! [`Registry`](dlport_core::Registry) by the same rules as any backend, and is viewed by the
//! plugin (`PJRT_Client_CreateViewOfDeviceBuffer`) on import.
//!
//! A CPU platform is not made a backend: its buffers are host memory, which dlport's
//! `CpuBackend` already serves (`kDLCPU`); its buffers are exported as `kDLCPU` and host
//! memory is imported into it with [`PjrtClient::import`].

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Access, Backend, Buffer, LayoutNeed, TensorStorage, ViewRequirements};
use dlport_core::{CopyPolicy, Device, Error, ManagedTensor, Tensor};

use super::buffer::PjrtBuffer;
use super::client::PjrtClient;
use super::import::{VIEW_ALIGN, first_element};
use crate::plugin::intern;

/// A PJRT client serving its device type in a registry.
#[derive(Debug)]
pub struct PjrtBackend {
    client: PjrtClient,
    name: &'static str,
    types: [DeviceType; 1],
}

impl PjrtBackend {
    /// The backend of `client`, named `pjrt:<platform>`. A CPU platform is refused: host
    /// memory is the CPU backend's (use [`PjrtClient::import`] and [`PjrtBuffer::to_dlpack`]).
    pub fn new(client: PjrtClient) -> Result<Arc<Self>, Error> {
        let t = client.device_type();
        if t == DeviceType::CPU {
            return Err(client.api().error(
                "PjrtBackend::new",
                -1,
                "the platform's memory is host memory (kDLCPU), which the CPU backend serves: \
                 import into it with PjrtClient::import; or create the client with another \
                 ClientOptions::device_type",
            ));
        }
        Ok(Arc::new(Self {
            name: intern(&format!("pjrt:{}", client.platform())),
            types: [t],
            client,
        }))
    }

    /// The client.
    pub fn client(&self) -> &PjrtClient {
        &self.client
    }
}

/// An imported tensor held by the plugin's view of it: dropping it destroys the view, whose
/// on-delete callback releases the producer's tensor.
struct Held {
    _buffer: PjrtBuffer,
    data: *mut c_void,
    len: usize,
    device: Device,
}

// SAFETY: the pointer is the producer's memory, valid while the view (which holds the
// producer's tensor) lives; PJRT buffers may be dropped from any thread.
unsafe impl Send for Held {}

// SAFETY: `data` is valid for `len` bytes (the view's span) while the view lives, as long as
// this value; the memory is shared with the plugin.
unsafe impl TensorStorage for Held {
    fn data_ptr(&mut self) -> *mut c_void {
        self.data
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        self.device
    }
    fn access(&self) -> Access {
        Access::Shared
    }
}

impl Backend for PjrtBackend {
    fn name(&self) -> &'static str {
        self.name
    }

    fn device_types(&self) -> &[DeviceType] {
        &self.types
    }

    fn can_access(&self, memory: Device) -> bool {
        memory.device_type == self.types[0]
            && usize::try_from(memory.device_id).is_ok_and(|i| i < self.client.devices().len())
    }

    fn view_requirements(&self) -> ViewRequirements {
        ViewRequirements {
            layout: LayoutNeed::RowMajor,
            alignment: VIEW_ALIGN,
        }
    }

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        let view = tensor.view();
        let (dtype, shape, flags) = (view.dtype(), view.shape().to_vec(), view.flags());
        let data = first_element(&view);
        let buffer = self
            .client
            .import(tensor, CopyPolicy::Never, Some(memory.device_id))?;
        let info = buffer.info()?;
        let held = Held {
            _buffer: buffer,
            data,
            len: info.span as usize,
            device: memory,
        };
        Tensor::builder(Buffer::new(Box::new(held)), self.name, dtype, &shape)
            .strides(&info.strides)
            .flags(flags)
            .build()
    }
}
