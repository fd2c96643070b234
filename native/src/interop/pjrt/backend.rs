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

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Backend, Buffer, LayoutNeed, ViewRequirements};
use dlport_core::error::{Address, CopyReason};
use dlport_core::layout::Contiguity;
use dlport_core::{Device, Error, ManagedTensor, Tensor, TensorRef};

use super::export::BufferMemory;
use crate::pjrt::PjrtClient;

/// The alignment dlport asks of memory a PJRT plugin views: XLA's CPU plugin refuses a view
/// whose data is not 64-byte aligned (measured: 4, 8, 16 and 32 are refused), and 64 bytes
/// serves every accelerator's allocator too.
pub const VIEW_ALIGN: usize = 64;

/// Why PJRT cannot view `view`, or `None`: what [`PjrtBackend`] answers
/// the registry's view rule ([`Backend::view_obstacle`](dlport_core::backend::Backend)), each
/// obstacle the reason a copy fixes. Row-major only (XLA's CPU plugin takes a view with another
/// dense layout and reports it back, but a program compiled with default layouts reads the
/// memory row-major); no padded sub-byte elements; the first element [`VIEW_ALIGN`]-aligned
/// and non-NULL, an empty tensor's too (XLA refuses to view less); not READ_ONLY (a PJRT
/// buffer is writable: an execution may donate its input and write its result there).
fn view_obstacle(view: &TensorRef<'_>) -> Option<CopyReason> {
    match view.contiguity() {
        Contiguity::Both | Contiguity::RowMajor => {}
        c => return Some(CopyReason::Layout { contiguity: c }),
    }
    if view.is_subbyte_padded() {
        return Some(CopyReason::Packed);
    }
    let addr = first_element(view) as usize;
    if addr == 0 || addr % VIEW_ALIGN != 0 {
        return Some(CopyReason::Alignment {
            address: Address::new(addr),
            required: VIEW_ALIGN as u32,
        });
    }
    if view.is_read_only() {
        return Some(CopyReason::Writable);
    }
    None
}

/// The first element's address: `data + byte_offset`, in any device's address space (a
/// device pointer is never read here, only handed to the plugin).
pub(super) fn first_element(view: &TensorRef<'_>) -> *mut c_void {
    view.data()
        .cast::<u8>()
        .wrapping_add(view.byte_offset() as usize)
        .cast()
}

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
