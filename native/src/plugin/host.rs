//! [`PluginHost`]: the backend of dlport-native's default registry through which the C ABI and
//! the Python package reach the plugins of the process-wide plugin table.

use std::sync::{Arc, PoisonError, RwLock};

use dlport_core::abi::DeviceType;
use dlport_core::backend::Backend;
use dlport_core::error::{BackendNames, DispatchError};
use dlport_core::{DataType, Device, Error, ManagedTensor, Tensor, TensorRef};

use super::backend::PluginBackend;
use super::error::plugin_error;
use super::owners::{self, Owner};

/// The name of [`PluginHost`] in the default registry.
pub const PLUGIN_HOST_NAME: &str = "plugins";

/// The process-wide plugin table, in registration order (the latest serving a type wins).
static TABLE: RwLock<Vec<Arc<PluginBackend>>> = RwLock::new(Vec::new());

/// The registered plugins, in registration order.
pub fn plugins() -> Vec<Arc<PluginBackend>> {
    TABLE.read().unwrap_or_else(PoisonError::into_inner).clone()
}

fn serving(t: DeviceType) -> Option<Arc<PluginBackend>> {
    TABLE
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .rev()
        .find(|p| p.device_types().contains(&t))
        .cloned()
}

fn is_registered(plugin: &Arc<PluginBackend>) -> bool {
    TABLE
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|p| Arc::ptr_eq(p, plugin))
}

/// The error for an operation on a plugin tensor whose plugin is no longer registered
/// (`DLPORT_ERR_NO_BACKEND`): no backend serves that tensor any more.
fn no_backend(device: Device) -> Error {
    let names: Vec<&'static str> = plugins().iter().map(|p| p.name()).collect();
    Error::Dispatch(DispatchError::NoBackend {
        device_type: device.device_type,
        device_id: device.device_id,
        registered: BackendNames::new(names),
    })
}

/// Adds a plugin to the process-wide table. Its name must differ from every plugin's and from
/// the default registry's backends (`taken`).
pub fn register_global(plugin: Arc<PluginBackend>, taken: &[&'static str]) -> Result<(), Error> {
    let mut table = TABLE.write().unwrap_or_else(PoisonError::into_inner);
    let name = plugin.name();
    if taken.contains(&name) || table.iter().any(|p| p.name() == name) {
        return Err(Error::Dispatch(DispatchError::DuplicateBackend { name }));
    }
    table.push(plugin);
    Ok(())
}

/// Removes a plugin from the process-wide table by name, returning it. Its tensors stay
/// valid; the plugin is destroyed (and its library closed) when the last handle to it is gone:
/// after the last of its tensors, on the thread that drops the last handle (another thread's
/// listing or lookup may hold it a moment longer, and then `destroy` runs there).
pub fn unregister_global(name: &str) -> Result<Arc<PluginBackend>, Error> {
    let mut table = TABLE.write().unwrap_or_else(PoisonError::into_inner);
    match table.iter().position(|p| p.name() == name) {
        Some(at) => Ok(table.remove(at)),
        None => {
            let names: Vec<&str> = table.iter().map(|p| p.name()).collect();
            Err(plugin_error(
                name,
                "the plugin table",
                "unregister",
                -1,
                &format!(
                    "no plugin of this name is registered (registered plugins: [{}])",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// A backend serving, at any moment, the device types of the plugins in the process-wide
/// table. It declares no device types of its own: the registry reaches it through
/// `can_access` (true for memory a registered plugin serves) after the backends that serve a
/// type; which types a plugin may take is the rule of `rule.rs`.
///
/// Which plugin a call goes to, one rule: an operation on an existing plugin tensor (its
/// export, a copy of it) goes to the plugin that made it (recorded with its buffer,
/// `owners.rs`), or fails with `DispatchError::NoBackend` (`DLPORT_ERR_NO_BACKEND`) once that
/// plugin is unregistered, whatever other plugin serves the same device type. Only what no
/// plugin made yet (an import, an allocation, a copy of a producer's foreign tensor) goes to
/// the latest registered plugin serving the device type.
#[derive(Debug, Default, Clone, Copy)]
pub struct PluginHost;

impl PluginHost {
    fn for_device(device: Device) -> Result<Arc<PluginBackend>, Error> {
        serving(device.device_type).ok_or_else(|| {
            plugin_error(
                PLUGIN_HOST_NAME,
                "the plugin table",
                "dispatch",
                -1,
                &format!(
                    "no registered plugin serves device type {} (it was unregistered)",
                    device.device_type.0
                ),
            )
        })
    }

    /// The registered plugin that made the buffer at `handle` on `device`: `Ok(None)` for
    /// foreign memory (no plugin made it), an error once its plugin is unregistered or when
    /// several plugins hold buffers at that handle value.
    fn owner(
        handle: *mut std::ffi::c_void,
        device: Device,
    ) -> Result<Option<Arc<PluginBackend>>, Error> {
        match owners::owner_of(handle) {
            Owner::Foreign => Ok(None),
            Owner::One(p) if is_registered(&p) => Ok(Some(p)),
            Owner::One(_) => Err(no_backend(device)),
            Owner::Several(names) => Err(owners::ambiguous(&names, device)),
        }
    }

    /// The plugin that made `tensor`, while it is registered.
    fn for_tensor(tensor: &Tensor) -> Result<Arc<PluginBackend>, Error> {
        let device = tensor.buffer().device();
        Self::owner(tensor.buffer().ptr(), device)?.ok_or_else(|| no_backend(device))
    }
}

impl Backend for PluginHost {
    fn name(&self) -> &'static str {
        PLUGIN_HOST_NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        &[]
    }

    fn can_access(&self, memory: Device) -> bool {
        serving(memory.device_type).is_some_and(|p| p.can_access(memory))
    }

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        Self::for_device(memory)?.view_external(tensor, memory)
    }

    fn acquire_external(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        Self::for_tensor(tensor)?.acquire_external(tensor, versioned, as_device)
    }

    fn release_ownership(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        Self::for_tensor(tensor)?.release_ownership(tensor, versioned, as_device)
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        Self::for_device(device)?.allocate(device, dtype, shape)
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        let from = src.device();
        if !from.is_host_accessible() {
            if let Some(p) = Self::owner(src.data(), from)? {
                return p.copy_host(src, target);
            }
        }
        if let Some(p) = serving(target.device_type) {
            if let Some(t) = p.copy(src, target)? {
                return Ok(Some(t));
            }
        }
        match serving(src.device().device_type) {
            Some(p) => p.copy(src, target),
            None => Ok(None),
        }
    }
}
