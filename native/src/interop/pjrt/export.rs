//! PJRT → DLPack: a [`PjrtBuffer`]'s memory as a dlport [`Tensor`] under an external
//! reference ([`PjrtBuffer::to_tensor`]), exported by a registry's export
//! ([`PjrtBuffer::to_dlpack_with`], `Registry::to_dlpack`: the same `copy`, `dl_device`,
//! `max_version`, `max_alloc` and `stream` rules as every export), and [`BufferMemory`], the
//! storage that keeps a buffer's memory in place for a dlport tensor (an export's, or an
//! import's view).

use std::ffi::c_void;

use dlport_core::backend::{Access, Buffer, TensorStorage};
use dlport_core::{Device, Error, ExportOptions, ManagedTensor, Registry, Tensor};

use crate::pjrt::buffer::device_pointer;
use crate::pjrt::{PjrtBuffer, sys};

impl PjrtBuffer {
    /// The buffer's memory as a dlport [`Tensor`] of backend `pjrt:<platform>`, without a
    /// copy: waits until it is ready, asks the plugin its layout, takes an external reference
    /// and the device pointer. The tensor holds the buffer: dropping its last share gives the
    /// reference back (`PJRT_Buffer_DecreaseExternalReferenceCount`) once, then its share of
    /// the buffer (the last share destroys it).
    pub fn to_tensor(&self) -> Result<Tensor, Error> {
        self.await_ready()?;
        let info = self.info()?;
        let api = self.api();
        for slot in [
            sys::BUFFER_DECREASE_EXTERNAL_REF,
            sys::BUFFER_OPAQUE_POINTER,
        ] {
            api.function(slot)?;
        }
        let mut a = sys::Buffer_IncreaseExternalReferenceCount_Args::new();
        a.buffer = self.owned.raw;
        // SAFETY: the args of PJRT_Buffer_IncreaseExternalReferenceCount.
        unsafe { api.buffer_increase_external_ref(&mut a) }?;
        // From here the reference is held by `held`: any error drops it once.
        let mut held = BufferMemory {
            buffer: self.clone(),
            data: std::ptr::null_mut(),
            len: info.span as usize,
            device: info.device,
            external_ref: true,
        };
        // SAFETY: the buffer lives, under the external reference `held` holds.
        held.data = unsafe { device_pointer(api, self.owned.raw, info.span) }?;
        let name = self.owned.client.backend_name();
        Tensor::builder(Buffer::new(Box::new(held)), name, info.dtype, &info.shape)
            .strides(&info.strides)
            .build()
    }

    /// Exports the buffer by `registry`'s export ([`Registry::to_dlpack`] of
    /// [`to_tensor`](Self::to_tensor)): the same rules as every exporter's for `copy`,
    /// `dl_device`, `max_version`, `max_alloc` and the consumer's `stream`. Without a copy,
    /// the export holds the buffer under an external reference until its deleter runs.
    pub fn to_dlpack_with(
        &self,
        registry: &Registry,
        options: &ExportOptions,
    ) -> Result<ManagedTensor, Error> {
        registry.to_dlpack(&self.to_tensor()?, options)
    }
}

/// A PJRT buffer's memory as dlport storage: `data`, `len` bytes on `device`, kept valid by a
/// share of `buffer`. An export also holds the buffer's external reference, taken before this
/// value is made and given back once, when it drops, before the share of the buffer goes; an
/// import's view holds the producer's tensor itself (the plugin's on-delete callback releases
/// it when the view, the last share, is destroyed).
pub(super) struct BufferMemory {
    buffer: PjrtBuffer,
    data: *mut c_void,
    len: usize,
    device: Device,
    external_ref: bool,
}

impl BufferMemory {
    /// The memory of a view the plugin made of `device`'s memory at `data` (`len` bytes).
    pub(super) fn of_view(
        buffer: PjrtBuffer,
        data: *mut c_void,
        len: usize,
        device: Device,
    ) -> Self {
        Self {
            buffer,
            data,
            len,
            device,
            external_ref: false,
        }
    }
}

// SAFETY: the pointer is memory the buffer keeps in place (device memory or the producer's),
// only handed to the consumer; PJRT buffers may be used and dropped from any thread.
unsafe impl Send for BufferMemory {}

impl Drop for BufferMemory {
    fn drop(&mut self) {
        if !self.external_ref {
            return;
        }
        let mut a = sys::Buffer_DecreaseExternalReferenceCount_Args::new();
        a.buffer = self.buffer.owned.raw;
        // SAFETY: the reference taken at export, given back once, here, before the share of
        // the buffer goes (a field, dropped after this). An error cannot be reported here.
        let _ = unsafe { self.buffer.api().buffer_decrease_external_ref(&mut a) };
    }
}

// SAFETY: `data` is valid for `len` bytes (the plugin's size for an export, the view's span
// for an import, each checked against the layout's span) as long as this value lives: the
// external reference or the view keeps it in place. Other holders of the buffer (executions)
// may write it: the access is shared.
unsafe impl TensorStorage for BufferMemory {
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
