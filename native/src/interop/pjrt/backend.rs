//! [`PjrtBackend`]: a PJRT client as a dlport backend, so that its buffers follow a
//! [`Registry`]'s rules like every other backend's: the registry decides each import (view or
//! copy, the copy policy, the allocation limit, the caller's alignment) by its one view rule
//! for this backend ([`Registry::decide_on`]), and the client does what was decided.
//!
//! A client of a platform whose memory is a device type (`kDLOneAPI` for an `xpu` plugin,
//! `kDLROCM` for `rocm`, …) serves that type: a tensor on it resolves to the backend and is
//! viewed by the plugin (`PJRT_Client_CreateViewOfDeviceBuffer`) on import. A CPU platform
//! serves no type (host memory, `kDLCPU`, stays the `CpuBackend`'s), but is a backend all the
//! same: it reaches host memory, its views follow the same rule, and it is listed by name.
//!
//! Register one in a registry of your own with `registry.register(PjrtBackend::new(client))`
//! and import with [`PjrtClient::import_with`]; the bindings (C's `dlport_pjrt_load`, Python's
//! `dlport.pjrt.load`) register theirs in the process-wide default with
//! [`register_default`](super::register_default).

use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Backend, Buffer, LayoutNeed, ViewRequirements};
use dlport_core::error::CopyReason;
use dlport_core::{Device, Error, ManagedTensor, Tensor, TensorRef};

use super::export::BufferMemory;
use super::import::{VIEW_ALIGN, first_element, view_obstacle};
use crate::pjrt::PjrtClient;

/// A PJRT client as a backend: serving its device type (none for a CPU platform).
#[derive(Debug)]
pub struct PjrtBackend {
    client: PjrtClient,
    name: &'static str,
    types: Vec<DeviceType>,
}

impl PjrtBackend {
    /// The backend of `client`, named `pjrt:<platform>`, serving the client's device type, or
    /// none on a CPU platform (whose memory is host memory, the CPU backend's).
    pub fn new(client: PjrtClient) -> Arc<Self> {
        Arc::new(Self::of(&client))
    }

    /// The backend of `client`, unshared: what an import decides on.
    pub(super) fn of(client: &PjrtClient) -> Self {
        let t = client.device_type();
        Self {
            name: client.backend_name(),
            types: if t == DeviceType::CPU {
                Vec::new()
            } else {
                vec![t]
            },
            client: client.clone(),
        }
    }

    /// The client.
    pub fn client(&self) -> &PjrtClient {
        &self.client
    }

    /// Whether the client's memory is host memory (a CPU platform).
    pub fn is_host(&self) -> bool {
        self.types.is_empty()
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
        match self.types.first() {
            // A CPU platform reads host memory, wherever the host can address it.
            None => memory.is_host_accessible(),
            Some(&t) => {
                memory.device_type == t
                    && usize::try_from(memory.device_id)
                        .is_ok_and(|i| i < self.client.devices().len())
            }
        }
    }

    fn view_requirements(&self) -> ViewRequirements {
        ViewRequirements {
            layout: LayoutNeed::RowMajor,
            alignment: VIEW_ALIGN,
        }
    }

    fn view_obstacle(&self, view: &TensorRef<'_>) -> Option<CopyReason> {
        view_obstacle(view)
    }

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        let view = tensor.view();
        let (dtype, shape, flags) = (view.dtype(), view.shape().to_vec(), view.flags());
        let data = first_element(&view);
        // The registry decided a view: the plugin makes it on the memory's device (device 0
        // of a CPU platform for host memory).
        let device = if self.is_host() { 0 } else { memory.device_id };
        let buffer = self.client.view_decided(tensor, device)?;
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
