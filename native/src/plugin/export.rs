//! Exports: a plugin tensor handed to a DLPack consumer, holding the plugin's external
//! reference ([`ExternalRef`]) and dlport's own counted one, released in that order, once each.

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::backend::{Access, TensorStorage};
use dlport_core::{Device, Error, ExportBuilder, ManagedTensor, Tensor};

use super::backend::PluginBackend;
use super::described::{Described, byte_len_of};

/// An export holding the plugin's external reference and dlport's own counted one: the
/// plugin's is released, then dlport's, once, when the consumer's deleter runs.
struct ExternalRef {
    reference: *mut c_void,
    inner: Option<ManagedTensor>,
    len: usize,
    device: Device,
    plugin: Arc<PluginBackend>,
}

// SAFETY: the reference handle is the plugin's (any thread, plugin contract); ManagedTensor is
// Send.
unsafe impl Send for ExternalRef {}

impl Drop for ExternalRef {
    fn drop(&mut self) {
        if let Some(release) = self.plugin.cb.release {
            // SAFETY: a handle from `acquire` (never NULL here), given back once, here.
            unsafe { release(self.plugin.cb.state, self.reference) };
        }
        drop(self.inner.take());
    }
}

// SAFETY: `data` is the inner export's, which this value keeps alive; the access is shared
// (the exporting tensor's other handles may read and write it).
unsafe impl TensorStorage for ExternalRef {
    fn data_ptr(&mut self) -> *mut c_void {
        self.inner
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| m.view().data())
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        self.device
    }
    fn access(&self) -> Access {
        match &self.inner {
            Some(m) if m.is_read_only() => Access::ReadOnly,
            _ => Access::Shared,
        }
    }
}

impl PluginBackend {
    /// Exports `tensor` to a DLPack consumer as `as_device`, after waiting for the plugin's
    /// default stream: dlport's own counted reference, wrapped in an [`ExternalRef`] when the
    /// plugin gives `acquire`.
    pub(super) fn export_reference(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        self.wait(tensor.device())?;
        let dev = Device::new(as_device.device_type, self.export_id(as_device.device_id)?);
        let inner = tensor.acquire_external(versioned, dev)?;
        let Some(acquire) = self.cb.acquire else {
            return Ok(inner);
        };
        let view = inner.view();
        let (dtype, shape, byte_offset) = (view.dtype(), view.shape().to_vec(), view.byte_offset());
        let strides: Vec<i64> = view.strides().collect();
        let len = byte_len_of(&view);
        let (read_only, copied) = (inner.is_read_only(), inner.is_copied());
        let described = Described::of(&view, tensor.device().device_id);
        let mut reference: *mut c_void = std::ptr::null_mut();
        // SAFETY: plugin contract; the tensor and its arrays live during the call.
        let status = unsafe { acquire(self.cb.state, &described.tensor, &mut reference) };
        drop(described);
        // On error `inner` drops here: dlport's own reference goes, the plugin holds nothing.
        self.check("acquire", status)?;
        if reference.is_null() {
            return Err(self.lied("acquire", "a NULL reference"));
        }
        let storage = ExternalRef {
            reference,
            inner: Some(inner),
            len,
            device: dev,
            plugin: self.arc(),
        };
        let builder = ExportBuilder::new(storage, dtype, &shape)
            .strides(&strides)
            .byte_offset(byte_offset)
            .read_only(read_only)
            .copied(copied);
        if versioned {
            builder.build()
        } else {
            builder.build_legacy()
        }
    }
}
