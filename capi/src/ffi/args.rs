//! Argument decoding: out pointers, managed tensors taken from C, copy and device arguments,
//! import options and the ABI's allocation limit.

use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr::NonNull;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{DeviceField, LayoutNeed, ViewRequirements};
use dlport_core::{CopyPolicy, Device, ImportOptions, ManagedTensor, Registry};

use crate::cabi::{DlportCopy, DlportLayout};

use super::status::{Failure, arg};
use super::tracker::refuse_released;

pub(crate) fn out_ptr<T>(out: *mut T, name: &str) -> Result<NonNull<T>, Failure> {
    NonNull::new(out).ok_or_else(|| {
        arg(format!(
            "{name} is NULL: pass a pointer to receive the result"
        ))
    })
}

/// The process-wide default registry: dlport-native's (installed on first use), unless the
/// program that loaded the library installed its own first, which the C ABI then shares.
pub(crate) fn registry() -> &'static Registry {
    dlport_native::install_or_default()
}

/// Takes ownership of a managed tensor from C.
///
/// # Safety
/// `managed` is NULL or an owned managed tensor of the form `versioned` says, handed over.
pub(crate) unsafe fn take(
    managed: *mut c_void,
    versioned: c_int,
) -> Result<ManagedTensor, Failure> {
    refuse_released(managed)?;
    let t = if versioned != 0 {
        // SAFETY: forwarded contract.
        unsafe { ManagedTensor::from_raw_versioned(managed.cast()) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { ManagedTensor::from_raw_legacy(managed.cast()) }
    };
    Ok(t?)
}

pub(crate) fn c_string(s: String, out: NonNull<*mut c_char>) -> Result<(), Failure> {
    let c = CString::new(s).map_err(|_| arg("internal: NUL in a generated string"))?;
    // SAFETY: writable out pointer (caller contract).
    unsafe { out.as_ptr().write(c.into_raw()) };
    Ok(())
}

/// A device given as two C arguments (`names`: the type's and the id's): type 0 means "not
/// given", and then the id must be 0 too (an id with no type would be ignored). A given device
/// obeys the rule of device ids ([`Device::check`]), as every door applies it.
pub(crate) fn device_arg(
    device_type: i32,
    device_id: i32,
    field: DeviceField,
    names: (&str, &str),
) -> Result<Option<Device>, Failure> {
    if device_type == 0 {
        if device_id != 0 {
            return Err(arg(format!(
                "{} = {device_id} with {} = 0 (no device) is contradictory: pass a device type \
                 (kDLCPU = 1, ...) with the id, or 0 for both",
                names.1, names.0
            )));
        }
        return Ok(None);
    }
    Ok(Some(
        Device::new(DeviceType(device_type), device_id).check(field)?,
    ))
}

pub(crate) fn copy_arg(copy: i32) -> Result<CopyPolicy, Failure> {
    match DlportCopy::from_c(copy) {
        Some(DlportCopy::Never) => Ok(CopyPolicy::Never),
        Some(DlportCopy::IfNeeded) => Ok(CopyPolicy::IfNeeded),
        Some(DlportCopy::Always) => Ok(CopyPolicy::Always),
        None => Err(arg(format!(
            "copy = {copy} is invalid: use DLPORT_COPY_NEVER (0), DLPORT_COPY_IF_NEEDED (1) or \
             DLPORT_COPY_ALWAYS (2)"
        ))),
    }
}

/// Import options (`DlportImportOptions` in C). Device types of 0 mean "not given".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DlportImportOptions {
    /// Target device type (0: the data's own device).
    pub target_device_type: i32,
    /// Target device id: non-negative, 0 for `kDLCPU`, and 0 when the type is 0
    /// (`DLPORT_ERR_INVALID_DEVICE` otherwise).
    pub target_device_id: i32,
    /// What `__dlpack_device__` advertised (0: nothing).
    pub advertised_device_type: i32,
    /// Advertised device id, by the same rule as `target_device_id`.
    pub advertised_device_id: i32,
    /// A `DlportCopy`: `DLPORT_COPY_NEVER`, `DLPORT_COPY_IF_NEEDED` or `DLPORT_COPY_ALWAYS`.
    pub copy: i32,
    /// A `DlportLayout`: `DLPORT_LAYOUT_ANY`, `DLPORT_LAYOUT_DENSE` (any axis order) or
    /// `DLPORT_LAYOUT_ROW_MAJOR`.
    pub layout: i32,
    /// Required alignment of the first element in bytes (0 or 1: none; a power of two up to
    /// 2^30). A copy made for the import is aligned to it too.
    pub alignment: u32,
    /// The most bytes a copy made for this import may allocate (0: none of its own). It lowers
    /// the process limit (`dlport_set_alloc_limit`), never raises it.
    pub max_alloc_bytes: u64,
}

/// A call's `max_alloc_bytes` (0: none given). The limit in force is decided by core: the
/// lowest of this, the registry's and the process's (`dlport_set_alloc_limit`).
pub(crate) fn max_alloc_arg(bytes: u64) -> Option<u64> {
    (bytes != 0).then_some(bytes)
}

pub(crate) fn import_options(o: &DlportImportOptions) -> Result<ImportOptions, Failure> {
    let layout = match DlportLayout::from_c(o.layout) {
        Some(DlportLayout::Any) => LayoutNeed::Any,
        Some(DlportLayout::Dense) => LayoutNeed::Dense,
        Some(DlportLayout::RowMajor) => LayoutNeed::RowMajor,
        None => {
            return Err(arg(format!(
                "layout = {} is invalid: use DLPORT_LAYOUT_ANY (0), DLPORT_LAYOUT_DENSE (1) or \
                 DLPORT_LAYOUT_ROW_MAJOR (2)",
                o.layout
            )));
        }
    };
    Ok(ImportOptions {
        device: device_arg(
            o.target_device_type,
            o.target_device_id,
            DeviceField::Requested,
            ("target_device_type", "target_device_id"),
        )?,
        advertised: device_arg(
            o.advertised_device_type,
            o.advertised_device_id,
            DeviceField::Advertised,
            ("advertised_device_type", "advertised_device_id"),
        )?,
        copy: copy_arg(o.copy)?,
        // Checked by the registry (a power of two up to 2^30), and honoured by its copies.
        requirements: Some(ViewRequirements {
            layout,
            alignment: o.alignment.max(1) as usize,
        }),
        max_alloc: max_alloc_arg(o.max_alloc_bytes),
    })
}

pub(crate) fn to_json(value: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|e| arg(format!("internal: {e}")))
}
