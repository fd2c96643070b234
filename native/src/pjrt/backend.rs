//! [`PjrtBackend`]: a PJRT client as a dlport backend for its device type, so that a tensor
//! on that type (`kDLOneAPI` for an `xpu` plugin, `kDLROCM` for `rocm`, …) resolves to it in a
//! [`Registry`](dlport_core::Registry) by the same rules as any backend, and is viewed by the
//! plugin (`PJRT_Client_CreateViewOfDeviceBuffer`) on import.
//!
//! A CPU platform is not made a backend: its buffers are host memory, which dlport's
//! `CpuBackend` already serves (`kDLCPU`); its buffers are exported as `kDLCPU` and host
//! memory is imported into it with [`PjrtClient::import`].

use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Backend, Buffer, LayoutNeed, ViewRequirements};
use dlport_core::{CopyPolicy, Device, Error, ManagedTensor, Tensor};

use super::buffer::BufferMemory;
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
    /// memory is the CPU backend's (use [`PjrtClient::import`] and
    /// [`PjrtBuffer::to_dlpack`](crate::pjrt::PjrtBuffer::to_dlpack)).
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
        // Dropping the storage destroys the view, whose on-delete callback releases the
        // producer's tensor.
        let held = BufferMemory::of_view(buffer, data, info.span as usize, memory);
        Tensor::builder(Buffer::new(Box::new(held)), self.name, dtype, &shape)
            .strides(&info.strides)
            .flags(flags)
            .build()
    }
}
