//! Loading a PJRT plugin ([`PjrtPlugin`]) and creating its client ([`PjrtClient`]), whose
//! addressable devices are dlport devices ([`PjrtDevice`]).

use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, Mutex, PoisonError};

use dlport_core::abi::DeviceType;
use dlport_core::{Device, Error};

use super::result::{Api, keep};
use super::sys;
use super::types::device_type_for;
use crate::plugin::plugin_error;

/// A loaded PJRT plugin: its checked function table. Plugins stay loaded for the life of the
/// process (XLA's plugins are not built to be unloaded: their threads and static destructors
/// outlive `dlclose`), and each is initialized once.
#[derive(Debug)]
pub struct PjrtPlugin {
    pub(crate) api: Api,
}

/// The plugins loaded by path, and the `PJRT_Plugin_Initialize` functions already called.
static LOADED: Mutex<Vec<(&'static str, Arc<PjrtPlugin>)>> = Mutex::new(Vec::new());
static INITIALIZED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

impl PjrtPlugin {
    /// Loads the PJRT plugin at `path` (`dlopen`, `GetPjrtApi`), checks its table (major
    /// version, `struct_size`) and initializes it. Loading the same path again returns the
    /// same plugin.
    ///
    /// Loading a library runs its code: only load plugins you trust. Their answers are still
    /// checked.
    pub fn load(path: &str) -> Result<Arc<Self>, Error> {
        let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, p)) = loaded.iter().find(|(p, _)| *p == path) {
            return Ok(p.clone());
        }
        let table = open(path)?;
        // SAFETY: GetPjrtApi's table lives as long as the library, which is never closed.
        let plugin = unsafe { Self::from_table(table, path) }?;
        loaded.push((plugin.origin(), plugin.clone()));
        Ok(plugin)
    }

    /// A plugin from a function table already in hand (a plugin linked into the program, or a
    /// table a test builds), checked and initialized as [`load`](Self::load) does. `origin`
    /// names it in errors.
    ///
    /// # Safety
    /// `table` is NULL or a `PJRT_Api` readable for its `struct_size` bytes, valid for the
    /// rest of the process, whose non-NULL functions follow the PJRT C API.
    pub unsafe fn from_table(table: *const c_void, origin: &str) -> Result<Arc<Self>, Error> {
        // SAFETY: the caller's contract.
        let api = unsafe { Api::new(table, origin) }?;
        let init = api.function(sys::PLUGIN_INITIALIZE)? as usize;
        let mut done = INITIALIZED.lock().unwrap_or_else(PoisonError::into_inner);
        if !done.contains(&init) {
            let mut a = sys::Plugin_Initialize_Args::new();
            // SAFETY: the args of PJRT_Plugin_Initialize.
            unsafe { api.plugin_initialize(&mut a) }?;
            done.push(init);
        }
        Ok(Arc::new(Self { api }))
    }

    /// A plugin from a function table its host already initialized (`dlport.jax`: the table
    /// interposed over JAX's plugin, which JAX initialized), checked as
    /// [`from_table`](Self::from_table) does but not initialized again.
    ///
    /// # Safety
    /// As [`from_table`](Self::from_table), and the host called `PJRT_Plugin_Initialize`.
    pub unsafe fn initialized(table: *const c_void, origin: &str) -> Result<Arc<Self>, Error> {
        // SAFETY: the caller's contract.
        let api = unsafe { Api::new(table, origin) }?;
        Ok(Arc::new(Self { api }))
    }

    /// The plugin's PJRT API version, `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        (sys::API_MAJOR, self.api.minor)
    }

    /// The table's `struct_size`: how many bytes of functions it has (newer minors, more).
    pub fn struct_size(&self) -> usize {
        self.api.size
    }

    /// The extensions the plugin lists (`PJRT_Api.extension_start`): `(type, its name in
    /// pjrt_c_api.h 0.81 or None for a newer type, struct_size)`, in order.
    pub fn extensions(&self) -> Vec<(i32, Option<&'static str>, usize)> {
        self.api
            .extensions()
            .into_iter()
            .map(|(t, size)| (t, super::types::extension_name(t), size))
            .collect()
    }

    /// Where it was loaded from.
    pub fn origin(&self) -> &'static str {
        self.api.origin
    }

    /// What the plugin lacks of what dlport uses, one line per function: the functions its
    /// table is too short for or leaves NULL, and what each disables.
    pub fn missing(&self) -> Vec<String> {
        super::OPTIONAL
            .iter()
            .filter(|(slot, _)| !self.api.has(*slot))
            .map(|(slot, what)| format!("{} is missing: {what} is unavailable", slot.name))
            .collect()
    }
}

/// `dlopen`s `path` and calls its `GetPjrtApi`.
fn open(path: &str) -> Result<*const c_void, Error> {
    let fail = |what: String| plugin_error(path, path, "dlopen", -1, &what);
    #[cfg(unix)]
    {
        let c_path = CString::new(path).map_err(|_| fail("the path has a NUL byte".into()))?;
        // SAFETY: a NUL-terminated path; loading runs the library's initialisers (the caller
        // trusts the plugin).
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror's string is copied at once.
            let why = unsafe { libc::dlerror() };
            let why = if why.is_null() {
                "no message from dlerror".into()
            } else {
                // SAFETY: a NUL-terminated string from dlerror.
                unsafe { std::ffi::CStr::from_ptr(why) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(fail(format!("cannot load {path}: {why}")));
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let sym = unsafe { libc::dlsym(handle, c"GetPjrtApi".as_ptr()) };
        if sym.is_null() {
            return Err(fail(format!(
                "{path} has no symbol GetPjrtApi: it is not a PJRT plugin"
            )));
        }
        // SAFETY: the PJRT plugin contract gives the symbol this type.
        let get: unsafe extern "C" fn() -> *const c_void = unsafe { std::mem::transmute(sym) };
        // SAFETY: as above; it takes nothing and returns the table.
        Ok(unsafe { get() })
    }
    #[cfg(not(unix))]
    {
        Err(fail(
            "loading PJRT plugins is supported on Unix only".into(),
        ))
    }
}

/// A value of a client create option (`PJRT_NamedValue`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum OptionValue {
    /// A string.
    Str(String),
    /// A 64-bit integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

/// How to create a client: the plugin's create options, and the DLPack device type of its
/// memory when the platform table's is not the right one.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// `(name, value)` pairs passed to `PJRT_Client_Create`.
    pub options: Vec<(String, OptionValue)>,
    /// The device type for the platform (overrides the platform table's,
    /// [`device_type_for`](super::device_type_for); a name the table does not know is
    /// kDLExtDev without it).
    pub device_type: Option<DeviceType>,
}

/// One addressable device of a client.
#[derive(Clone, Debug)]
pub struct PjrtDevice {
    pub(crate) raw: *mut sys::PJRT_Device,
    /// The dlport device: the client's device type, the index among addressable devices.
    pub device: Device,
    /// The plugin's own id (`PJRT_DeviceDescription_Id`).
    pub id: i32,
    /// The plugin's kind (`PJRT_DeviceDescription_Kind`), or empty.
    pub kind: String,
}

pub(crate) struct ClientInner {
    pub(crate) api: Api,
    pub(crate) raw: *mut sys::PJRT_Client,
    pub(crate) devices: Vec<PjrtDevice>,
    pub(crate) device_type: DeviceType,
    pub(crate) plugin: Arc<PjrtPlugin>,
    /// `pjrt:<platform>`: the name of the client's backend and of its buffers' tensors.
    pub(crate) backend_name: &'static str,
}

// SAFETY: PJRT clients, devices and buffers may be used from any thread (the PJRT C API is
// thread-safe); the pointers are only passed back to the plugin.
unsafe impl Send for ClientInner {}
// SAFETY: as above.
unsafe impl Sync for ClientInner {}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let mut a = sys::Client_Destroy_Args::new();
        a.client = self.raw;
        // SAFETY: the last holder is gone (buffers and executables hold the client), so the
        // client is destroyed once, here. An error cannot be reported from a drop.
        let _ = unsafe { self.api.client_destroy(&mut a) };
    }
}

/// A PJRT client: the plugin's devices as dlport devices. Cloning shares it; it is destroyed
/// when the last clone, buffer and executable are gone.
#[derive(Clone)]
pub struct PjrtClient {
    pub(crate) inner: Arc<ClientInner>,
}

impl core::fmt::Debug for PjrtClient {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PjrtClient")
            .field("platform", &self.inner.api.name)
            .field("device_type", &self.inner.device_type)
            .field("devices", &self.inner.devices.len())
            .finish()
    }
}

/// A string the plugin returns as (pointer, size), copied; NULL is the plugin's lie.
fn copy_str(api: &Api, f: &'static str, p: *const c_char, n: usize) -> Result<String, Error> {
    if p.is_null() {
        return Err(api.error(f, -1, "the plugin returned a NULL string"));
    }
    // SAFETY: the plugin's string, readable for `n` bytes while its owner lives (header).
    let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n.min(4096)) };
    Ok(String::from_utf8_lossy(b).into_owned())
}

/// Refuses a `ClientOptions::device_type` that is not a DLPack device type.
fn check_device_type(api: &Api, options: &ClientOptions) -> Result<(), Error> {
    if let Some(t) = options.device_type.filter(|t| !t.is_known()) {
        return Err(api.error(
            "PjrtClient::create",
            -1,
            &format!(
                "ClientOptions::device_type = {} is not a DLPack device type: name one of \
                 DLPack's DLDeviceType codes (kDLCPU = 1, kDLCUDA = 2, …, kDLExtDev = 12)",
                t.0
            ),
        ));
    }
    Ok(())
}

impl PjrtClient {
    /// Creates a client of `plugin` (`PJRT_Client_Create` with `options`), reads its platform
    /// name and its addressable devices.
    pub fn create(plugin: &Arc<PjrtPlugin>, options: &ClientOptions) -> Result<Self, Error> {
        let api = plugin.api;
        check_device_type(&api, options)?;
        let names: Vec<CString> = options
            .options
            .iter()
            .map(|(n, _)| CString::new(n.as_str()).unwrap_or_default())
            .collect();
        let strs: Vec<&str> = options
            .options
            .iter()
            .map(|(_, v)| {
                if let OptionValue::Str(s) = v {
                    s.as_str()
                } else {
                    ""
                }
            })
            .collect();
        let values: Vec<sys::NamedValue> = options
            .options
            .iter()
            .zip(&names)
            .zip(&strs)
            .map(|(((_, v), n), s)| sys::NamedValue::of(n, v, s))
            .collect();
        let mut a = sys::Client_Create_Args::new();
        a.create_options = values.as_ptr().cast();
        a.num_options = values.len();
        // SAFETY: the args of PJRT_Client_Create; the options live during the call.
        unsafe { api.client_create(&mut a) }?;
        if a.client.is_null() {
            return Err(api.error(sys::CLIENT_CREATE.name, -1, "returned a NULL client"));
        }
        // SAFETY: a client the plugin just made, handed to the new value alone.
        unsafe { Self::adopt(plugin, a.client.cast(), options) }
    }

    /// A client value over `raw`, a `PJRT_Client*` of `plugin`'s table that the caller hands
    /// over (`dlport.jax` hands over a counted borrow of JAX's own client): its platform name
    /// and addressable devices read, `PJRT_Client_Destroy` called through `plugin`'s table when
    /// the last clone, buffer and executable are gone (or at once, if this fails).
    ///
    /// # Safety
    /// `raw` is a live client of `plugin`'s table, and the value owns one `PJRT_Client_Destroy`
    /// of it.
    pub unsafe fn adopt(
        plugin: &Arc<PjrtPlugin>,
        raw: *mut c_void,
        options: &ClientOptions,
    ) -> Result<Self, Error> {
        let api = plugin.api;
        let mut inner = ClientInner {
            api,
            raw: raw.cast(),
            devices: Vec::new(),
            device_type: DeviceType::CPU,
            plugin: plugin.clone(),
            backend_name: "pjrt",
        };
        // From here on a failure destroys the client (ClientInner's drop).
        check_device_type(&api, options)?;
        let mut p = sys::Client_PlatformName_Args::new();
        p.client = inner.raw;
        // SAFETY: the args of PJRT_Client_PlatformName.
        unsafe { api.client_platform_name(&mut p) }?;
        let platform = copy_str(
            &api,
            sys::CLIENT_PLATFORM_NAME.name,
            p.platform_name,
            p.platform_name_size,
        )?;
        inner.api = api.named(keep(&platform));
        inner.backend_name = keep(&format!("pjrt:{platform}"));
        let api = inner.api;
        // The caller's device type, else the platform table's, else kDLExtDev: a platform
        // dlport does not know is never labelled as another vendor's memory.
        inner.device_type = device_type_for(&platform, options.device_type);
        let mut d = sys::Client_AddressableDevices_Args::new();
        d.client = inner.raw;
        // SAFETY: the args of PJRT_Client_AddressableDevices.
        unsafe { api.client_addressable_devices(&mut d) }?;
        if d.addressable_devices.is_null() && d.num_addressable_devices > 0 {
            return Err(api.error(
                sys::CLIENT_ADDRESSABLE_DEVICES.name,
                -1,
                "returned a NULL device list with a non-zero count",
            ));
        }
        for i in 0..d.num_addressable_devices.min(1 << 16) {
            // SAFETY: the list holds `num_addressable_devices` devices while the client lives.
            let raw = unsafe { *d.addressable_devices.add(i) };
            let (id, kind) = describe(&api, raw)?;
            inner.devices.push(PjrtDevice {
                raw,
                device: Device::new(inner.device_type, i as i32),
                id,
                kind,
            });
        }
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The platform name (`cpu`, `cuda`, `xpu`, …).
    pub fn platform(&self) -> &'static str {
        self.inner.api.name
    }

    /// The name of the client's backend (`pjrt:<platform>`), which its buffers' tensors carry.
    pub fn backend_name(&self) -> &'static str {
        self.inner.backend_name
    }

    /// The DLPack device type of the platform.
    pub fn device_type(&self) -> DeviceType {
        self.inner.device_type
    }

    /// The addressable devices, in the plugin's order (dlport's device id is the index).
    pub fn devices(&self) -> &[PjrtDevice] {
        &self.inner.devices
    }

    /// The plugin.
    pub fn plugin(&self) -> &Arc<PjrtPlugin> {
        &self.inner.plugin
    }

    /// The device with dlport id `id`, or an error naming the id and the count.
    pub(crate) fn device(&self, id: i32) -> Result<&PjrtDevice, Error> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.inner.devices.get(i))
            .ok_or_else(|| {
                self.inner.api.error(
                    "device",
                    -1,
                    &format!(
                        "device_id {id} is not an addressable device (the client has {})",
                        self.inner.devices.len()
                    ),
                )
            })
    }

    /// The dlport id of a plugin device pointer.
    pub(crate) fn index_of(&self, raw: *mut sys::PJRT_Device) -> Option<i32> {
        self.inner
            .devices
            .iter()
            .position(|d| d.raw == raw)
            .map(|i| i as i32)
    }

    pub(crate) fn api(&self) -> &Api {
        &self.inner.api
    }

    /// Whether `other` is this client (a clone of it), not merely one of the same plugin.
    pub(crate) fn same(&self, other: &PjrtClient) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// A device's id and kind, through its description.
fn describe(api: &Api, raw: *mut sys::PJRT_Device) -> Result<(i32, String), Error> {
    let mut g = sys::Device_GetDescription_Args::new();
    g.device = raw;
    // SAFETY: the args of PJRT_Device_GetDescription.
    unsafe { api.device_get_description(&mut g) }?;
    if g.device_description.is_null() {
        return Err(api.error(sys::DEVICE_GET_DESCRIPTION.name, -1, "returned NULL"));
    }
    let mut i = sys::DeviceDescription_Id_Args::new();
    i.device_description = g.device_description;
    // SAFETY: the args of PJRT_DeviceDescription_Id.
    unsafe { api.device_description_id(&mut i) }?;
    let mut k = sys::DeviceDescription_Kind_Args::new();
    k.device_description = g.device_description;
    // The kind is informative: a plugin without it still works.
    // SAFETY: the args of PJRT_DeviceDescription_Kind.
    let kind = match unsafe { api.device_description_kind(&mut k) } {
        Ok(()) => copy_str(
            api,
            sys::DEVICE_DESCRIPTION_KIND.name,
            k.device_kind,
            k.device_kind_size,
        )?,
        Err(_) => String::new(),
    };
    Ok((i.id, kind))
}

impl sys::NamedValue {
    fn of(name: &CString, v: &OptionValue, s: &str) -> Self {
        let (kind, value, value_size) = match v {
            OptionValue::Str(_) => (0, s.as_ptr() as u64, s.len()),
            OptionValue::Int(i) => (1, *i as u64, 1),
            OptionValue::Bool(b) => (4, u64::from(*b), 1),
        };
        Self {
            head: sys::Head {
                struct_size: Self::STRUCT_SIZE,
                extension_start: std::ptr::null_mut(),
            },
            name: name.as_ptr(),
            name_size: name.as_bytes().len(),
            kind,
            value,
            value_size,
        }
    }
}
