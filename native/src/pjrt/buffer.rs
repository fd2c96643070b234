//! [`PjrtBuffer`]: a PJRT buffer dlport owns (destroyed once, when the last holder is gone),
//! and what the plugin says about it (type, dims, layout, size, device); its DLPack export is
//! in the interop room (`crate::interop::pjrt`).

use std::ffi::c_void;
use std::sync::Arc;

use dlport_core::abi::DeviceType;
use dlport_core::{DataType, Device, Error};

use super::client::PjrtClient;
use super::result::Api;
use super::{sys, types};

/// The owner of one `PJRT_Buffer`: destroyed once, when dropped.
pub(crate) struct Owned {
    pub(crate) raw: *mut sys::PJRT_Buffer,
    pub(crate) client: PjrtClient,
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
    pub(crate) owned: Arc<Owned>,
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
    pub(crate) fn adopt(
        client: &PjrtClient,
        raw: *mut sys::PJRT_Buffer,
        function: &'static str,
    ) -> Result<Self, Error> {
        Self::adopt_view(client, raw, function, None)
    }

    /// As [`adopt`](Self::adopt), for a view whose producer's tensor waits under a token of
    /// the import room (`view`: the token and the function to call with it after the destroy).
    pub(crate) fn adopt_view(
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

    pub(crate) fn api(&self) -> &Api {
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
    pub(crate) fn dtype_and_shape(&self) -> Result<(DataType, Vec<i64>), Error> {
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
}

/// Awaits and destroys an event (its error, if any, is the call's).
///
/// # Safety
/// `event` is a live event of this plugin, owned by the caller and not used afterwards.
pub(crate) unsafe fn await_event(api: &Api, event: *mut sys::PJRT_Event) -> Result<(), Error> {
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
pub(crate) unsafe fn await_ready(api: &Api, raw: *mut sys::PJRT_Buffer) -> Result<(), Error> {
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
pub(crate) unsafe fn dtype_and_shape(
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
pub(crate) unsafe fn strides(
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
pub(crate) unsafe fn span(
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
pub(crate) unsafe fn device_pointer(
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
pub(crate) unsafe fn plugin_slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        return &[];
    }
    // SAFETY: `n` values at `p`, valid for `'a` (caller).
    unsafe { std::slice::from_raw_parts(p, n) }
}
