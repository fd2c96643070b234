//! Loading a plugin library: `dlopen`, the well-known init symbol, and `dlclose` when the last
//! user of the plugin is gone. [`PluginBackend::load`](super::PluginBackend::load) checks the
//! struct the init fills in.

use dlport_core::Error;

#[cfg(unix)]
use super::error::message_of;
use super::error::plugin_error;
use super::interface::DlportPlugin;
#[cfg(unix)]
use super::interface::{DLPORT_PLUGIN_INIT_SYMBOL, DLPORT_PLUGIN_INTERFACE_VERSION};

/// An open plugin library, closed when dropped (after the plugin's `destroy`). Only
/// [`PluginBackend::load`](super::PluginBackend::load) makes one.
pub struct Library {
    #[cfg(unix)]
    handle: *mut std::ffi::c_void,
}

// SAFETY: a dlopen handle may be used and closed from any thread.
unsafe impl Send for Library {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for Library {}

impl Drop for Library {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: a handle from dlopen, closed once, here; nothing of the library is called
        // afterwards (the plugin's `destroy` ran before).
        unsafe {
            libc::dlclose(self.handle);
        }
    }
}

#[cfg(unix)]
fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
    // on this thread; it is copied at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "no message from dlerror".into()
    } else {
        // SAFETY: as above.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Opens the plugin library at `path` (`dlopen`, local symbols) and calls its
/// `dlport_plugin_init`: the struct it fills in (not yet checked) and the open library. Errors
/// name the path, and the missing symbol or the failing init. On error the library is closed
/// again.
///
/// # Safety
/// Loading a library runs its initialisers, and the plugin's init is trusted to follow the
/// plugin contract (`dlport.h`): only open plugins you trust.
pub(super) unsafe fn open(path: &std::path::Path) -> Result<(DlportPlugin, Library), Error> {
    let shown = path.display().to_string();
    let fail = |operation: &'static str, code: i32, what: String| {
        plugin_error(&shown, &shown, operation, code, &what)
    };
    if path.as_os_str().is_empty() {
        return Err(fail(
            "dlopen",
            -1,
            "the path is empty (dlopen(\"\") would return the program itself, not a plugin): \
             give the plugin library's path"
                .into(),
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        // The path's bytes exactly, whatever their encoding; `shown` is for messages only.
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| fail("dlopen", -1, "the path has a NUL byte".into()))?;
        let path = &shown;
        // SAFETY: a NUL-terminated path; loading runs the library's initialisers
        // (the caller trusts the plugin).
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(fail(
                "dlopen",
                -1,
                format!("cannot load {path}: {}", dlerror()),
            ));
        }
        let library = Library { handle };
        let symbol = std::ffi::CString::new(DLPORT_PLUGIN_INIT_SYMBOL).unwrap_or_default();
        // SAFETY: a live handle and a NUL-terminated name.
        let sym = unsafe { libc::dlsym(library.handle, symbol.as_ptr()) };
        if sym.is_null() {
            return Err(fail(
                "dlsym",
                -1,
                format!(
                    "{path} has no symbol {DLPORT_PLUGIN_INIT_SYMBOL}: a dlport plugin \
                     exports `int {DLPORT_PLUGIN_INIT_SYMBOL}(uint32_t, DlportPlugin*, size_t)` \
                     ({})",
                    dlerror()
                ),
            ));
        }
        // SAFETY: the plugin contract gives the symbol this type.
        let init: unsafe extern "C" fn(u32, *mut DlportPlugin, usize) -> i32 =
            unsafe { std::mem::transmute::<*mut std::ffi::c_void, _>(sym) };
        let mut plugin = DlportPlugin::empty();
        plugin.struct_size = 0;
        plugin.interface_version = 0;
        let size = std::mem::size_of::<DlportPlugin>();
        // SAFETY: a writable, zeroed struct of `size` bytes (plugin contract).
        let status = unsafe { init(DLPORT_PLUGIN_INTERFACE_VERSION, &mut plugin, size) };
        if status != 0 {
            // SAFETY: the init's own `last_error` for its `state`, or NULL (contract).
            let why = unsafe { message_of(plugin.last_error, plugin.state) };
            return Err(fail(DLPORT_PLUGIN_INIT_SYMBOL, status, why));
        }
        Ok((plugin, library))
    }
    #[cfg(not(unix))]
    {
        Err(fail(
            "dlopen",
            -1,
            "loading plugin libraries is supported on Unix only; register the plugin with \
             dlport_register_backend"
                .into(),
        ))
    }
}
