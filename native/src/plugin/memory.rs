//! Allocation and host copies: plugin memory owned by an [`Allocation`] (deallocated once,
//! when dropped), and copies between the host and a plugin's device.
//!
//! Device ids: a plugin tensor carries one numbering per field, as every dlport tensor does:
//! its buffer's device is in the producers' numbering (the device a caller named), the
//! tensor's device in the plugin's. A caller's id is translated once, on the way in
//! (`translate_device_id`: allocation, a copy to the plugin, an import), and once on the way
//! out (`export_device_id`, in `export.rs`); a failing translation fails the operation.

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{
    AlignedBuffer, Buffer, CPU_ALIGN, TensorStorage, allocation_bytes, compact_bytes,
};
use dlport_core::error::BackendError;
use dlport_core::{DataType, Device, Error, Tensor, TensorRef};

use super::backend::PluginBackend;
use super::described::Described;
use super::owners::{self, Owner, Record};

/// A plugin allocation: deallocated once, when dropped.
struct Allocation {
    /// Removed from the table of owners first (declared first: dropped after `Drop::drop`,
    /// before `plugin`).
    _owner: Record,
    handle: *mut c_void,
    bytes: usize,
    /// The device in the plugin's numbering (what `allocate` and `deallocate` are given).
    local: Device,
    /// The device in the producers' numbering (the buffer's device).
    memory: Device,
    plugin: Arc<PluginBackend>,
}

// SAFETY: the handle is the plugin's, usable from any thread (plugin contract).
unsafe impl Send for Allocation {}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let Some(deallocate) = self.plugin.cb.deallocate {
            // SAFETY: a handle from `allocate`, given back once, here (dropped once).
            unsafe {
                deallocate(
                    self.plugin.cb.state,
                    self.local.device_type.0,
                    self.local.device_id,
                    self.handle,
                )
            };
        }
    }
}

// SAFETY: the handle is the plugin's allocation of `bytes` bytes on `device`, valid until this
// value drops; nobody else holds it (exclusive).
unsafe impl TensorStorage for Allocation {
    fn data_ptr(&mut self) -> *mut c_void {
        self.handle
    }
    fn byte_len(&self) -> usize {
        self.bytes
    }
    fn device(&self) -> Device {
        self.memory
    }
}

impl PluginBackend {
    /// Allocates `bytes` on `memory` (the producers' numbering, translated here once): the
    /// handle, owned.
    fn allocate_raw(&self, memory: Device, bytes: usize) -> Result<Allocation, Error> {
        let Some(allocate) = self.cb.allocate else {
            return Err(Error::Backend(BackendError::unsupported(
                self.name,
                "allocation (the plugin has no allocate callback)",
            )));
        };
        let device = Device::new(memory.device_type, self.translate_id(memory.device_id)?);
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: plugin contract; `handle` is writable.
        let status = unsafe {
            allocate(
                self.cb.state,
                device.device_type.0,
                device.device_id,
                bytes,
                &mut handle,
            )
        };
        self.check("allocate", status)?;
        if handle.is_null() {
            return Err(self.lied("allocate", "a NULL handle"));
        }
        let plugin = self.arc();
        Ok(Allocation {
            _owner: Record::new(handle, &plugin),
            handle,
            bytes,
            local: device,
            memory,
            plugin,
        })
    }

    /// A compact tensor of `dtype` and `shape`, allocated on `device` (the producers'
    /// numbering) by the plugin.
    pub(super) fn allocate_compact(
        &self,
        device: Device,
        dtype: DataType,
        shape: &[i64],
    ) -> Result<Tensor, Error> {
        if !self.serves(device) {
            return Err(Error::Backend(BackendError::unsupported(
                self.name,
                "allocation on a device type the plugin does not serve (dlport_backends lists \
                 the device types of each plugin)",
            )));
        }
        // Checked against the process's allocation limit, as every backend's allocation (the
        // plugin's memory is its own: no host alignment is counted).
        let bytes = allocation_bytes(dtype, shape, 1)?;
        let alloc = self.allocate_raw(device, bytes)?;
        let local = alloc.local;
        Tensor::builder(Buffer::new(Box::new(alloc)), self.name, dtype, shape)
            .build()
            .map(|t| t.with_device(local))
    }

    /// A copy of a plugin tensor goes to the plugin that made it (recorded with its buffer,
    /// `owners.rs`), even when this plugin serves the same device type; foreign memory and
    /// host sources are this plugin's to copy.
    pub(super) fn copy_by_maker(
        &self,
        src: &TensorRef<'_>,
        target: Device,
    ) -> Result<Option<Tensor>, Error> {
        let from = src.device();
        if self.serves(from) {
            match owners::owner_of(src.data()) {
                Owner::One(maker) => return maker.copy_host(src, target),
                Owner::Several(names) => return Err(owners::ambiguous(&names, from)),
                Owner::Foreign => {}
            }
        }
        self.copy_host(src, target)
    }

    /// Copies `src` between the plugin's device and the host, either way, through
    /// `copy_to_host` or `allocate` and `copy_from_host`: `None` when neither way applies or
    /// the plugin lacks the callbacks.
    pub(super) fn copy_host(
        &self,
        src: &TensorRef<'_>,
        target: Device,
    ) -> Result<Option<Tensor>, Error> {
        let from = src.device();
        if self.serves(from) && target.device_type == DeviceType::CPU {
            let Some(to_host) = self.cb.copy_to_host else {
                return Ok(None);
            };
            if src.is_subbyte_padded() {
                // The DLTensor a plugin is given has no flags: it would read padded elements
                // as packed ones.
                return Err(Error::Backend(BackendError::unsupported(
                    self.name,
                    "a copy to the host of a sub-byte tensor with IS_SUBBYTE_TYPE_PADDED (a \
                     plugin's copy_to_host is not told of the padding); export it packed",
                )));
            }
            let local = self.translate_id(from.device_id)?;
            let bytes = compact_bytes(src.dtype(), src.shape())?;
            let host = AlignedBuffer::zeroed(bytes, CPU_ALIGN)?;
            let described = Described::of(src, local);
            // SAFETY: plugin contract; `host` is writable for `bytes` bytes and the tensor
            // and its arrays live during the call.
            let status = unsafe {
                to_host(
                    self.cb.state,
                    &described.tensor,
                    host.as_ptr().cast(),
                    bytes,
                    std::ptr::null_mut(),
                )
            };
            self.check("copy_to_host", status)?;
            let t = Tensor::builder(Buffer::new(Box::new(host)), "cpu", src.dtype(), src.shape())
                .build()?;
            return Ok(Some(t));
        }
        if self.serves(target) && from.is_host_accessible() {
            let (Some(from_host), Some(_)) = (self.cb.copy_from_host, self.cb.allocate) else {
                return Ok(None);
            };
            let bytes = compact_bytes(src.dtype(), src.shape())?;
            // A compact row-major, packed source is read in place; any other layout, and
            // padded sub-byte elements (IS_SUBBYTE_TYPE_PADDED), are compacted and packed on
            // the host first, as every host copy does (the plugin receives packed bytes).
            let staged;
            let in_place = src.contiguity().is_row_major() && !src.is_subbyte_padded() && bytes > 0;
            let host: *const c_void = if in_place {
                src.data()
                    .cast::<u8>()
                    .wrapping_add(src.byte_offset() as usize)
                    .cast_const()
                    .cast()
            } else {
                let mut copy = AlignedBuffer::zeroed(bytes, CPU_ALIGN)?;
                src.copy_to_compact(copy.as_mut_slice())?;
                staged = copy;
                staged.as_ptr().cast_const().cast()
            };
            let alloc = self.allocate_raw(target, bytes)?;
            let local = alloc.local;
            let described = Described::compact(alloc.handle, local, src.dtype(), src.shape());
            // SAFETY: plugin contract; `host` is readable for `bytes` bytes (a host-accessible
            // validated view, or the staging copy, both alive here).
            let status = unsafe {
                from_host(
                    self.cb.state,
                    host,
                    bytes,
                    &described.tensor,
                    std::ptr::null_mut(),
                )
            };
            // On error `alloc` drops: deallocate runs once.
            self.check("copy_from_host", status)?;
            let t = Tensor::builder(
                Buffer::new(Box::new(alloc)),
                self.name,
                src.dtype(),
                src.shape(),
            )
            .build()?;
            return Ok(Some(t.with_device(local)));
        }
        Ok(None)
    }
}
