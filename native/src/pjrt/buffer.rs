//! [`PjrtBuffer`]: a PJRT buffer dlport owns (destroyed once, when the last holder is gone),
//! what the plugin says about it (type, dims, layout, size, device), its memory as a dlport
//! tensor under an external reference, and its export by a registry's export.

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DLPackVersion;
use dlport_core::abi::DeviceType;
use dlport_core::backend::{Access, Buffer, TensorStorage};
use dlport_core::{DataType, Device, Error, ExportOptions, ManagedTensor, Registry, Tensor};

use super::client::PjrtClient;
use super::result::Api;
use super::{sys, types};
use crate::plugin::intern;

/// The owner of one `PJRT_Buffer`: destroyed once, when dropped.
pub(super) struct Owned {
    pub(super) raw: *mut sys::PJRT_Buffer,
    pub(super) client: PjrtClient,
    /// For a view of a producer's tensor: its token, and what to call with it once this
    /// destroy has returned (the import room releases the tensor when the plugin's on-delete
    /// callback has run too).
    view: Option<(usize, fn(usize))>,
}

// SAFETY: PJRT buffers may be used and destroyed from any thread (PJRT C API).
unsafe impl Send for Owned {}
// SAFETY: as above; the pointer is only passed to the plugin.
unsafe impl Sync for Owned {}

impl Drop for Owned {
    fn drop(&mut self) {
        let mut a = sys::Buffer_Destroy_Args::new();
        a.buffer = self.raw;
        // SAFETY: the last holder is gone: the buffer is destroyed once, here (a view's
        // on-delete callback runs in it). An error cannot be reported from a drop.
        let _ = unsafe { self.client.api().buffer_destroy(&mut a) };
        if let Some((token, destroyed)) = self.view {
            destroyed(token);
        }
    }
}

/// A PJRT buffer. Clones share it; the last one gone destroys it (`PJRT_Buffer_Destroy`),
/// after every export of it has been released.
#[derive(Clone)]
pub struct PjrtBuffer {
    pub(super) owned: Arc<Owned>,
}

impl core::fmt::Debug for PjrtBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PjrtBuffer")
            .field("raw", &self.owned.raw)
            .finish()
    }
}

/// What the plugin says about a buffer, checked: its DLPack type, shape, strides in elements
/// and the bytes they span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// The element type.
    pub dtype: DataType,
    /// The dims.
    pub shape: Vec<i64>,
    /// The strides in elements, from the plugin's layout.
    pub strides: Vec<i64>,
    /// The bytes the layout spans.
    pub span: u64,
    /// The DLPack device of its memory: the client's device type and the PJRT device's index,
    /// or kDLCPU 0 on a CPU platform (host memory, whichever PJRT device it lives on).
    pub device: Device,
}

impl PjrtBuffer {
    /// Takes ownership of a buffer the plugin returned from `function`; NULL is the plugin's
    /// lie.
    pub(super) fn adopt(
        client: &PjrtClient,
        raw: *mut sys::PJRT_Buffer,
        function: &'static str,
    ) -> Result<Self, Error> {
        Self::adopt_view(client, raw, function, None)
    }

    /// As [`adopt`](Self::adopt), for a view whose producer's tensor waits under a token of
    /// the import room (`view`: the token and the function to call with it after the destroy).
    pub(super) fn adopt_view(
        client: &PjrtClient,
        raw: *mut sys::PJRT_Buffer,
        function: &'static str,
        view: Option<(usize, fn(usize))>,
    ) -> Result<Self, Error> {
        if raw.is_null() {
            return Err(client.api().error(function, -1, "returned a NULL buffer"));
        }
        Ok(Self {
            owned: Arc::new(Owned {
                raw,
                client: client.clone(),
                view,
            }),
        })
    }

    fn api(&self) -> &Api {
        self.owned.client.api()
    }

    /// The raw `PJRT_Buffer*` (for calls dlport does not wrap); it lives while `self` does.
    pub fn as_raw(&self) -> *mut c_void {
        self.owned.raw.cast()
    }

    /// The client.
    pub fn client(&self) -> &PjrtClient {
        &self.owned.client
    }

    /// Waits until the buffer's data is ready (`PJRT_Buffer_ReadyEvent`, `PJRT_Event_Await`).
    pub fn await_ready(&self) -> Result<(), Error> {
        // SAFETY: the buffer lives while `self` does.
        unsafe { await_ready(self.api(), self.owned.raw) }
    }

    /// The buffer's element type and dims, as the plugin reports them (checked).
    pub(super) fn dtype_and_shape(&self) -> Result<(DataType, Vec<i64>), Error> {
        // SAFETY: the buffer lives while `self` does.
        unsafe { dtype_and_shape(self.api(), self.owned.raw) }
    }

    /// The buffer's type, dims, layout (asked of the plugin, never assumed), its size checked
    /// against the layout's span, and its device.
    pub fn info(&self) -> Result<BufferInfo, Error> {
        let api = self.api();
        let raw = self.owned.raw;
        // SAFETY: the buffer lives while `self` does.
        let (dtype, shape) = unsafe { dtype_and_shape(api, raw) }?;
        // SAFETY: as above; `shape` and `dtype` are the buffer's.
        let strides = unsafe { strides(api, raw, &shape, dtype) }?;
        // SAFETY: as above.
        let span = unsafe { span(api, raw, &shape, dtype) }?;
        let mut v = sys::Buffer_Device_Args::new();
        v.buffer = raw;
        // SAFETY: the args of PJRT_Buffer_Device.
        unsafe { api.buffer_device(&mut v) }?;
        let client = &self.owned.client;
        let f = sys::BUFFER_DEVICE.name;
        let id = client
            .index_of(v.device)
            .ok_or_else(|| api.error(f, -1, "returned a device that is not addressable"))?;
        // Host memory is kDLCPU device 0 whichever PJRT device holds it (DLPack has one host).
        let device = if client.device_type() == DeviceType::CPU {
            Device::cpu()
        } else {
            Device::new(client.device_type(), id)
        };
        Ok(BufferInfo {
            dtype,
            shape,
            strides,
            span,
            device,
        })
    }

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
        let name = intern(&format!("pjrt:{}", self.owned.client.platform()));
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

    /// Exports the buffer without a copy by the process-wide default registry's export
    /// ([`to_dlpack_with`](Self::to_dlpack_with)); `versioned` picks the DLPack 1.x form,
    /// else the legacy one.
    pub fn to_dlpack(&self, versioned: bool) -> Result<ManagedTensor, Error> {
        let options = ExportOptions {
            max_version: versioned.then_some(DLPackVersion::CURRENT),
            ..ExportOptions::default()
        };
        self.to_dlpack_with(crate::install_or_default(), &options)
    }
}

/// Awaits and destroys an event (its error, if any, is the call's).
///
/// # Safety
/// `event` is a live event of this plugin, owned by the caller and not used afterwards.
pub(super) unsafe fn await_event(api: &Api, event: *mut sys::PJRT_Event) -> Result<(), Error> {
    let mut w = sys::Event_Await_Args::new();
    w.event = event;
    // SAFETY: the args of PJRT_Event_Await.
    let awaited = unsafe { api.event_await(&mut w) };
    let mut d = sys::Event_Destroy_Args::new();
    d.event = event;
    // SAFETY: the event is destroyed once, here.
    let destroyed = unsafe { api.event_destroy(&mut d) };
    awaited.and(destroyed)
}

/// Waits until `raw`'s data is ready (`PJRT_Buffer_ReadyEvent`, `PJRT_Event_Await`).
///
/// # Safety
/// `raw` is a live buffer of `api`'s plugin.
pub(super) unsafe fn await_ready(api: &Api, raw: *mut sys::PJRT_Buffer) -> Result<(), Error> {
    let mut r = sys::Buffer_ReadyEvent_Args::new();
    r.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_ReadyEvent; the buffer lives (caller).
    unsafe { api.buffer_ready_event(&mut r) }?;
    if r.event.is_null() {
        return Err(api.error(sys::BUFFER_READY_EVENT.name, -1, "returned a NULL event"));
    }
    // SAFETY: a live event we own, destroyed once there.
    unsafe { await_event(api, r.event) }
}

/// `raw`'s element type as a DLPack dtype (`PJRT_Buffer_ElementType`, the explicit map of
/// `types`) and its dims (`PJRT_Buffer_Dimensions`: at most 64, none negative).
///
/// # Safety
/// `raw` is a live buffer of `api`'s plugin.
pub(super) unsafe fn dtype_and_shape(
    api: &Api,
    raw: *mut sys::PJRT_Buffer,
) -> Result<(DataType, Vec<i64>), Error> {
    let mut t = sys::Buffer_ElementType_Args::new();
    t.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_ElementType; the buffer lives (caller).
    unsafe { api.buffer_element_type(&mut t) }?;
    let dtype =
        types::to_dlpack(t.kind).map_err(|e| api.error(sys::BUFFER_ELEMENT_TYPE.name, -1, &e))?;
    let mut d = sys::Buffer_Dimensions_Args::new();
    d.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_Dimensions; the buffer lives (caller).
    unsafe { api.buffer_dimensions(&mut d) }?;
    if d.num_dims > 64 || (d.dims.is_null() && d.num_dims > 0) {
        return Err(api.error(
            sys::BUFFER_DIMENSIONS.name,
            -1,
            &format!("returned num_dims {} with dims {:?}", d.num_dims, d.dims),
        ));
    }
    // SAFETY: `num_dims` values, valid while the buffer lives (header).
    let shape = unsafe { plugin_slice(d.dims, d.num_dims) }.to_vec();
    if let Some(bad) = shape.iter().find(|&&x| x < 0) {
        return Err(api.error(
            sys::BUFFER_DIMENSIONS.name,
            -1,
            &format!("returned a dim {bad}"),
        ));
    }
    Ok((dtype, shape))
}

/// `raw`'s strides in elements, from `PJRT_Buffer_GetMemoryLayout`: a tiled layout without
/// tiles (its minor-to-major order), or byte strides that divide into whole, non-negative
/// elements. Tiles are refused: DLPack has no tiled layout.
///
/// # Safety
/// `raw` is a live buffer of `api`'s plugin, of `shape` and `dtype`.
pub(super) unsafe fn strides(
    api: &Api,
    raw: *mut sys::PJRT_Buffer,
    shape: &[i64],
    dtype: DataType,
) -> Result<Vec<i64>, Error> {
    let mut l = sys::Buffer_GetMemoryLayout_Args::new();
    l.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_GetMemoryLayout; the buffer lives (caller).
    unsafe { api.buffer_get_memory_layout(&mut l) }?;
    let n = shape.len();
    let lie = |what: String| api.error(sys::BUFFER_GET_MEMORY_LAYOUT.name, -1, &what);
    match l.layout.kind {
        sys::LAYOUT_TILED => {
            // SAFETY: the plugin wrote the tiled member (kind says so).
            let t = unsafe { l.layout.u.tiled };
            if t.num_tiles != 0 {
                return Err(lie(format!(
                    "a tiled layout with {} tiles: DLPack has no tiled layout, so the buffer \
                     cannot be exported as a view",
                    t.num_tiles
                )));
            }
            if t.minor_to_major_size != n || (n > 0 && t.minor_to_major.is_null()) {
                return Err(lie(format!(
                    "minor_to_major has {} entries for {n} dims",
                    t.minor_to_major_size
                )));
            }
            // SAFETY: `minor_to_major_size` values, valid while the buffer lives.
            let order = unsafe { plugin_slice(t.minor_to_major, n) };
            let mut out = vec![0i64; n];
            let mut seen = vec![false; n];
            let mut step = 1i64;
            for &axis in order {
                let Some(a) = usize::try_from(axis).ok().filter(|&a| a < n && !seen[a]) else {
                    return Err(lie(format!(
                        "minor_to_major {order:?} is not a permutation"
                    )));
                };
                seen[a] = true;
                out[a] = step;
                step = step.saturating_mul(shape[a].max(1));
            }
            Ok(out)
        }
        sys::LAYOUT_STRIDES => {
            // SAFETY: the plugin wrote the strides member (kind says so).
            let s = unsafe { l.layout.u.strides };
            let size = dtype.size_bytes() as i64;
            if s.num_byte_strides != n || (n > 0 && s.byte_strides.is_null()) || dtype.is_sub_byte()
            {
                return Err(lie(format!(
                    "{} byte strides for {n} dims of {dtype}",
                    s.num_byte_strides
                )));
            }
            // SAFETY: `num_byte_strides` values, valid while the buffer lives.
            let bytes = unsafe { plugin_slice(s.byte_strides, n) };
            if bytes.iter().any(|b| b % size != 0 || *b < 0) {
                return Err(lie(format!(
                    "byte strides {bytes:?} are not non-negative multiples of {dtype}'s {size} \
                     bytes"
                )));
            }
            Ok(bytes.iter().map(|b| b / size).collect())
        }
        k => Err(lie(format!(
            "layout type {k} is neither tiled (0) nor strides (1)"
        ))),
    }
}

/// The bytes `shape` of `dtype` spans, checked against `raw`'s size on the device
/// (`PJRT_Buffer_OnDeviceSizeInBytes`): a smaller buffer is the plugin's lie.
///
/// # Safety
/// `raw` is a live buffer of `api`'s plugin.
pub(super) unsafe fn span(
    api: &Api,
    raw: *mut sys::PJRT_Buffer,
    shape: &[i64],
    dtype: DataType,
) -> Result<u64, Error> {
    let dims = sys::BUFFER_DIMENSIONS.name;
    let numel = shape.iter().try_fold(1u64, |n, &x| n.checked_mul(x as u64));
    let span = numel
        .and_then(|n| dtype.bytes_for(n, false))
        .ok_or_else(|| api.error(dims, -1, "the shape's size overflows"))?;
    let mut s = sys::Buffer_OnDeviceSizeInBytes_Args::new();
    s.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_OnDeviceSizeInBytes; the buffer lives (caller).
    unsafe { api.buffer_on_device_size(&mut s) }?;
    if (s.on_device_size_in_bytes as u64) < span {
        return Err(api.error(
            sys::BUFFER_ON_DEVICE_SIZE.name,
            -1,
            &format!(
                "the buffer has {} bytes, smaller than its shape {shape:?} of {dtype} ({span} \
                 bytes)",
                s.on_device_size_in_bytes
            ),
        ));
    }
    Ok(span)
}

/// `raw`'s memory (`PJRT_Buffer_OpaqueDeviceMemoryDataPointer`); NULL for a non-empty buffer
/// (`span` bytes) is refused: a plugin that stubs what a view needs.
///
/// # Safety
/// `raw` is a live buffer of `api`'s plugin, under an external reference the caller holds
/// while the pointer is used.
pub(super) unsafe fn device_pointer(
    api: &Api,
    raw: *mut sys::PJRT_Buffer,
    span: u64,
) -> Result<*mut c_void, Error> {
    let mut p = sys::Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
    p.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_OpaqueDeviceMemoryDataPointer; the external reference
    // keeps the pointer valid (header).
    unsafe { api.buffer_opaque_pointer(&mut p) }?;
    if p.device_memory_ptr.is_null() && span > 0 {
        return Err(api.error(
            sys::BUFFER_OPAQUE_POINTER.name,
            -1,
            "returned a NULL device pointer for a non-empty buffer: the plugin stubs what a \
             view needs",
        ));
    }
    Ok(p.device_memory_ptr)
}

/// The `n` values a plugin returned at `p` as a slice: empty where `n` is 0 or `p` is NULL (a
/// NULL array of `n` > 0 values is the caller's to refuse first, where it is a lie).
///
/// # Safety
/// Where `n` > 0 and `p` is not NULL, `p` points to `n` initialized values that stay valid
/// and unchanged for `'a` (while the buffer or client that owns them lives).
pub(super) unsafe fn plugin_slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        return &[];
    }
    // SAFETY: `n` values at `p`, valid for `'a` (caller).
    unsafe { std::slice::from_raw_parts(p, n) }
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
