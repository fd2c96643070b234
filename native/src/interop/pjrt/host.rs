//! [`PjrtHost`]: the backend of dlport-native's default registry through which the C ABI and
//! the Python package reach the PJRT clients they load
//! ([`register_default`](super::register_default)). The default registry is fixed once
//! installed; the host is registered in it at installation (feature `pjrt`) and routes each
//! operation to the latest client registered for the memory's device type, so that a tensor on
//! that type resolves, is imported and exported by the registry's rules like any backend's.

use std::sync::{Arc, PoisonError, RwLock};

use dlport_core::abi::DeviceType;
use dlport_core::backend::Backend;
use dlport_core::error::{BackendError, CopyReason};
use dlport_core::{Device, Error, ManagedTensor, Tensor, TensorRef};

use super::backend::PjrtBackend;

/// The name of [`PjrtHost`] in the default registry.
pub const PJRT_HOST_NAME: &str = "pjrt";

/// The PJRT clients of the default registry, one per backend name (a later client of the
/// same platform takes its place), in registration order.
static TABLE: RwLock<Vec<Arc<PjrtBackend>>> = RwLock::new(Vec::new());

/// The PJRT backends of the default registry, in registration order.
pub fn registered() -> Vec<Arc<PjrtBackend>> {
    TABLE.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// The latest registered backend serving `t` (CPU platforms serve none).
fn serving(t: DeviceType) -> Option<Arc<PjrtBackend>> {
    TABLE
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .rev()
        .find(|b| b.device_types().contains(&t))
        .cloned()
}

/// Puts `backend` in the table, in place of an earlier one of its name (its platform).
pub(super) fn add(backend: Arc<PjrtBackend>) {
    let mut table = TABLE.write().unwrap_or_else(PoisonError::into_inner);
    table.retain(|b| b.name() != backend.name());
    table.push(backend);
}

/// The default registry's door to the PJRT clients registered with
/// [`register_default`](super::register_default).
#[derive(Debug, Default)]
pub struct PjrtHost;

impl Backend for PjrtHost {
    fn name(&self) -> &'static str {
        PJRT_HOST_NAME
    }

    /// None at registration: the clients come later, and are found by
    /// [`can_access`](Self::can_access) (the registry's second rule).
    fn device_types(&self) -> &[DeviceType] {
        &[]
    }

    fn can_access(&self, memory: Device) -> bool {
        serving(memory.device_type).is_some_and(|b| b.can_access(memory))
    }

    fn view_obstacle(&self, view: &TensorRef<'_>) -> Option<CopyReason> {
        let memory = view.device();
        match serving(memory.device_type) {
            Some(b) => b.view_obstacle(view),
            None => Some(CopyReason::Device {
                from: memory,
                to: memory,
            }),
        }
    }

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        match serving(memory.device_type) {
            Some(b) => b.view_external(tensor, memory),
            None => Err(Error::Backend(BackendError::unsupported(
                PJRT_HOST_NAME,
                "a view of memory no registered PJRT client serves",
            ))),
        }
    }
}
