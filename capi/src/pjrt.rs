//! PJRT entries: load a PJRT plugin (any `GetPjrtApi` library: XLA's CPU plugin,
//! `jax-cuda12-pjrt`, `jax-oneapi-pjrt`, …), register its client in the registry the C ABI
//! works on, and move tensors between its buffers and DLPack. The arguments are parsed here;
//! every decision (view or copy, the limit, the export's options) is that registry's
//! (dlport-native's `pjrt` room and `Registry::decide_on` / `to_dlpack`).

use std::ffi::{CStr, c_char, c_int, c_void};

use dlport_core::abi::{DLPackVersion, DeviceType};
use dlport_core::{ExportOptions, ImportOptions};
use dlport_native::interop::pjrt::register_default;
use dlport_native::pjrt::{ClientOptions, PjrtBuffer, PjrtClient, PjrtExecutable, PjrtPlugin};

use crate::cabi::DLDevice;
use crate::ffi::{Failure, arg, copy_arg, entry, give, out_ptr, registry, take};

/// A PJRT client: the plugin's devices as DLPack devices. Free it with
/// `dlport_pjrt_client_free` (buffers made through it keep what they need alive).
pub struct DlportPjrtClient {
    client: PjrtClient,
}

/// A PJRT buffer owned by dlport. Free it with `dlport_pjrt_buffer_free` (exports of it keep
/// it alive until their deleters run).
pub struct DlportPjrtBuffer {
    buffer: PjrtBuffer,
}

/// A compiled StableHLO program. Free it with `dlport_pjrt_executable_free`.
pub struct DlportPjrtExecutable {
    exe: PjrtExecutable,
}

fn client_arg<'a>(c: *const DlportPjrtClient) -> Result<&'a PjrtClient, Failure> {
    // SAFETY: NULL or a live client from dlport_pjrt_load (caller contract).
    unsafe { c.as_ref() }
        .map(|c| &c.client)
        .ok_or_else(|| arg("client is NULL: pass a client from dlport_pjrt_load"))
}

/// Loads the PJRT plugin at `path` (`dlopen`, `GetPjrtApi`), checks its function table (its
/// major version; every function's slot against the table's `struct_size`), initializes it
/// once per process, creates a client and registers it as a backend of the registry the C ABI
/// works on (`pjrt:<platform>`, reached through that registry's `pjrt` backend; a later client
/// of the same platform takes its place): a tensor on its device type then resolves to it in
/// `dlport_from_dlpack`, and its imports and exports follow that registry's rules.
/// `device_type` is the DLPack device type of the
/// plugin's memory, or 0 to take it from the platform name (`cpu` → kDLCPU, `cuda` →
/// kDLCUDA, `rocm` → kDLROCM, `xpu`/`oneapi`/`sycl` → kDLOneAPI, `METAL`/`mtl`/`mps` →
/// kDLMetal, `tt`/`qaic` → kDLExtDev, …; a name dlport does not know is kDLExtDev).
///
/// Errors (`DLPORT_ERR_BACKEND`) name the plugin and the PJRT function, with the plugin's own
/// message and code: a library that does not load, no `GetPjrtApi`, another major version, a
/// table too short for a function (an older API), a NULL result, a `device_type` that is
/// no DLPack device type; a registry installed by other code without dlport's `pjrt` backend
/// (`DLPORT_ERR_UNSUPPORTED`).
///
/// Ownership: `path` stays the caller's. On success `*client_out` is a new client the caller
/// frees with `dlport_pjrt_client_free`; on error it is untouched. Plugins stay loaded for the
/// life of the process. Loading a library runs its code: load only plugins you trust.
///
/// # Safety
/// `path` is a NUL-terminated string; `client_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_load(
    path: *const c_char,
    device_type: i32,
    client_out: *mut *mut DlportPjrtClient,
) -> c_int {
    entry(|| {
        let out = out_ptr(client_out, "client_out")?;
        if path.is_null() {
            return Err(arg("path is NULL: pass the plugin library's path"));
        }
        // SAFETY: NUL-terminated (caller contract), read during the call only.
        let path = unsafe { CStr::from_ptr(path) }
            .to_str()
            .map_err(|_| arg("path is not UTF-8"))?;
        let plugin = PjrtPlugin::load(path)?;
        let options = ClientOptions {
            device_type: (device_type != 0).then_some(DeviceType(device_type)),
            ..ClientOptions::default()
        };
        let client = PjrtClient::create(&plugin, &options)?;
        register_default(&client)?;
        // SAFETY: a writable pointer (checked non-NULL).
        unsafe {
            out.as_ptr()
                .write(Box::into_raw(Box::new(DlportPjrtClient { client })))
        };
        Ok(())
    })
}

/// Frees a client (NULL is ignored). Buffers and exports made through it stay valid.
///
/// Ownership: the client is dlport's again; the plugin stays loaded.
///
/// # Safety
/// `client` is NULL or a client from `dlport_pjrt_load`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_client_free(client: *mut DlportPjrtClient) {
    if !client.is_null() {
        // SAFETY: a client from dlport_pjrt_load, freed once (contract). Dropping it runs no
        // user code that could panic.
        drop(unsafe { Box::from_raw(client) });
    }
}

/// Writes the platform name (`cpu`, `cuda`, `xpu`, …), NUL-terminated, into `buf` of `cap`
/// bytes; `DLPORT_INVALID_ARGUMENT` when it does not fit (the name is truncated).
///
/// Ownership: `buf` stays the caller's; nothing is allocated.
///
/// # Safety
/// `client` is a live client; `buf` is writable for `cap` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_platform(
    client: *const DlportPjrtClient,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    entry(|| {
        let name = client_arg(client)?.platform().as_bytes();
        let out = out_ptr(buf, "buf")?;
        if cap == 0 {
            return Err(arg("cap is 0"));
        }
        let n = name.len().min(cap - 1);
        // SAFETY: `buf` is writable for `cap` > n bytes (contract).
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), out.as_ptr().cast::<u8>(), n);
            out.as_ptr().add(n).write(0);
        }
        if n < name.len() {
            return Err(arg(format!(
                "the platform name needs {} bytes",
                name.len() + 1
            )));
        }
        Ok(())
    })
}

/// The client's addressable devices as DLPack devices: writes up to `cap` of them into
/// `devices` (NULL when `cap` is 0) and their number into `*count_out`. Device ids are the
/// indices of the plugin's addressable devices.
///
/// Ownership: `devices` and `count_out` stay the caller's; nothing is allocated.
///
/// # Safety
/// `client` is a live client; `devices` is writable for `cap` devices; `count_out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_devices(
    client: *const DlportPjrtClient,
    devices: *mut DLDevice,
    cap: usize,
    count_out: *mut usize,
) -> c_int {
    entry(|| {
        let all = client_arg(client)?.devices();
        let count = out_ptr(count_out, "count_out")?;
        if cap > 0 && devices.is_null() {
            return Err(arg("devices is NULL with cap > 0"));
        }
        for (i, d) in all.iter().take(cap).enumerate() {
            // SAFETY: writable for `cap` > i devices (contract).
            unsafe {
                devices.add(i).write(DLDevice {
                    device_type: d.device.device_type.0,
                    device_id: d.device.device_id,
                });
            }
        }
        // SAFETY: writable (checked non-NULL).
        unsafe { count.as_ptr().write(all.len()) };
        Ok(())
    })
}

/// CONSUMING. Imports a DLPack tensor as a PJRT buffer, as the registry the C ABI works on
/// decides by its one view rule for this client's backend: a view of its memory
/// (`PJRT_Client_CreateViewOfDeviceBuffer`) when the plugin can view it (a dtype PJRT has,
/// row-major, a 64-byte-aligned non-NULL first element, not READ_ONLY, on this client's
/// device type, or host memory on a CPU platform) and `copy` is not DLPORT_COPY_ALWAYS; else
/// one copy of host memory (`PJRT_Client_BufferFromHostBuffer`) where `copy` allows, under
/// the allocation limit in force (`DLPORT_ERR_ALLOCATION_LIMIT` over it); else
/// `DLPORT_ERR_COPY_REQUIRED` naming the reason. `device_id` is the target device, or -1 for
/// the tensor's own (device 0 for host memory).
///
/// Ownership: `managed` is taken on every path. A view releases it (its deleter runs once, on
/// whatever thread the plugin destroys the view) when the buffer and every export of it are
/// gone; a copy or an error releases it before returning. On success `*buffer_out` is a new
/// buffer the caller frees with `dlport_pjrt_buffer_free`.
///
/// # Safety
/// `client` is a live client; `managed` is NULL or an owned managed tensor of the form
/// `versioned` says; `buffer_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_import(
    client: *const DlportPjrtClient,
    managed: *mut c_void,
    versioned: c_int,
    copy: i32,
    device_id: i32,
    buffer_out: *mut *mut DlportPjrtBuffer,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded contract; taken first, so that every error path releases it.
        let tensor = unsafe { take(managed, versioned) }?;
        let client = client_arg(client)?;
        let out = out_ptr(buffer_out, "buffer_out")?;
        let policy = copy_arg(copy)?;
        let device = (device_id >= 0).then_some(device_id);
        let options = ImportOptions {
            copy: policy,
            ..ImportOptions::default()
        };
        let buffer = client.import_with(registry(), tensor, &options, device)?;
        // SAFETY: writable (checked non-NULL).
        unsafe {
            out.as_ptr()
                .write(Box::into_raw(Box::new(DlportPjrtBuffer { buffer })))
        };
        Ok(())
    })
}

/// Exports a PJRT buffer to a DLPack consumer without a copy, by the registry's export
/// (`dlport_export`'s, with no copy, the buffer's own device and no stream): waits until the
/// buffer is ready, asks the plugin its type, dims and layout, takes an external reference
/// (`PJRT_Buffer_IncreaseExternalReferenceCount`) and the device pointer
/// (`PJRT_Buffer_OpaqueDeviceMemoryDataPointer`). The export's deleter gives the reference
/// back once, then its hold on the buffer. A host buffer is `kDLCPU` device 0.
///
/// Ownership: on success `*managed_out` is a new managed tensor (versioned when `versioned`
/// is non-zero) the consumer releases once (its deleter, or `dlport_release`); the buffer
/// stays the caller's.
///
/// # Safety
/// `buffer` is a live buffer; `managed_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_export(
    buffer: *const DlportPjrtBuffer,
    versioned: c_int,
    managed_out: *mut *mut c_void,
) -> c_int {
    entry(|| {
        // SAFETY: NULL or a live buffer (contract).
        let b = unsafe { buffer.as_ref() }
            .ok_or_else(|| arg("buffer is NULL: pass a buffer from dlport_pjrt_import"))?;
        let out = out_ptr(managed_out, "managed_out")?;
        let options = ExportOptions {
            max_version: (versioned != 0).then_some(DLPackVersion::CURRENT),
            ..ExportOptions::default()
        };
        let m = b.buffer.to_dlpack_with(registry(), &options)?;
        give(m, versioned != 0, out)
    })
}

/// The buffer's `PJRT_Buffer*`, for calls through the plugin's own C API (valid while the
/// buffer lives; never destroy it yourself). NULL for a NULL buffer.
///
/// Ownership: the `PJRT_Buffer` stays dlport's (borrowed).
///
/// # Safety
/// `buffer` is NULL or a live buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_buffer_raw(buffer: *const DlportPjrtBuffer) -> *mut c_void {
    // SAFETY: NULL or a live buffer (contract).
    unsafe { buffer.as_ref() }.map_or(std::ptr::null_mut(), |b| b.buffer.as_raw())
}

/// Frees a buffer (NULL is ignored): the PJRT buffer is destroyed once its exports are
/// released too (a view's producer tensor is released then).
///
/// Ownership: the buffer is dlport's again; exports of it stay the consumers'.
///
/// # Safety
/// `buffer` is NULL or a buffer from `dlport_pjrt_import`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_buffer_free(buffer: *mut DlportPjrtBuffer) {
    if !buffer.is_null() {
        // SAFETY: a buffer from dlport_pjrt_import, freed once (contract). A view's
        // on-delete callback runs the producer's deleter behind catch_unwind.
        drop(unsafe { Box::from_raw(buffer) });
    }
}

/// Compiles a StableHLO (or MHLO) program given as MLIR text (`mlir`, `len` bytes; no NUL
/// needed) for one device (`PJRT_Client_Compile`). Errors carry the plugin's message (a parse
/// or verification error names the line).
///
/// Ownership: `mlir` stays the caller's. On success `*exe_out` is a new executable the caller
/// frees with `dlport_pjrt_executable_free`; on error it is untouched.
///
/// # Safety
/// `client` is a live client; `mlir` is readable for `len` bytes; `exe_out` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_compile(
    client: *const DlportPjrtClient,
    mlir: *const c_char,
    len: usize,
    exe_out: *mut *mut DlportPjrtExecutable,
) -> c_int {
    entry(|| {
        let client = client_arg(client)?;
        let out = out_ptr(exe_out, "exe_out")?;
        if mlir.is_null() {
            return Err(arg("mlir is NULL: pass the program's text"));
        }
        // SAFETY: readable for `len` bytes (contract), read during the call only.
        let bytes = unsafe { std::slice::from_raw_parts(mlir.cast::<u8>(), len) };
        let text = std::str::from_utf8(bytes).map_err(|_| arg("mlir is not UTF-8"))?;
        let exe = client.compile_mlir(text)?;
        // SAFETY: writable (checked non-NULL).
        unsafe {
            out.as_ptr()
                .write(Box::into_raw(Box::new(DlportPjrtExecutable { exe })))
        };
        Ok(())
    })
}

/// Runs an executable once on `args` (`num_args` buffers of the same client), no input
/// donated, and waits for it. Writes its outputs (new buffers, each freed with
/// `dlport_pjrt_buffer_free`) into `outputs`, which has room for `cap`, and their number into
/// `*num_outputs`; `DLPORT_INVALID_ARGUMENT` when `cap` is too small (nothing is run).
///
/// Ownership: `args` stay the caller's (read, never donated); on success each output is a
/// new buffer the caller frees; on error `outputs` is untouched.
///
/// # Safety
/// `exe` is a live executable; `args` is readable for `num_args` live buffers; `outputs` is
/// writable for `cap` pointers; `num_outputs` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_execute(
    exe: *const DlportPjrtExecutable,
    args: *const *const DlportPjrtBuffer,
    num_args: usize,
    outputs: *mut *mut DlportPjrtBuffer,
    cap: usize,
    num_outputs: *mut usize,
) -> c_int {
    entry(|| {
        // SAFETY: NULL or a live executable (contract).
        let exe = &unsafe { exe.as_ref() }
            .ok_or_else(|| arg("exe is NULL: pass an executable from dlport_pjrt_compile"))?
            .exe;
        let count = out_ptr(num_outputs, "num_outputs")?;
        let n = exe.num_outputs();
        if cap < n || (n > 0 && outputs.is_null()) {
            return Err(arg(format!(
                "outputs has room for {cap}; the program has {n} outputs"
            )));
        }
        if num_args > 0 && args.is_null() {
            return Err(arg("args is NULL with num_args > 0"));
        }
        let mut buffers = Vec::with_capacity(num_args);
        for i in 0..num_args {
            // SAFETY: readable for `num_args` pointers, each NULL or a live buffer (contract).
            let b = unsafe { (*args.add(i)).as_ref() }
                .ok_or_else(|| arg(format!("args[{i}] is NULL")))?;
            buffers.push(&b.buffer);
        }
        let outs = exe.execute(&buffers)?;
        for (i, buffer) in outs.into_iter().enumerate() {
            // SAFETY: writable for `cap` >= n pointers (checked).
            unsafe {
                outputs
                    .add(i)
                    .write(Box::into_raw(Box::new(DlportPjrtBuffer { buffer })))
            };
        }
        // SAFETY: writable (checked non-NULL).
        unsafe { count.as_ptr().write(n) };
        Ok(())
    })
}

/// Frees an executable (NULL is ignored). Buffers it made stay valid.
///
/// Ownership: the executable is dlport's again.
///
/// # Safety
/// `exe` is NULL or an executable from `dlport_pjrt_compile`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_executable_free(exe: *mut DlportPjrtExecutable) {
    if !exe.is_null() {
        // SAFETY: an executable from dlport_pjrt_compile, freed once (contract).
        drop(unsafe { Box::from_raw(exe) });
    }
}
