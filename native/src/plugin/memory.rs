//! Allocation and host copies: plugin memory owned by an [`Allocation`] (deallocated once,
//! when dropped), and copies between the host and a plugin's device.

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{AlignedBuffer, Buffer, CPU_ALIGN, TensorStorage, compact_bytes};
use dlport_core::error::BackendError;
use dlport_core::{DataType, Device, Error, Tensor, TensorRef};

use super::backend::PluginBackend;
use super::described::Described;

/// A plugin allocation: deallocated once, when dropped.
struct Allocation {
    handle: *mut c_void,
    bytes: usize,
    device: Device,
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
                    self.device.device_type.0,
                    self.device.device_id,
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
        self.device
    }
}

impl PluginBackend {
    /// Allocates `bytes` on `device` (the plugin's numbering): the handle, owned.
    fn allocate_raw(&self, device: Device, bytes: usize) -> Result<Allocation, Error> {
        let Some(allocate) = self.cb.allocate else {
            return Err(Error::Backend(BackendError::unsupported(
                self.name,
                "allocation (the plugin has no allocate callback)",
            )));
        };
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
        Ok(Allocation {
            handle,
            bytes,
            device,
            plugin: self.arc(),
        })
    }

    /// A compact tensor of `dtype` and `shape`, allocated on `device` by the plugin.
    pub(super) fn allocate_compact(
        &self,
        device: Device,
        dtype: DataType,
        shape: &[i64],
    ) -> Result<Tensor, Error> {
        let bytes = compact_bytes(dtype, shape)?;
        let alloc = self.allocate_raw(device, bytes)?;
        Tensor::new(
            Buffer::new(Box::new(alloc)),
            self.name,
            dtype,
            shape,
            None,
            0,
            0,
        )
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
            let t = Tensor::new(
                Buffer::new(Box::new(host)),
                "cpu",
                src.dtype(),
                src.shape(),
                None,
                0,
                0,
            )?;
            return Ok(Some(t));
        }
        if self.serves(target) && from.is_host_accessible() {
            let (Some(from_host), Some(_)) = (self.cb.copy_from_host, self.cb.allocate) else {
                return Ok(None);
            };
            let local = Device::new(target.device_type, self.translate_id(target.device_id)?);
            let bytes = compact_bytes(src.dtype(), src.shape())?;
            // A compact row-major source is read in place; any other layout is compacted on
            // the host first (the plugin receives compact bytes).
            let staged;
            let host: *const c_void = if src.contiguity().is_row_major() && bytes > 0 {
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
            let alloc = self.allocate_raw(local, bytes)?;
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
            let t = Tensor::new(
                Buffer::new(Box::new(alloc)),
                self.name,
                src.dtype(),
                src.shape(),
                None,
                0,
                0,
            )?;
            return Ok(Some(t.with_device(target)));
        }
        Ok(None)
    }
}
