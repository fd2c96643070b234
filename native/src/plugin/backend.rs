//! [`PluginBackend`]: a C plugin as a core `Backend`. This room holds the type, its
//! registration (the checks of a plugin's struct, loading a library), the plugin's status and
//! error texts, the calls that hold no handle (`wait`, the device-id maps) and the `Backend`
//! implementation, which resolves devices here and sends each operation to its room: imports
//! to `import.rs`, exports to `export.rs`, allocation and host copies to `memory.rs`.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use dlport_core::abi::DeviceType;
use dlport_core::backend::Backend;
use dlport_core::{DataType, Device, Error, ManagedTensor, Tensor, TensorRef};

use super::error::{intern, message_of, plugin_error};
use super::interface::{DLPORT_PLUGIN_INTERFACE_VERSION, DlportPlugin};
use super::load::{self, Library};

/// A C plugin as a dlport backend. Register it in any `Registry` (`Arc<PluginBackend>` is a
/// `BackendRef`), or in the process-wide plugin table with `dlport_register_backend`.
///
/// Tensors, views and exports made through it hold it (and its library) alive; when the last
/// handle is gone the plugin's `destroy` runs once (unless [`disarm`](Self::disarm)ed) and a
/// library dlport loaded is closed. That is on the thread that drops the last handle: a
/// listing ([`plugins`](super::plugins)), a lookup or a registration on another thread holds
/// the plugin while it runs, so `destroy` may run there, a moment after the last tensor was
/// dropped here.
pub struct PluginBackend {
    /// Its name, checked and interned at registration.
    pub(super) name: &'static str,
    /// Where it came from: the library's path, or "dlport_register_backend".
    origin: &'static str,
    types: Vec<DeviceType>,
    /// The plugin's callbacks and state, as registered (the operation rooms call them).
    pub(super) cb: DlportPlugin,
    me: Weak<PluginBackend>,
    /// Whether dropping the last handle calls `destroy` (cleared when a C caller keeps the
    /// plugin's state after a refused registration).
    armed: AtomicBool,
    /// Closed after `destroy` (dropped after it: fields drop after `Drop::drop`).
    _library: Option<Library>,
}

// SAFETY: the plugin contract makes every callback callable from any thread, concurrently;
// `state` is only passed back to them.
unsafe impl Send for PluginBackend {}
// SAFETY: as above; dlport never reads through `state` or the other pointers after
// registration (name and types were copied).
unsafe impl Sync for PluginBackend {}

impl core::fmt::Debug for PluginBackend {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PluginBackend")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("device_types", &self.types)
            .finish()
    }
}

impl Drop for PluginBackend {
    fn drop(&mut self) {
        if !self.armed.load(Ordering::Acquire) {
            return;
        }
        if let Some(destroy) = self.cb.destroy {
            // SAFETY: the last holder is gone, so no callback runs or will run; `destroy` is
            // called once, here (plugin contract).
            unsafe { destroy(self.cb.state) };
        }
    }
}

impl PluginBackend {
    /// Checks and copies a plugin's struct: the size and version, the name, the device types
    /// and the callback pairs. `origin` names where it came from in errors. On error nothing
    /// of the plugin is called (not even `destroy`) and `library` is closed.
    ///
    /// # Safety
    /// `plugin` is NULL or readable for its `struct_size` bytes (at least the size field);
    /// its `name` is NULL or NUL-terminated; `device_types` is readable for
    /// `num_device_types` values; every non-NULL callback follows the plugin contract.
    pub unsafe fn from_raw(
        plugin: *const DlportPlugin,
        origin: &str,
        library: Option<Library>,
    ) -> Result<Arc<Self>, Error> {
        let fail = |what: String| plugin_error("(unnamed)", origin, "registration", -1, &what);
        if plugin.is_null() {
            return Err(fail("the DlportPlugin pointer is NULL".into()));
        }
        // SAFETY: readable for at least the size field (contract).
        let size = unsafe { plugin.cast::<usize>().read_unaligned() };
        let full = std::mem::size_of::<DlportPlugin>();
        if size < full {
            return Err(fail(format!(
                "struct_size = {size} is smaller than sizeof(DlportPlugin) = {full} of interface \
                 version {DLPORT_PLUGIN_INTERFACE_VERSION}: set it to sizeof(DlportPlugin)"
            )));
        }
        // SAFETY: readable for `size` >= `full` bytes (contract): the whole version-1 struct.
        let cb = unsafe { plugin.read_unaligned() };
        let name = Self::read_name(cb.name).map_err(fail)?;
        let named = |what: String| plugin_error(&name, origin, "registration", -1, &what);
        if cb.interface_version != DLPORT_PLUGIN_INTERFACE_VERSION {
            return Err(named(format!(
                "interface_version = {} is not the version this dlport implements ({}); rebuild \
                 the plugin against this dlport.h",
                cb.interface_version, DLPORT_PLUGIN_INTERFACE_VERSION
            )));
        }
        if cb.num_device_types == 0 || cb.num_device_types > 32 || cb.device_types.is_null() {
            return Err(named(format!(
                "num_device_types = {} with device_types {}: serve 1 to 32 DLPack device types",
                cb.num_device_types,
                if cb.device_types.is_null() {
                    "NULL"
                } else {
                    "set"
                }
            )));
        }
        // SAFETY: readable for `num_device_types` values (contract).
        let raw = unsafe { std::slice::from_raw_parts(cb.device_types, cb.num_device_types) };
        let mut types = Vec::with_capacity(raw.len());
        for &t in raw {
            // The one rule of which types a plugin may take (rule.rs), for every door.
            if let Some(why) = super::rule::refusal(t) {
                return Err(named(why));
            }
            if !types.contains(&DeviceType(t)) {
                types.push(DeviceType(t));
            }
        }
        let pairs = [
            (
                "view_create",
                cb.view_create.is_some(),
                "view_destroy",
                cb.view_destroy.is_some(),
            ),
            (
                "acquire",
                cb.acquire.is_some(),
                "release",
                cb.release.is_some(),
            ),
            (
                "allocate",
                cb.allocate.is_some(),
                "deallocate",
                cb.deallocate.is_some(),
            ),
        ];
        for (a, has_a, b, has_b) in pairs {
            if has_a != has_b {
                let (set, unset) = if has_a { (a, b) } else { (b, a) };
                return Err(named(format!(
                    "callback {set} is set but {unset} is NULL: give both or neither"
                )));
            }
        }
        let name = intern(&name);
        let origin = intern(origin);
        Ok(Arc::new_cyclic(|me| Self {
            name,
            origin,
            types,
            cb,
            me: me.clone(),
            armed: AtomicBool::new(true),
            _library: library,
        }))
    }

    /// Loads a plugin library from `path` (`dlopen`, local symbols), calls its
    /// `dlport_plugin_init` and checks the struct it fills in. The path's bytes are given to
    /// `dlopen` exactly as they are (any bytes but NUL on Unix; an empty path is refused, since
    /// `dlopen("")` is the program itself). Errors name the path, and the
    /// missing symbol or the failing init. On error the library is closed again.
    ///
    /// # Safety
    /// Loading a library runs its initialisers, and the plugin's callbacks are trusted to
    /// follow the plugin contract (`dlport.h`): only load plugins you trust.
    pub unsafe fn load(path: impl AsRef<std::path::Path>) -> Result<Arc<Self>, Error> {
        let path = path.as_ref();
        // SAFETY: forwarded contract: the caller trusts the library and its init.
        let (plugin, library) = unsafe { load::open(path) }?;
        let origin = path.display().to_string();
        // SAFETY: a struct of the full size, filled in by the plugin's init (contract).
        unsafe { Self::from_raw(&plugin, &origin, Some(library)) }
    }

    fn read_name(name: *const c_char) -> Result<String, String> {
        if name.is_null() {
            return Err("name is NULL: give the backend a name such as \"opencl\"".into());
        }
        let mut bytes = Vec::new();
        for i in 0..64 {
            // SAFETY: NUL-terminated (contract): reads stop at the NUL or after 64 bytes.
            let b = unsafe { name.add(i).cast::<u8>().read() };
            if b == 0 {
                break;
            }
            bytes.push(b);
        }
        let ok = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
        if bytes.is_empty() || bytes.len() > 63 || !bytes.iter().all(ok) {
            return Err(format!(
                "name {:?} is not 1 to 63 ASCII letters, digits, '_' or '-'",
                String::from_utf8_lossy(&bytes)
            ));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Makes dropping the last handle skip `destroy`: the caller keeps the plugin's state (a
    /// C caller whose registration was refused).
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::Release);
    }

    /// Undoes [`disarm`](Self::disarm).
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    /// Where the plugin came from: its library's path, or `dlport_register_backend`.
    pub fn origin(&self) -> &'static str {
        self.origin
    }

    /// The names of the callbacks the plugin gives.
    pub fn callbacks(&self) -> Vec<&'static str> {
        let cb = &self.cb;
        [
            ("last_error", cb.last_error.is_some()),
            ("view_create", cb.view_create.is_some()),
            ("view_destroy", cb.view_destroy.is_some()),
            ("acquire", cb.acquire.is_some()),
            ("release", cb.release.is_some()),
            ("wait", cb.wait.is_some()),
            ("copy_to_host", cb.copy_to_host.is_some()),
            ("copy_from_host", cb.copy_from_host.is_some()),
            ("allocate", cb.allocate.is_some()),
            ("deallocate", cb.deallocate.is_some()),
            ("translate_device_id", cb.translate_device_id.is_some()),
            ("export_device_id", cb.export_device_id.is_some()),
            ("destroy", cb.destroy.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, on)| on.then_some(n))
        .collect()
    }

    pub(super) fn arc(&self) -> Arc<Self> {
        // `self` is reached only through an `Arc` (made by `from_raw`), so it upgrades.
        self.me
            .upgrade()
            .expect("a PluginBackend lives in the Arc made by from_raw")
    }

    /// The plugin's message for the last failure on this thread, copied.
    fn message(&self) -> String {
        // SAFETY: the plugin's own callback and state (plugin contract).
        unsafe { message_of(self.cb.last_error, self.cb.state) }
    }

    /// The error for a callback that returned `status` != 0.
    pub(super) fn failed(&self, callback: &'static str, status: c_int) -> Error {
        let msg = self.message();
        plugin_error(self.name, self.origin, callback, status, &msg)
    }

    /// The error for a callback that returned 0 but broke its contract (`what`).
    pub(super) fn lied(&self, callback: &'static str, what: &str) -> Error {
        plugin_error(
            self.name,
            self.origin,
            callback,
            0,
            &format!("returned 0 (success) but {what}; dlport refused the result"),
        )
    }

    pub(super) fn check(&self, callback: &'static str, status: c_int) -> Result<(), Error> {
        if status == 0 {
            Ok(())
        } else {
            Err(self.failed(callback, status))
        }
    }

    pub(super) fn serves(&self, device: Device) -> bool {
        self.types.contains(&device.device_type)
    }

    /// Waits for the plugin's default stream on `device` (the plugin's numbering).
    pub(super) fn wait(&self, device: Device) -> Result<(), Error> {
        let Some(wait) = self.cb.wait else {
            return Ok(());
        };
        // SAFETY: plugin contract; NULL is the plugin's default stream.
        let status = unsafe {
            wait(
                self.cb.state,
                device.device_type.0,
                device.device_id,
                std::ptr::null_mut(),
            )
        };
        self.check("wait", status)
    }

    /// Maps a producer's device id to the plugin's (`translate_device_id`; none: the same).
    pub(super) fn translate_id(&self, producer_id: i32) -> Result<i32, Error> {
        let Some(f) = self.cb.translate_device_id else {
            return Ok(producer_id);
        };
        let mut out = producer_id;
        // SAFETY: plugin contract; `out` is writable.
        let status = unsafe { f(self.cb.state, producer_id, &mut out) };
        self.check("translate_device_id", status)?;
        Ok(out)
    }

    /// Maps the plugin's device id back to the producer's (`export_device_id`; none: the
    /// same). A failing translation is an error: an export never carries the plugin's own id.
    pub(super) fn export_id(&self, local_id: i32) -> Result<i32, Error> {
        let Some(f) = self.cb.export_device_id else {
            return Ok(local_id);
        };
        let mut out = local_id;
        // SAFETY: plugin contract; `out` is writable.
        let status = unsafe { f(self.cb.state, local_id, &mut out) };
        self.check("export_device_id", status)?;
        Ok(out)
    }
}

impl Backend for PluginBackend {
    fn name(&self) -> &'static str {
        self.name
    }

    fn device_types(&self) -> &[DeviceType] {
        &self.types
    }

    fn can_access(&self, memory: Device) -> bool {
        self.serves(memory)
    }

    fn translate_device_id(&self, producer_id: i32) -> Result<i32, Error> {
        self.translate_id(producer_id)
    }

    /// The trait's form has no error path: a failing translation gives the plugin's id here.
    /// dlport's own exports of plugin tensors (`acquire_external`, `release_ownership` below)
    /// use the checked form and fail instead.
    fn export_device_id(&self, local_id: i32) -> i32 {
        self.export_id(local_id).unwrap_or(local_id)
    }

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        self.import_view(tensor, memory)
    }

    fn acquire_external(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        self.export_reference(tensor, versioned, as_device)
    }

    fn release_ownership(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        let dev = Device::new(as_device.device_type, self.export_id(as_device.device_id)?);
        tensor.release_ownership(versioned, dev)
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        self.allocate_compact(device, dtype, shape)
    }

    /// A copy of a plugin tensor goes to the plugin that made it (`memory.rs`).
    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        self.copy_by_maker(src, target)
    }
}
