//! The probe's raw calls: each PJRT function called with its own args on buffers the probe
//! makes (and destroys), and the outcome of a call in a few words.

use std::ffi::c_void;

use dlport_core::backend::{AlignedBuffer, TensorStorage};
use dlport_core::{DataType, Device, Error, ExportBuilder, ManagedTensor};

use super::super::buffer::await_event;
use super::super::client::PjrtClient;
use super::super::result::{Api, is_unimplemented};
use super::super::sys;

/// The `PJRT_Buffer_Type` of f32 (the probe's tensors are f32 where the dtype is not the
/// question).
pub(super) const F32: i32 = 11;

/// The plugin's answer in a few words: implemented, or not (a missing slot, a NULL slot or
/// `UNIMPLEMENTED`), or another failure.
pub(super) fn outcome<T>(r: &Result<T, Error>) -> (&'static str, String) {
    match r {
        Ok(_) => ("implemented", String::new()),
        Err(e) => (
            if is_unimplemented(e) {
                "not implemented"
            } else {
                "fails"
            },
            e.to_string(),
        ),
    }
}

/// A buffer the probe made with a raw call, destroyed on drop.
pub(super) struct Raw<'a> {
    api: &'a Api,
    pub(super) raw: *mut sys::PJRT_Buffer,
}

impl Drop for Raw<'_> {
    fn drop(&mut self) {
        let mut a = sys::Buffer_Destroy_Args::new();
        a.buffer = self.raw;
        // SAFETY: a buffer the probe owns, destroyed once, here; an error cannot be reported
        // from a drop.
        let _ = unsafe { self.api.buffer_destroy(&mut a) };
    }
}

/// The on-delete callback of the probe's own views: the memory is the probe's, freed after the
/// view is destroyed, so there is nothing to release.
unsafe extern "C" fn nothing(_data: *mut c_void, _arg: *mut c_void) {}

/// 64-byte-aligned host memory from `offset` on, for the probe's tensors.
struct Host {
    buf: AlignedBuffer,
    offset: usize,
}

// SAFETY: the AlignedBuffer's memory, owned alone, from `offset` to its end.
unsafe impl TensorStorage for Host {
    fn data_ptr(&mut self) -> *mut c_void {
        // SAFETY: offset <= len.
        unsafe { self.buf.as_ptr().add(self.offset).cast() }
    }
    fn byte_len(&self) -> usize {
        self.buf.len() - self.offset
    }
    fn device(&self) -> Device {
        Device::cpu()
    }
}

/// A host tensor of f32 `0, 1, …` shaped `shape`, `offset` bytes past 64-byte alignment, and
/// the address of its first element.
pub(super) fn host_tensor(
    shape: &[i64],
    offset: usize,
    read_only: bool,
    column_major: bool,
) -> Result<(ManagedTensor, usize), Error> {
    let n: i64 = shape.iter().product();
    let mut buf = AlignedBuffer::zeroed(offset + 4 * n as usize + 64, 64)?;
    for i in 0..n as usize {
        let at = offset + 4 * i;
        buf.as_mut_slice()[at..at + 4].copy_from_slice(&(i as f32).to_ne_bytes());
    }
    let address = buf.as_ptr() as usize + offset;
    let mut b = ExportBuilder::new(Host { buf, offset }, DataType::FLOAT32, shape);
    if column_major {
        let mut strides = vec![1i64; shape.len()];
        for d in 1..shape.len() {
            strides[d] = strides[d - 1] * shape[d - 1];
        }
        b = b.strides(&strides);
    }
    Ok((b.read_only(read_only).build()?, address))
}

/// The probe's raw calls on one client.
pub(super) struct Calls<'a> {
    pub(super) client: &'a PjrtClient,
    pub(super) api: &'a Api,
    pub(super) device: *mut sys::PJRT_Device,
}

impl<'a> Calls<'a> {
    /// `PJRT_Client_BufferFromHostBuffer` of `dims` elements of `kind` at `data` (copied during
    /// the call).
    pub(super) fn copy_of_host(
        &self,
        data: *const c_void,
        kind: i32,
        dims: &[i64],
    ) -> Result<Raw<'a>, Error> {
        let mut a = sys::Client_BufferFromHostBuffer_Args::new();
        a.client = self.client.inner.raw;
        a.data = data;
        a.kind = kind;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.host_buffer_semantics = sys::HOST_COPY_DURING_CALL;
        // XLA's CPU plugin crashes with neither a device nor a memory: always one.
        a.device = self.device;
        // SAFETY: `data` holds at least `dims`' elements of `kind` (the caller's 64 bytes or
        // more, one byte per sub-byte element at most 16), read during the call and until the
        // done event, awaited below.
        unsafe { self.api.client_buffer_from_host_buffer(&mut a) }?;
        if !a.done_with_host_buffer.is_null() {
            // SAFETY: an event we own, awaited and destroyed once.
            unsafe { await_event(self.api, a.done_with_host_buffer) }?;
        }
        self.own(a.buffer, sys::CLIENT_BUFFER_FROM_HOST_BUFFER)
    }

    /// `PJRT_Client_CreateViewOfDeviceBuffer` of `dims` elements of `kind` at `data`.
    pub(super) fn view(
        &self,
        data: *mut c_void,
        kind: i32,
        dims: &[i64],
    ) -> Result<Raw<'a>, Error> {
        let mut a = sys::Client_CreateViewOfDeviceBuffer_Args::new();
        a.client = self.client.inner.raw;
        a.device_buffer_ptr = data;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.element_type = kind;
        a.device = self.device;
        a.on_delete_callback = Some(nothing);
        // SAFETY: `data` outlives the view (the caller drops the view first), and the
        // on-delete callback does nothing.
        unsafe { self.api.client_create_view(&mut a) }?;
        self.own(a.buffer, sys::CLIENT_CREATE_VIEW)
    }

    fn own(&self, raw: *mut sys::PJRT_Buffer, slot: sys::Slot) -> Result<Raw<'a>, Error> {
        if raw.is_null() {
            return Err(self.api.error(slot.name, -1, "returned a NULL buffer"));
        }
        Ok(Raw { api: self.api, raw })
    }

    /// The memory kinds of the device (`PJRT_Device_AddressableMemories`, `PJRT_Memory_Kind`).
    pub(super) fn memory_kinds(&self) -> Result<Vec<String>, Error> {
        let mut a = sys::Device_AddressableMemories_Args::new();
        a.device = self.device;
        // SAFETY: a live device of this client.
        unsafe { self.api.device_addressable_memories(&mut a) }?;
        let mut kinds = Vec::new();
        for i in 0..if a.memories.is_null() {
            0
        } else {
            a.num_memories
        } {
            let mut k = sys::Memory_Kind_Args::new();
            // SAFETY: `num_memories` pointers, living as long as the device (header).
            k.memory = unsafe { *a.memories.add(i) };
            // SAFETY: a live memory of the device.
            unsafe { self.api.memory_kind(&mut k) }?;
            kinds.push(if k.kind.is_null() {
                "(NULL)".to_owned()
            } else {
                // SAFETY: `kind_size` bytes living as long as the memory (header).
                let b = unsafe { std::slice::from_raw_parts(k.kind.cast::<u8>(), k.kind_size) };
                String::from_utf8_lossy(b).into_owned()
            });
        }
        Ok(kinds)
    }

    /// Calls each buffer function dlport's export uses on `b`: `(function, outcome, why)`.
    pub(super) fn buffer_functions(
        &self,
        b: &Raw<'_>,
    ) -> Vec<(&'static str, &'static str, String)> {
        let api = self.api;
        let mut out = Vec::new();
        let mut u = sys::Buffer_UnsafePointer_Args::new();
        u.buffer = b.raw;
        // SAFETY: a live buffer; each call below takes its own args struct.
        let r = unsafe { api.buffer_unsafe_pointer(&mut u) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_UNSAFE_POINTER.name, v, why));
        let mut s = sys::Buffer_OnDeviceSizeInBytes_Args::new();
        s.buffer = b.raw;
        // SAFETY: as above.
        let r = unsafe { api.buffer_on_device_size(&mut s) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_ON_DEVICE_SIZE.name, v, why));
        let mut e = sys::Buffer_ReadyEvent_Args::new();
        e.buffer = b.raw;
        // SAFETY: as above; the event is awaited and destroyed once.
        let r = unsafe { api.buffer_ready_event(&mut e) }.and_then(|()| {
            if e.event.is_null() {
                return Err(api.error(sys::BUFFER_READY_EVENT.name, -1, "a NULL event"));
            }
            // SAFETY: an event we own.
            unsafe { await_event(api, e.event) }
        });
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_READY_EVENT.name, v, why));
        let mut l = sys::Buffer_GetMemoryLayout_Args::new();
        l.buffer = b.raw;
        // SAFETY: as above.
        let r = unsafe { api.buffer_get_memory_layout(&mut l) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_GET_MEMORY_LAYOUT.name, v, why));
        let mut i = sys::Buffer_IncreaseExternalReferenceCount_Args::new();
        i.buffer = b.raw;
        // SAFETY: as above; a reference taken here is given back below.
        let inc = unsafe { api.buffer_increase_external_ref(&mut i) };
        let (v, why) = outcome(&inc);
        out.push((sys::BUFFER_INCREASE_EXTERNAL_REF.name, v, why));
        let mut o = sys::Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
        o.buffer = b.raw;
        // SAFETY: as above.
        let r = unsafe { api.buffer_opaque_pointer(&mut o) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_OPAQUE_POINTER.name, v, why));
        if inc.is_ok() {
            let mut d = sys::Buffer_DecreaseExternalReferenceCount_Args::new();
            d.buffer = b.raw;
            // SAFETY: the reference taken above, given back once.
            let r = unsafe { api.buffer_decrease_external_ref(&mut d) };
            let (v, why) = outcome(&r);
            out.push((sys::BUFFER_DECREASE_EXTERNAL_REF.name, v, why));
        }
        out
    }

    /// The buffer's data pointer, as the plugin tells it (opaque, else unsafe pointer).
    pub(super) fn pointer(&self, raw: *mut sys::PJRT_Buffer) -> Option<usize> {
        let mut o = sys::Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
        o.buffer = raw;
        // SAFETY: a live buffer.
        if unsafe { self.api.buffer_opaque_pointer(&mut o) }.is_ok() {
            return Some(o.device_memory_ptr as usize);
        }
        let mut u = sys::Buffer_UnsafePointer_Args::new();
        u.buffer = raw;
        // SAFETY: a live buffer.
        unsafe { self.api.buffer_unsafe_pointer(&mut u) }
            .ok()
            .map(|()| u.buffer_pointer)
    }
}
