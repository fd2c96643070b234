//! The export of a host buffer learnt through an interposed table: readiness awaited, type,
//! dims, layout and size asked of the vendor, an external reference and the pin held until
//! the DLPack deleter runs (once, on any thread), READ_ONLY (the host's arrays are immutable).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Access, TensorStorage};
use dlport_core::{CopyPolicy, DataType, Device, Error, ExportBuilder, ManagedTensor};

use super::super::buffer::{
    await_event, await_ready, device_pointer, dtype_and_shape, plugin_slice, span, strides,
};
use super::super::result::{Api, UNIMPLEMENTED};
use super::super::sys;
use super::{Learnt, room};
use crate::plugin::plugin_error;

/// How many host copies [`export`] made in this process (one per export that copied).
static HOST_COPIES: AtomicUsize = AtomicUsize::new(0);

/// The number of host copies exports made so far (an export that copies counts one).
pub fn host_copies() -> usize {
    HOST_COPIES.load(Ordering::Relaxed)
}

/// The functions a view needs beyond the buffer's description: without any of them the export
/// is a copy (where `copy` allows) or refused, naming it.
const VIEW_NEEDS: [sys::Slot; 3] = [
    sys::BUFFER_INCREASE_EXTERNAL_REF,
    sys::BUFFER_DECREASE_EXTERNAL_REF,
    sys::BUFFER_OPAQUE_POINTER,
];

/// Exports the learnt buffer. A view (`copy` Never or IfNeeded, the plugin offering what a
/// view needs) holds the pin (the host's `Destroy` and `Delete` of the buffer wait for its
/// deleter) and an external reference (`PJRT_Buffer_IncreaseExternalReferenceCount`, given
/// back once in the deleter). A copy (`copy` Always, or IfNeeded where the plugin lacks a
/// function a view needs) is one `PJRT_Buffer_ToHostBuffer` into host memory the export owns,
/// counted by [`host_copies`]; with `copy` Never a missing function is refused by name.
/// `versioned` picks DLPack 1.x, else the legacy form, which cannot carry READ_ONLY: a copy
/// where `copy` allows, else refused.
pub fn export(learnt: Learnt, versioned: bool, copy: CopyPolicy) -> Result<ManagedTensor, Error> {
    let ip = room(learnt.room).ok_or_else(|| {
        plugin_error(
            "pjrt",
            "dlport.jax",
            "export",
            -1,
            &format!("no interposed table in room {}", learnt.room),
        )
    })?;
    let api = ip.vendor;
    let raw = learnt.buffer;
    // SAFETY: the pin keeps the buffer alive.
    unsafe { await_ready(&api, raw) }?;
    // SAFETY: as above.
    let (dtype, shape) = unsafe { dtype_and_shape(&api, raw) }?;
    // A legacy tensor cannot say READ_ONLY: its consumer gets a copy where copies are allowed
    // (core refuses a READ_ONLY legacy export otherwise).
    let copy = match copy {
        CopyPolicy::IfNeeded if !versioned => CopyPolicy::Always,
        c => c,
    };
    let missing = VIEW_NEEDS.iter().find_map(|&slot| api.function(slot).err());
    match (missing, copy) {
        (Some(e), CopyPolicy::Never) => {
            return Err(api.error(
                "dlport.jax export",
                UNIMPLEMENTED,
                &format!(
                    "a view needs what the plugin lacks ({e}); copy=False forbids the host copy"
                ),
            ));
        }
        (Some(_), _) | (None, CopyPolicy::Always) => {
            return host_copy(&api, raw, dtype, &shape, versioned);
        }
        (None, _) => {}
    }
    // SAFETY: as above; `shape` and `dtype` are the buffer's.
    let strides = unsafe { strides(&api, raw, &shape, dtype) }?;
    // SAFETY: as above.
    let span = unsafe { span(&api, raw, &shape, dtype) }?;
    let device = device_of(&api, raw, ip.device_type, ip.client.load(Ordering::Acquire))?;
    let mut a = sys::Buffer_IncreaseExternalReferenceCount_Args::new();
    a.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_IncreaseExternalReferenceCount.
    unsafe { api.buffer_increase_external_ref(&mut a) }?;
    // From here `held` gives the reference back and unpins, once, whatever follows.
    let mut held = HostMemory {
        api,
        learnt,
        data: std::ptr::null_mut(),
        len: span as usize,
        device,
    };
    // SAFETY: the pin keeps the buffer alive, the external reference `held` holds its memory.
    held.data = unsafe { device_pointer(&api, raw, span) }?;
    let builder = ExportBuilder::new(held, dtype, &shape).strides(&strides);
    if versioned {
        builder.read_only(true).build()
    } else {
        builder.build_legacy()
    }
}

/// The buffer copied to host memory the export owns (`PJRT_Buffer_ToHostBuffer`, in the
/// default dense row-major layout), exported as a compact, IS_COPIED CPU tensor.
fn host_copy(
    api: &Api,
    raw: *mut sys::PJRT_Buffer,
    dtype: DataType,
    shape: &[i64],
    versioned: bool,
) -> Result<ManagedTensor, Error> {
    let f = sys::BUFFER_TO_HOST.name;
    let numel = shape.iter().try_fold(1u64, |n, &x| n.checked_mul(x as u64));
    let span = numel
        .and_then(|n| dtype.bytes_for(n, false))
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| api.error(f, -1, "the shape's size overflows"))?;
    let mut a = sys::Buffer_ToHostBuffer_Args::new();
    a.src = raw;
    // SAFETY: the args of PJRT_Buffer_ToHostBuffer with no destination: it says the size.
    unsafe { api.buffer_to_host(&mut a) }?;
    if a.dst_size < span {
        return Err(api.error(
            f,
            -1,
            &format!("asks {} bytes for a shape of {span} bytes", a.dst_size),
        ));
    }
    // Whole u64 words: host memory aligned for every element type but the 16-byte ones.
    let mut host = vec![0u64; a.dst_size.div_ceil(8)];
    a.dst = host.as_mut_ptr().cast();
    a.event = std::ptr::null_mut();
    // SAFETY: the args again, with a destination of `dst_size` bytes that lives until the
    // event is awaited below.
    unsafe { api.buffer_to_host(&mut a) }?;
    if !a.event.is_null() {
        // SAFETY: a live event we own, destroyed once there.
        unsafe { await_event(api, a.event) }?;
    }
    HOST_COPIES.fetch_add(1, Ordering::Relaxed);
    let builder = ExportBuilder::new(host, dtype, shape).copied(true);
    if versioned {
        builder.build()
    } else {
        builder.build_legacy()
    }
}

/// The DLPack device of the buffer: the platform's device type, and its device's place among
/// the host client's addressable devices (0 for host memory, which has one id).
fn device_of(
    api: &Api,
    raw: *mut sys::PJRT_Buffer,
    device_type: DeviceType,
    client: *mut sys::PJRT_Client,
) -> Result<Device, Error> {
    if device_type == DeviceType::CPU {
        return Ok(Device::cpu());
    }
    let mut v = sys::Buffer_Device_Args::new();
    v.buffer = raw;
    // SAFETY: the args of PJRT_Buffer_Device.
    unsafe { api.buffer_device(&mut v) }?;
    if client.is_null() {
        return Err(api.error(
            sys::CLIENT_CREATE.name,
            -1,
            "the host's client was not created through the interposed table: install before \
             the backend is made",
        ));
    }
    let mut d = sys::Client_AddressableDevices_Args::new();
    d.client = client;
    // SAFETY: the args of PJRT_Client_AddressableDevices on the host's live client.
    unsafe { api.client_addressable_devices(&mut d) }?;
    // SAFETY: `num_addressable_devices` pointers, valid while the client lives.
    let devices = unsafe { plugin_slice(d.addressable_devices, d.num_addressable_devices) };
    let id = devices.iter().position(|&x| x == v.device).ok_or_else(|| {
        api.error(
            sys::BUFFER_DEVICE.name,
            -1,
            "returned a device that is not addressable",
        )
    })?;
    Ok(Device::new(device_type, id as i32))
}

/// The host buffer's memory as dlport storage: valid while the external reference and the pin
/// are held; the drop gives the reference back, then unpins (which runs a deferred `Destroy`).
struct HostMemory {
    api: Api,
    learnt: Learnt,
    data: *mut c_void,
    len: usize,
    device: Device,
}

// SAFETY: the pointer is only handed to the consumer; PJRT calls may be made from any thread.
unsafe impl Send for HostMemory {}

impl Drop for HostMemory {
    fn drop(&mut self) {
        let mut a = sys::Buffer_DecreaseExternalReferenceCount_Args::new();
        a.buffer = self.learnt.buffer;
        // SAFETY: the reference taken at export, given back once, here, while the pin (a
        // field, dropped after this) keeps the buffer alive. An error cannot be reported.
        let _ = unsafe { self.api.buffer_decrease_external_ref(&mut a) };
    }
}

// SAFETY: `data` is valid for `len` bytes (checked against the plugin's size) while this value
// lives: the pin keeps the host from destroying or deleting the buffer, and the external
// reference keeps the vendor from moving it. The host's arrays are immutable: READ_ONLY.
unsafe impl TensorStorage for HostMemory {
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
        Access::ReadOnly
    }
}
