//! Backend tensors held by C (`DlportTensor`): allocation, description, data and views.

use std::ffi::{CStr, c_char, c_int, c_void};

use dlport_core::abi::{DLTensor, DeviceType};
use dlport_core::backend::{CompactOptions, DeviceField, check_alignment};
use dlport_core::error::LayoutError;
use dlport_core::{DataType, Device, Error, Tensor};

use super::args::{c_string, copy_arg, max_alloc_arg, out_ptr, registry, to_json};
use super::library::Description;
use super::status::{arg, entry};

/// A backend tensor held by C code. Free with `dlport_tensor_free`.
pub struct DlportTensor(pub(crate) Tensor);

/// Allocates a zeroed compact tensor on a backend of the native registry (`backend` NULL: the
/// one that serves the device): the registry's allocation, which checks the size against the
/// allocation limit in force (the registry's and the process's, `dlport_set_alloc_limit`)
/// before the backend is asked: `DLPORT_ERR_ALLOCATION_LIMIT` over it, nothing allocated.
///
/// Ownership: `backend` and `shape` stay the caller's. On success `*out` is a new handle the
/// caller frees with `dlport_tensor_free`; on error nothing is allocated or written.
///
/// # Safety
/// `backend` NULL or a NUL-terminated string; `shape` readable for `ndim` values (may be NULL
/// when `ndim` is 0); `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_alloc(
    backend: *const c_char,
    device_type: i32,
    device_id: i32,
    code: u8,
    bits: u8,
    lanes: u16,
    shape: *const i64,
    ndim: i32,
    out: *mut *mut DlportTensor,
) -> c_int {
    entry(|| {
        let out = out_ptr(out, "out")?;
        let n = dlport_core::layout::check_ndim(i64::from(ndim))?;
        if n > 0 && shape.is_null() {
            return Err(Error::Layout(LayoutError::NullShape { ndim }).into());
        }
        let shape = if n == 0 {
            &[][..]
        } else {
            // SAFETY: `n` readable values (contract), bounded by MAX_NDIM.
            unsafe { std::slice::from_raw_parts(shape, n) }
        };
        let device =
            Device::new(DeviceType(device_type), device_id).check(DeviceField::Requested)?;
        let r = registry();
        let b: dlport_core::backend::BackendRef = if backend.is_null() {
            r.resolve(device)?.clone()
        } else {
            // SAFETY: NUL-terminated (contract).
            let name = unsafe { CStr::from_ptr(backend) }
                .to_str()
                .map_err(|_| arg("backend is not UTF-8"))?;
            // The names dlport_backends lists: the registry's backends, then the plugins of
            // its plugin table.
            let plugin = dlport_native::plugin::plugins()
                .into_iter()
                .find(|p| dlport_core::backend::Backend::name(p.as_ref()) == name);
            match (r.get(name), plugin) {
                (Some(b), _) => b.clone(),
                (None, Some(p)) => p,
                (None, None) => {
                    let listed = dlport_native::plugin::backends();
                    let names: Vec<&str> = listed.iter().map(|b| b.name).collect();
                    return Err(arg(format!(
                        "backend \"{name}\" is not registered; registered: {}",
                        names.join(", ")
                    )));
                }
            }
        };
        let dtype = DataType::new(dlport_core::abi::TypeCode(code), bits, lanes);
        // The registry's allocation: the limit in force is checked there, before the backend
        // is asked.
        let t = r.allocate_on(b.as_ref(), device, dtype, shape)?;
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(Box::into_raw(Box::new(DlportTensor(t)))) };
        Ok(())
    })
}

/// A row-major compact tensor with `tensor`'s elements, on its device: the registry's
/// compaction (`Registry::compact`, which `dlport_compact` uses too).
/// `alignment` is the first element's alignment in bytes (0: 64 in host-accessible memory,
/// none on a device; else a power of two up to 2^30, `DLPORT_ERR_INVALID_OPTION` otherwise);
/// `copy` is a `DlportCopy`: with `DLPORT_COPY_IF_NEEDED` a tensor that is already row-major,
/// packed and aligned comes back as a new handle onto the same memory, otherwise as a copy with
/// IS_COPIED; with `DLPORT_COPY_NEVER` a tensor that needs a copy is
/// `DLPORT_ERR_COPY_REQUIRED`. `max_alloc_bytes` (0: none of its own) lowers the allocation
/// limit for the copy, never raises it (`DLPORT_ERR_ALLOCATION_LIMIT`, before anything is
/// allocated).
///
/// Ownership: `tensor` stays the caller's. On success `*out` is a new handle the caller frees
/// with `dlport_tensor_free`; on error nothing is allocated or written.
///
/// # Safety
/// `tensor` is a live handle; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_tensor_compact(
    tensor: *const DlportTensor,
    alignment: u64,
    copy: i32,
    max_alloc_bytes: u64,
    out: *mut *mut DlportTensor,
) -> c_int {
    entry(|| {
        // SAFETY: a live handle (contract).
        let t = unsafe { tensor.as_ref() }.ok_or_else(|| arg("tensor is NULL"))?;
        let out = out_ptr(out, "out")?;
        let options = CompactOptions {
            alignment: match alignment {
                0 => None,
                a => Some(check_alignment(a)?),
            },
            copy: copy_arg(copy)?,
            max_alloc: max_alloc_arg(max_alloc_bytes),
        };
        let c = registry().compact(&t.0, &options)?;
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(Box::into_raw(Box::new(DlportTensor(c)))) };
        Ok(())
    })
}

/// Describes a backend tensor as JSON: the keys of `dlport_describe`, plus `"backend"`
/// (string: the backend's name), `"users"` (integer: the other live uses of its buffer) and
/// `"data"` (integer: the buffer's data pointer).
///
/// Ownership: `tensor` stays the caller's. On success `*json_out` is a new string the caller
/// frees with `dlport_string_free`; on error it is untouched.
///
/// # Safety
/// `tensor` is a live handle; `json_out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_tensor_describe(
    tensor: *const DlportTensor,
    json_out: *mut *mut c_char,
) -> c_int {
    entry(|| {
        // SAFETY: a live handle (contract).
        let t = unsafe { tensor.as_ref() }.ok_or_else(|| arg("tensor is NULL"))?;
        let out = out_ptr(json_out, "json_out")?;
        let guard = t.0.view()?;
        let d = HandleDescription {
            tensor: Description::of(&guard.tensor_ref()),
            backend: t.0.backend(),
            // The read guard is one user; count the others.
            users: t.0.buffer().users().saturating_sub(1),
            data: t.0.buffer().ptr() as usize,
        };
        c_string(to_json(&d)?, out)
    })
}

/// The data pointer (host address or device handle) and byte offset of a backend tensor.
///
/// Ownership: nothing is transferred; the data belongs to the handle (valid until
/// `dlport_tensor_free`, or longer while exports of it live).
///
/// # Safety
/// `tensor` is a live handle; the out pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_tensor_data(
    tensor: *const DlportTensor,
    data_out: *mut *mut c_void,
    byte_offset_out: *mut u64,
) -> c_int {
    entry(|| {
        // SAFETY: a live handle (contract).
        let t = unsafe { tensor.as_ref() }.ok_or_else(|| arg("tensor is NULL"))?;
        let d = out_ptr(data_out, "data_out")?;
        let o = out_ptr(byte_offset_out, "byte_offset_out")?;
        let _live = t.0.view()?;
        // SAFETY: writable (contract).
        unsafe {
            d.as_ptr().write(t.0.buffer().ptr());
            o.as_ptr().write(t.0.byte_offset());
        }
        Ok(())
    })
}

/// Lends a backend tensor to C as a plain `DLTensor` view (no copy, no ownership): `data`,
/// `device`, `ndim`, `dtype`, `shape`, `strides` (always filled in) and `byte_offset`.
///
/// Ownership: nothing is transferred. On success `*out`'s `data` and its `shape` and `strides`
/// arrays belong to the handle and stay valid until `dlport_tensor_free(tensor)` (other handles
/// and DLPack exports of the same memory may keep the data alive longer, but not these arrays);
/// never free or write the arrays. Do not write the data when the tensor is read-only
/// (`"read_only": true` in `dlport_tensor_describe`). On error `*out` is untouched.
///
/// # Safety
/// `tensor` is a live handle; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_tensor_view(
    tensor: *const DlportTensor,
    out: *mut DLTensor,
) -> c_int {
    entry(|| {
        // SAFETY: a live handle (contract).
        let t = unsafe { tensor.as_ref() }.ok_or_else(|| arg("tensor is NULL"))?;
        let out = out_ptr(out, "out")?;
        // Refuses a buffer whose memory was released to another owner.
        let _live = t.0.view()?;
        let shape = t.0.shape();
        let view = DLTensor {
            data: t.0.buffer().ptr(),
            device: t.0.device(),
            ndim: shape.len() as i32,
            dtype: t.0.dtype(),
            shape: shape.as_ptr().cast_mut(),
            strides: t.0.strides().as_ptr().cast_mut(),
            byte_offset: t.0.byte_offset(),
        };
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(view) };
        Ok(())
    })
}

/// Frees a backend tensor handle (NULL is ignored). DLPack tensors exported from it stay valid.
///
/// Ownership: takes `tensor`, which must not be used again; views lent by
/// `dlport_tensor_view` end here.
///
/// # Safety
/// `tensor` is NULL or a handle from dlport, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_tensor_free(tensor: *mut DlportTensor) {
    let _ = entry(|| {
        if !tensor.is_null() {
            // SAFETY: created by Box::into_raw in dlport (contract).
            drop(unsafe { Box::from_raw(tensor) });
        }
        Ok(())
    });
}

/// What `dlport_tensor_describe` returns: a [`Description`] plus the handle's own facts.
#[derive(serde::Serialize)]
pub(crate) struct HandleDescription {
    #[serde(flatten)]
    tensor: Description,
    backend: &'static str,
    users: usize,
    data: usize,
}
