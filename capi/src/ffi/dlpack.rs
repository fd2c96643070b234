//! The DLPack entries: import, export, convert, host views, compact copies and release of
//! DLPack tensors.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use dlport_core::abi::DLPackVersion;
use dlport_core::backend::{CPU_ALIGN, CompactOptions, DeviceField};
use dlport_core::{CopyPolicy, Device, ExportOptions, ImportOptions, ManagedTensor};

use crate::cabi::DlportCopy;

use super::args::{
    DlportImportOptions, copy_arg, device_arg, import_options, out_ptr, registry, take,
};
use super::handle::DlportTensor;
use super::status::{Failure, arg, entry};
use super::tracker::{give, release_any};

/// Calls a managed tensor's deleter (NULL is ignored).
///
/// dlport recognises the tensors it exported by identity, not by address: a released export's
/// memory stays reserved while it is among the last 4096 released (a quarantine), so no other
/// tensor can be allocated at its address meanwhile.
/// - Detected, refused with `DLPORT_INVALID_ARGUMENT` ("already released", naming the address)
///   and running nothing: a dlport export released again while among the last 4096 released,
///   by `dlport_release`, by calling its deleter again, or by passing it to any dlport function;
///   and a nested release (a deleter that dlport runs releases the export being released). A
///   refused call of an export's deleter returns nothing; `dlport_last_error()` says why.
/// - Released normally: every tensor that is not a dlport export, including one that lives at
///   an address where a released dlport export used to be.
/// - Not detected (undefined behaviour, as in DLPack): a foreign tensor released twice (its
///   memory belongs to its producer and may be gone), and a dlport export released again after
///   4096 later releases (its memory has been freed and may hold another tensor).
///
/// Ownership: takes `managed` (its deleter runs here), except a refused second release of a
/// dlport export, which touches nothing.
///
/// # Safety
/// `managed` is NULL or an owned managed tensor of the form `versioned` says, or one of
/// dlport's exports (live or released, in either form).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_release(managed: *mut c_void, versioned: c_int) -> c_int {
    entry(|| {
        let Some(p) = NonNull::new(managed) else {
            return Ok(());
        };
        // SAFETY: forwarded contract.
        unsafe { release_any(p, versioned) }
    })
}

/// CONSUMING. Imports a managed tensor onto a backend of the native registry, following
/// `options` (NULL: the data's own device, `DLPORT_COPY_IF_NEEDED`, any layout).
///
/// Ownership: takes `managed` on every path (on error it has been released). On success
/// `*out` is a new handle the caller frees with `dlport_tensor_free`; without a copy it keeps
/// `managed` alive and calls its deleter when the last handle and export of it are gone.
///
/// # Safety
/// `managed` as in `dlport_release`; `options` NULL or readable; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_import(
    managed: *mut c_void,
    versioned: c_int,
    options: *const DlportImportOptions,
    out: *mut *mut DlportTensor,
) -> c_int {
    entry(|| {
        // Ownership is taken first, so that every later error releases the tensor.
        // SAFETY: forwarded contract.
        let m = unsafe { take(managed, versioned) }?;
        let out = out_ptr(out, "out")?;
        // SAFETY: NULL or readable (contract).
        let opts = import_options(&unsafe { options.as_ref() }.copied().unwrap_or(
            DlportImportOptions {
                copy: DlportCopy::IfNeeded as i32,
                ..Default::default()
            },
        ))?;
        let t = registry().from_dlpack(m, &opts)?;
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(Box::into_raw(Box::new(DlportTensor(t)))) };
        Ok(())
    })
}

/// Exports a backend tensor as a DLPack tensor that keeps it alive (or a copy), following
/// `__dlpack__`: `max_version_major` < 1 gives a legacy `DLManagedTensor`, >= 1 a versioned
/// one (`*versioned_out` says which); `dl_device_type` 0 means the tensor's own device (with
/// `dl_device_id` 0); a device id is non-negative, and 0 for `kDLCPU`
/// (`DLPORT_ERR_INVALID_DEVICE` otherwise); `copy` is a `DlportCopy`. A legacy consumer never
/// receives a READ_ONLY or padded sub-byte tensor by reference: it gets a compact copy, or
/// with `DLPORT_COPY_NEVER` the error `DLPORT_ERR_COPY_REQUIRED` naming the flag. The same as
/// `dlport_export_stream` with `stream` NULL (`__dlpack__(stream=None)`).
///
/// Ownership: `tensor` stays the caller's. On success `*managed_out` is a new managed tensor
/// the caller (or its consumer) releases once, through its deleter or `dlport_release`; it
/// stays valid after `dlport_tensor_free(tensor)`. On error nothing is written.
///
/// # Safety
/// `tensor` is a live handle; `managed_out` and `versioned_out` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_export(
    tensor: *const DlportTensor,
    max_version_major: i32,
    max_version_minor: i32,
    dl_device_type: i32,
    dl_device_id: i32,
    copy: i32,
    managed_out: *mut *mut c_void,
    versioned_out: *mut c_int,
) -> c_int {
    entry(|| {
        let args = ExportArgs {
            max_version: (max_version_major, max_version_minor),
            dl_device: (dl_device_type, dl_device_id),
            copy,
            stream: None,
        };
        // SAFETY: forwarded contract.
        unsafe { export(tensor, args, managed_out, versioned_out) }
    })
}

/// As `dlport_export`, and the consumer's stream waits for the tensor's pending work (the
/// DLPack stream hand-off, through the backend that holds the export, as every door's export
/// does). `stream` is NULL for `__dlpack__(stream=None)`, else points to the value a consumer
/// passes as `stream`, read by DLPack's rules for the exported device's type: for `kDLCUDA`
/// NULL or 1 is the legacy default stream, 2 the per-thread default stream, a larger value a
/// `cudaStream_t`, -1 no synchronisation and 0 an error; for `kDLROCM` NULL or 0 is the
/// default stream and 1 and 2 are errors; host memory takes NULL or -1 only. A value the rules
/// refuse is `DLPORT_ERR_INVALID_STREAM`, before anything is exported.
///
/// Ownership: `tensor` and `stream` stay the caller's. On success `*managed_out` is a new
/// managed tensor the caller (or its consumer) releases once, through its deleter or
/// `dlport_release`; it stays valid after `dlport_tensor_free(tensor)`. On error nothing is
/// written.
///
/// # Safety
/// `tensor` is a live handle; `stream` is NULL or readable; `managed_out` and `versioned_out`
/// are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_export_stream(
    tensor: *const DlportTensor,
    max_version_major: i32,
    max_version_minor: i32,
    dl_device_type: i32,
    dl_device_id: i32,
    copy: i32,
    stream: *const i64,
    managed_out: *mut *mut c_void,
    versioned_out: *mut c_int,
) -> c_int {
    entry(|| {
        let args = ExportArgs {
            max_version: (max_version_major, max_version_minor),
            dl_device: (dl_device_type, dl_device_id),
            copy,
            // SAFETY: NULL or readable (contract).
            stream: unsafe { stream.as_ref() }.copied(),
        };
        // SAFETY: forwarded contract.
        unsafe { export(tensor, args, managed_out, versioned_out) }
    })
}

/// The arguments of `dlport_export` and `dlport_export_stream`, as C gives them.
struct ExportArgs {
    max_version: (i32, i32),
    dl_device: (i32, i32),
    copy: i32,
    stream: Option<i64>,
}

/// The export of `dlport_export` and `dlport_export_stream`: the arguments decoded into
/// `ExportOptions`, then the registry's `to_dlpack` (which makes the stream hand-off).
///
/// # Safety
/// As `dlport_export_stream`.
unsafe fn export(
    tensor: *const DlportTensor,
    args: ExportArgs,
    managed_out: *mut *mut c_void,
    versioned_out: *mut c_int,
) -> Result<(), Failure> {
    // SAFETY: a live handle (contract).
    let t = unsafe { tensor.as_ref() }.ok_or_else(|| arg("tensor is NULL"))?;
    let out = out_ptr(managed_out, "managed_out")?;
    let vout = out_ptr(versioned_out, "versioned_out")?;
    let (major, minor) = args.max_version;
    let max_version = (major >= 0).then(|| DLPackVersion::new(major as u32, minor.max(0) as u32));
    if major >= 0 && minor < 0 {
        return Err(arg(format!(
            "max_version_minor = {minor} is negative: pass 0 or more"
        )));
    }
    let opts = ExportOptions {
        max_version,
        dl_device: device_arg(
            args.dl_device.0,
            args.dl_device.1,
            DeviceField::DlDevice,
            ("dl_device_type", "dl_device_id"),
        )?,
        copy: copy_arg(args.copy)?,
        stream: args.stream,
        ..ExportOptions::versioned()
    };
    let m = registry().to_dlpack(&t.0, &opts)?;
    let versioned = m.is_versioned();
    give(m, versioned, out)?;
    // SAFETY: writable (contract).
    unsafe { vout.as_ptr().write(c_int::from(versioned)) };
    Ok(())
}

/// CONSUMING. Converts legacy <-> versioned without a copy; the original is released once, when
/// the result is. A versioned tensor with READ_ONLY or IS_SUBBYTE_TYPE_PADDED is refused for
/// the legacy form (`DLPORT_ERR_FLAG_NOT_REPRESENTABLE`): the legacy struct has no flags, and
/// dropping them would let a consumer write read-only memory or misread padded elements; use
/// `dlport_compact` for a legacy copy.
///
/// Ownership: takes `managed` on every path (on error it has been released). On success `*out`
/// is a new managed tensor the caller releases once.
///
/// # Safety
/// As `dlport_release` for `managed`; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_convert(
    managed: *mut c_void,
    versioned: c_int,
    to_versioned: c_int,
    out: *mut *mut c_void,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { take(managed, versioned) }?;
        give(m, to_versioned != 0, out_ptr(out, "out")?)
    })
}

/// Imports `m` with `import`, then hands it to C again (on `dl_device`, in the requested form).
pub(crate) fn pass_through(
    m: ManagedTensor,
    import: &ImportOptions,
    dl_device: Option<Device>,
    copy: CopyPolicy,
    to_versioned: c_int,
    out: NonNull<*mut c_void>,
) -> Result<(), Failure> {
    let t = registry().from_dlpack(m, import)?;
    let max_version = (to_versioned != 0).then_some(DLPackVersion::CURRENT);
    let exported = registry().to_dlpack(
        &t,
        &ExportOptions {
            max_version,
            dl_device,
            copy,
            max_alloc: import.max_alloc,
            stream: None,
        },
    )?;
    give(exported, to_versioned != 0, out)
}

/// CONSUMING. Makes host-accessible memory (pinned, managed, or CPU) visible to a consumer
/// that knows only `kDLCPU`, without a copy: the result says `kDLCPU` and keeps the original
/// alive. `advertised_*` is what `__dlpack_device__` said (0: nothing). Device memory is
/// refused with a clear error.
///
/// Ownership: takes `managed` on every path (on error it has been released). On success `*out`
/// is a new managed tensor the caller releases once; the original's deleter runs when it is.
///
/// # Safety
/// As `dlport_release` for `managed`; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_host_view(
    managed: *mut c_void,
    versioned: c_int,
    advertised_device_type: i32,
    advertised_device_id: i32,
    to_versioned: c_int,
    out: *mut *mut c_void,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { take(managed, versioned) }?;
        let out = out_ptr(out, "out")?;
        let opts = ImportOptions {
            device: Some(Device::cpu()),
            advertised: device_arg(
                advertised_device_type,
                advertised_device_id,
                DeviceField::Advertised,
                ("advertised_device_type", "advertised_device_id"),
            )?,
            copy: CopyPolicy::Never,
            requirements: None,
            max_alloc: None,
        };
        pass_through(
            m,
            &opts,
            Some(Device::cpu()),
            CopyPolicy::Never,
            to_versioned,
            out,
        )
    })
}

/// CONSUMING. Copies any host-accessible tensor (strided, negative, broadcast) into a new
/// compact, 64-byte-aligned one with IS_COPIED; with `DLPORT_COPY_IF_NEEDED` a tensor that is
/// already compact and aligned is passed through without a copy, and with `DLPORT_COPY_NEVER`
/// a tensor that would need one is an error. The compaction is the registry's, as
/// `dlport_tensor_compact`'s: the tensor is imported as a view (device memory is brought to
/// the host, as a compact copy), compacted, and exported.
///
/// Ownership: takes `managed` on every path (on error it has been released). On success `*out`
/// is a new managed tensor the caller releases once.
///
/// # Safety
/// As `dlport_release` for `managed`; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_compact(
    managed: *mut c_void,
    versioned: c_int,
    to_versioned: c_int,
    copy: i32,
    out: *mut *mut c_void,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { take(managed, versioned) }?;
        let out = out_ptr(out, "out")?;
        let copy = copy_arg(copy)?;
        // A view where the host reaches the memory; device memory comes to the host as a
        // compact copy (refused with DLPORT_COPY_NEVER), which is then compact already.
        let import = ImportOptions {
            device: Some(Device::cpu()),
            copy: match copy {
                CopyPolicy::Never => CopyPolicy::Never,
                _ => CopyPolicy::IfNeeded,
            },
            ..ImportOptions::default()
        };
        let r = registry();
        let imported_copy = r.decide(&m.view(), &import)?.copies;
        let t = r.from_dlpack(m, &import)?;
        let compact = r.compact(
            &t,
            &CompactOptions {
                alignment: Some(CPU_ALIGN),
                copy: if imported_copy {
                    CopyPolicy::IfNeeded
                } else {
                    copy
                },
                max_alloc: None,
            },
        )?;
        drop(t);
        let max_version = (to_versioned != 0).then_some(DLPackVersion::CURRENT);
        let exported = r.to_dlpack(
            &compact,
            &ExportOptions {
                max_version,
                ..ExportOptions::versioned()
            },
        )?;
        give(exported, to_versioned != 0, out)
    })
}
