//! Plugin entries: register, load, unregister and list C plugins (the `DlportPlugin`
//! interface, see `dlport_core`'s backend docs and `docs/plugins.md`).

use std::ffi::{CStr, c_char, c_int};

use dlport_native::plugin::{DlportPlugin, PluginBackend};

use super::args::{c_string, out_ptr, to_json};
use super::status::{Failure, arg, entry};

// The plugin interface's constants, for the header: cbindgen emits the constants of this crate
// alone, so they are written again here, equal to dlport-native's (checked when compiling).

/// The plugin interface version this dlport implements. A plugin sets
/// `DlportPlugin.interface_version` to the version it was written for; dlport refuses any
/// other (`DLPORT_ERR_BACKEND`, naming the plugin, the field and both versions). Later
/// versions only append fields, and `struct_size` tells dlport which ones a plugin has.
pub const DLPORT_PLUGIN_INTERFACE_VERSION: u32 = 1;

/// The status a plugin callback returns on success. Any other value is the plugin's own error
/// code: dlport turns it into `DLPORT_ERR_BACKEND` with a message naming the plugin, the
/// callback, the code and the plugin's `last_error` text.
pub const DLPORT_PLUGIN_OK: c_int = 0;

const _: () = assert!(
    DLPORT_PLUGIN_INTERFACE_VERSION == dlport_native::plugin::DLPORT_PLUGIN_INTERFACE_VERSION
        && DLPORT_PLUGIN_OK == dlport_native::plugin::DLPORT_PLUGIN_OK
);

fn str_arg<'a>(s: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if s.is_null() {
        return Err(arg(format!("{name} is NULL: pass a NUL-terminated string")));
    }
    // SAFETY: NUL-terminated (caller contract), read during the call only.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| arg(format!("{name} is not UTF-8")))
}

/// A path argument's bytes, exactly (Unix: any bytes; elsewhere UTF-8).
fn path_arg(s: *const c_char) -> Result<std::path::PathBuf, Failure> {
    if s.is_null() {
        return Err(arg("path is NULL: pass a NUL-terminated string"));
    }
    // SAFETY: NUL-terminated (caller contract), read during the call only.
    let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(std::ffi::OsStr::from_bytes(bytes).into())
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes)
            .map(Into::into)
            .map_err(|_| arg("path is not UTF-8"))
    }
}

/// Registers a C plugin (a device backend: see `DlportPlugin` and every callback's contract
/// above) in the process-wide registry, beside dlport's own backends: imports, exports,
/// copies and allocations on the device types it serves go to its callbacks.
///
/// Which device types a plugin may take (one rule, checked at registration by every door, in
/// every build and on every machine): never a host-class type (kDLCPU, kDLCUDAHost,
/// kDLROCMHost, kDLTPUHost, kDLCUDAManaged: its handles would be read as host memory), never
/// a type a built-in backend serves (kDLCUDA, kDLCUDAHost, kDLCUDAManaged), whether or not
/// the CUDA feature is built or a driver is present; any other positive DLPack code
/// (kDLOpenCL, kDLROCM, kDLOneAPI, kDLExtDev, codes DLPack does not name). A plugin's
/// handle is never presented as host memory.
///
/// Which plugin a call goes to (one rule): a new tensor (an import, an allocation, a copy of
/// a producer's tensor) goes to the latest registered plugin serving the device type; every
/// operation on an existing plugin tensor (an export, a wait, a copy of it) goes to the plugin
/// that made it, never to another plugin serving the same type, or fails with
/// `DLPORT_ERR_NO_BACKEND` once that plugin is unregistered.
///
/// Errors (`DLPORT_ERR_BACKEND`, naming the plugin and what is wrong): a NULL `plugin`, a
/// `struct_size` below this version's, another `interface_version`, a bad name or device-type
/// list (naming the field and the value), half of a callback pair;
/// `DLPORT_ERR_DUPLICATE_BACKEND` for a name in use.
///
/// Ownership: dlport copies `*plugin`, its name and its device types; the caller may free them
/// when the call returns. `plugin->state` stays the plugin's; on success dlport calls
/// `destroy(state)` once, after `dlport_unregister_backend` and the last use, on the thread that
/// lets go of the plugin last (possibly another thread, a moment after the last free returned:
/// see `DlportPluginDestroy`); on error dlport calls nothing of the plugin (not even `destroy`:
/// the caller still owns its state).
///
/// # Safety
/// `plugin` is NULL or readable for `plugin->struct_size` bytes, with the fields the header
/// documents; its callbacks follow their contracts for as long as dlport holds the plugin.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_register_backend(plugin: *const DlportPlugin) -> c_int {
    entry(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { PluginBackend::from_raw(plugin, "dlport_register_backend", None) }?;
        Ok(dlport_native::plugin::add_to_default(p, true)?)
    })
}

/// Loads a plugin library from `path` (`dlopen` with RTLD_NOW | RTLD_LOCAL), calls its
/// `dlport_plugin_init` (see `DlportPluginInit`) and registers the plugin as
/// `dlport_register_backend` does, and gives its name in `*name_out` (when not NULL).
///
/// The path's bytes go to `dlopen` exactly as given (any encoding); an empty path is refused
/// (`DLPORT_ERR_BACKEND`: `dlopen("")` would return the program itself).
///
/// Errors name the path and what failed: `dlopen` (with `dlerror()`'s text), a missing
/// `dlport_plugin_init` symbol, a non-zero status from it, then the checks of
/// `dlport_register_backend`. On every error the library is closed again and nothing is
/// registered; the plugin's `destroy` runs first when its init succeeded with a valid struct
/// (a refused name), never when init failed or its struct was refused.
///
/// Ownership: `path` stays the caller's. The library belongs to dlport, which closes it after
/// the plugin's `destroy` (after `dlport_unregister_backend` and the last tensor that uses the
/// plugin). On success `*name_out` is a new string the caller frees with
/// `dlport_string_free`; on error it is untouched. Loading a library runs its code: load only plugins you trust.
///
/// # Safety
/// `path` is a NUL-terminated string; `name_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_load_plugin(
    path: *const c_char,
    name_out: *mut *mut c_char,
) -> c_int {
    entry(|| {
        let path = path_arg(path)?;
        // SAFETY: the caller trusts the library (contract).
        let name = unsafe { dlport_native::plugin::load_into_default(&path) }?;
        if let Some(out) = std::ptr::NonNull::new(name_out) {
            c_string(name.to_owned(), out)?;
        }
        Ok(())
    })
}

/// Removes a plugin from the process-wide registry by name: new imports, copies and
/// allocations no longer reach it. Tensors, views and exports it made stay valid and keep the
/// plugin (and its library) loaded; its `destroy` runs, and a library dlport loaded is closed,
/// when the last of them is released, or a moment later on another thread whose call (a
/// listing, a lookup) still held the plugin then. Until then such a tensor can be described,
/// viewed and freed, and exports already made stay valid; new exports and copies of it fail
/// with `DLPORT_ERR_NO_BACKEND` (no backend serves its device any more), and no callback of
/// the plugin runs except the releases it is owed (`view_destroy`, `release`, `deallocate`)
/// and `destroy`. An unknown name is `DLPORT_ERR_BACKEND`, listing the registered plugins.
///
/// Ownership: nothing is transferred.
///
/// # Safety
/// `name` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_unregister_backend(name: *const c_char) -> c_int {
    entry(|| {
        let name = str_arg(name, "name")?;
        drop(dlport_native::plugin::unregister_global(name)?);
        Ok(())
    })
}

/// The backends of the process-wide registry as JSON (an array), so that a program can see
/// what each serves: objects with `"name"`, `"kind"` (`"builtin"`, `"plugin"` or `"pjrt"`,
/// a client `dlport_pjrt_load` registered), `"device_types"` (DLPack codes; none for a PJRT
/// client of a CPU platform, whose host memory the `cpu` backend serves), `"origin"` (a
/// plugin's or PJRT plugin's library path, or `"dlport_register_backend"`; null for built-in
/// backends) and `"callbacks"` (the plugin callbacks given; empty for the others).
///
/// Ownership: on success `*json_out` is a new string freed with `dlport_string_free`.
///
/// # Safety
/// `json_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_backends(json_out: *mut *mut c_char) -> c_int {
    entry(|| {
        let out = out_ptr(json_out, "json_out")?;
        c_string(to_json(&dlport_native::plugin::backends())?, out)
    })
}
