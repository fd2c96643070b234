//! Imports: a foreign tensor on a plugin's device as a dlport [`Tensor`] over a [`View`], the
//! plugin's view handle and the producer's tensor, given back in that order, once each.

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::FLAG_READ_ONLY;
use dlport_core::backend::{Access, Buffer, TensorStorage};
use dlport_core::error::DispatchError;
use dlport_core::{Device, Error, ManagedTensor, Tensor};

use super::backend::PluginBackend;
use super::described::{Described, byte_len_of};
use super::owners::Record;

/// An imported tensor viewed by the plugin: the plugin's view handle is destroyed, then the
/// producer's tensor released, once, when dropped.
struct View {
    /// Its entry in the table of owners (`owners.rs`), removed when the view drops.
    _owner: Record,
    view: *mut c_void,
    managed: Option<ManagedTensor>,
    data: *mut c_void,
    len: usize,
    memory: Device,
    access: Access,
    plugin: Arc<PluginBackend>,
}

// SAFETY: the view handle is the plugin's (any thread, plugin contract); ManagedTensor is Send.
unsafe impl Send for View {}

impl Drop for View {
    fn drop(&mut self) {
        if !self.view.is_null() {
            if let Some(destroy) = self.plugin.cb.view_destroy {
                // SAFETY: a handle from `view_create`, given back once, here.
                unsafe { destroy(self.plugin.cb.state, self.view) };
            }
        }
        // The producer's deleter runs after the plugin let go of its view.
        drop(self.managed.take());
    }
}

// SAFETY: `data` is the imported tensor's own, valid until its deleter runs (when this value
// drops) for `len` bytes (byte_offset + span); the access is the import's own.
unsafe impl TensorStorage for View {
    fn data_ptr(&mut self) -> *mut c_void {
        self.data
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        self.memory
    }
    fn access(&self) -> Access {
        self.access
    }
}

impl PluginBackend {
    /// Imports `tensor`, whose memory is on `memory` (a device type the plugin serves): a
    /// tensor over a [`View`], with the plugin told through `view_create` when it gives one.
    pub(super) fn import_view(
        &self,
        tensor: ManagedTensor,
        memory: Device,
    ) -> Result<Tensor, Error> {
        if !self.serves(memory) {
            return Err(Error::Dispatch(DispatchError::CopyRequired {
                reason: dlport_core::error::CopyReason::Device {
                    from: memory,
                    to: memory,
                },
            }));
        }
        let local = Device::new(memory.device_type, self.translate_id(memory.device_id)?);
        let view = tensor.view();
        let (dtype, shape, byte_offset) = (view.dtype(), view.shape().to_vec(), view.byte_offset());
        let strides: Vec<i64> = view.strides().collect();
        let read_only = if tensor.is_read_only() {
            FLAG_READ_ONLY
        } else {
            0
        };
        let flags = view.flags() | read_only;
        let (data, len) = (view.data(), byte_len_of(&view));
        let mut handle: *mut c_void = std::ptr::null_mut();
        if let Some(create) = self.cb.view_create {
            let described = Described::of(&view, local.device_id);
            // SAFETY: plugin contract; the tensor and its arrays live during the call.
            let status = unsafe { create(self.cb.state, &described.tensor, &mut handle) };
            // On error `tensor` is dropped on return: the producer's deleter runs once.
            self.check("view_create", status)?;
            if handle.is_null() {
                return Err(self.lied("view_create", "a NULL view"));
            }
        }
        let plugin = self.arc();
        let storage = View {
            _owner: Record::new(data, &plugin),
            view: handle,
            access: tensor.access(),
            managed: Some(tensor),
            data,
            len,
            memory,
            plugin,
        };
        // On error the storage drops: view_destroy, then the producer's deleter, once each.
        Tensor::builder(Buffer::new(Box::new(storage)), self.name, dtype, &shape)
            .strides(&strides)
            .byte_offset(byte_offset)
            .flags(flags)
            .build()
            .map(|t| t.with_device(local))
    }
}
