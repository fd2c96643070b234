//! [`PluginBackend`]: the core `Backend` trait implemented by calling a C plugin's callbacks.
//! Every call into the plugin is here.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use dlport_core::abi::{DLTensor, FLAG_READ_ONLY};
use dlport_core::backend::{AlignedBuffer, Backend, Buffer, CPU_ALIGN, compact_bytes};
use dlport_core::{
    Access, BackendError, BackendReport, DataType, Device, DeviceType, DispatchError, Error,
    ExportBuilder, ManagedTensor, Tensor, TensorRef, TensorStorage,
};

use super::interface::{DLPORT_PLUGIN_INTERFACE_VERSION, DlportPlugin, DlportPluginLastError};
use super::load::Library;

/// The longest plugin message kept, in bytes.
const MESSAGE_CAP: usize = 1023;
/// How many distinct texts (plugin names, origins, messages) dlport keeps for error reports;
/// past it a message is replaced by a fixed text, so a plugin cannot grow dlport's memory
/// without bound.
const INTERNED_CAP: usize = 4096;

/// Returns a `'static` copy of `s`, shared by equal texts (errors carry `&'static str`s).
pub(crate) fn intern(s: &str) -> &'static str {
    static TEXTS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut texts = TEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(t) = texts.get(s) {
        return t;
    }
    if texts.len() >= INTERNED_CAP {
        return "(message not kept: dlport keeps at most 4096 distinct plugin texts)";
    }
    let t: &'static str = Box::leak(s.to_owned().into_boxed_str());
    texts.insert(t);
    t
}

/// The message a plugin's `last_error` gives for `state`, copied (at most `MESSAGE_CAP` bytes).
///
/// # Safety
/// `last_error` is NULL or a callback following its contract for `state`.
pub(crate) unsafe fn message_of(last_error: DlportPluginLastError, state: *mut c_void) -> String {
    let Some(last) = last_error else {
        return "the plugin gives no message (no last_error callback)".into();
    };
    // SAFETY: plugin contract: NULL or a NUL-terminated string valid during this call.
    let p = unsafe { last(state) };
    if p.is_null() {
        return "the plugin gives no message".into();
    }
    let mut bytes = Vec::new();
    for i in 0..MESSAGE_CAP {
        // SAFETY: NUL-terminated (contract): reads stop at the NUL or the cap.
        let b = unsafe { p.add(i).cast::<u8>().read() };
        if b == 0 {
            break;
        }
        bytes.push(b);
    }
    if bytes.is_empty() {
        return "the plugin gives no message".into();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A plugin error (`DLPORT_ERR_BACKEND`, code 32), shown as
/// `backend "NAME": OPERATION failed with code N: DETAIL (plugin "NAME" from ORIGIN)`: the
/// plugin, the callback or step, the plugin's status and what it or dlport says. The texts are
/// interned (errors carry `&'static str`s), within the bound of [`intern`].
pub(crate) fn plugin_error(
    name: &str,
    origin: &str,
    operation: &'static str,
    code: i32,
    detail: &str,
) -> Error {
    Error::Backend(BackendError::Failed {
        code,
        report: BackendReport::new(
            intern(name),
            operation,
            intern(&if name == origin {
                format!("{detail} (plugin library {origin})")
            } else {
                format!("{detail} (plugin \"{name}\" from {origin})")
            }),
        ),
    })
}

/// A C plugin as a dlport backend. Register it in any `Registry` (`Arc<PluginBackend>` is a
/// `BackendRef`), or in the process-wide plugin table with `dlport_register_backend`.
///
/// Tensors, views and exports made through it hold it (and its library) alive; when the last
/// handle is gone the plugin's `destroy` runs once (unless [`disarm`](Self::disarm)ed) and a
/// library dlport loaded is closed.
pub struct PluginBackend {
    name: &'static str,
    /// Where it came from: the library's path, or "dlport_register_backend".
    origin: &'static str,
    types: Vec<DeviceType>,
    cb: DlportPlugin,
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

/// A `DLTensor` describing a view, with the shape and strides it points to.
struct Described {
    tensor: DLTensor,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
}

impl Described {
    fn of(view: &TensorRef<'_>, device_id: i32) -> Self {
        let mut shape = view.shape().to_vec();
        let mut strides: Vec<i64> = view.strides().collect();
        let tensor = DLTensor {
            data: view.data(),
            device: Device::new(view.device().device_type, device_id),
            ndim: shape.len() as i32,
            dtype: view.dtype(),
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: view.byte_offset(),
        };
        Self {
            tensor,
            _shape: shape,
            _strides: strides,
        }
    }

    /// A compact tensor over `data` (a device handle) on `device`.
    fn compact(data: *mut c_void, device: Device, dtype: DataType, shape: &[i64]) -> Self {
        let mut shape = shape.to_vec();
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].wrapping_mul(shape[i + 1].max(1));
        }
        let tensor = DLTensor {
            data,
            device,
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        };
        Self {
            tensor,
            _shape: shape,
            _strides: strides,
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
            if t <= 0 || t == DeviceType::CPU.0 {
                return Err(named(format!(
                    "device_types has {t}: a plugin serves device types other than kDLCPU (1), \
                     as positive DLPack codes"
                )));
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

    fn arc(&self) -> Arc<Self> {
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
    fn failed(&self, callback: &'static str, status: c_int) -> Error {
        let msg = self.message();
        plugin_error(self.name, self.origin, callback, status, &msg)
    }

    /// The error for a callback that returned 0 but broke its contract (`what`).
    fn lied(&self, callback: &'static str, what: &str) -> Error {
        plugin_error(
            self.name,
            self.origin,
            callback,
            0,
            &format!("returned 0 (success) but {what}; dlport refused the result"),
        )
    }

    fn check(&self, callback: &'static str, status: c_int) -> Result<(), Error> {
        if status == 0 {
            Ok(())
        } else {
            Err(self.failed(callback, status))
        }
    }

    fn serves(&self, device: Device) -> bool {
        self.types.contains(&device.device_type)
    }

    /// Waits for the plugin's default stream on `device` (the plugin's numbering).
    fn wait(&self, device: Device) -> Result<(), Error> {
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

    /// Allocates `bytes` on `device` (the plugin's numbering): the handle, owned.
    fn allocate_raw(&self, device: Device, bytes: usize) -> Result<Allocation, Error> {
        let Some(allocate) = self.cb.allocate else {
            return Err(Error::Backend(BackendError::unsupported(
                self.name,
                "allocation (the plugin has no allocate callback)",
            )));
        };
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: plugin contract; `handle` is writable.
        let status = unsafe {
            allocate(
                self.cb.state,
                device.device_type.0,
                device.device_id,
                bytes,
                &mut handle,
            )
        };
        self.check("allocate", status)?;
        if handle.is_null() {
            return Err(self.lied("allocate", "a NULL handle"));
        }
        Ok(Allocation {
            handle,
            bytes,
            device,
            plugin: self.arc(),
        })
    }
}

/// A plugin allocation: deallocated once, when dropped.
struct Allocation {
    handle: *mut c_void,
    bytes: usize,
    device: Device,
    plugin: Arc<PluginBackend>,
}

// SAFETY: the handle is the plugin's, usable from any thread (plugin contract).
unsafe impl Send for Allocation {}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let Some(deallocate) = self.plugin.cb.deallocate {
            // SAFETY: a handle from `allocate`, given back once, here (dropped once).
            unsafe {
                deallocate(
                    self.plugin.cb.state,
                    self.device.device_type.0,
                    self.device.device_id,
                    self.handle,
                )
            };
        }
    }
}

// SAFETY: the handle is the plugin's allocation of `bytes` bytes on `device`, valid until this
// value drops; nobody else holds it (exclusive).
unsafe impl TensorStorage for Allocation {
    fn data_ptr(&mut self) -> *mut c_void {
        self.handle
    }
    fn byte_len(&self) -> usize {
        self.bytes
    }
    fn device(&self) -> Device {
        self.device
    }
}

/// An imported tensor viewed by the plugin: the plugin's view handle is destroyed, then the
/// producer's tensor released, once, when dropped.
struct View {
    view: *mut c_void,
    managed: Option<ManagedTensor>,
    data: *mut c_void,
    len: usize,
    memory: Device,
    access: Access,
    plugin: Arc<PluginBackend>,
}

// SAFETY: the view handle is the plugin's (any thread, plugin contract); ManagedTensor is Send.
unsafe impl Send for View {}

impl Drop for View {
    fn drop(&mut self) {
        if !self.view.is_null() {
            if let Some(destroy) = self.plugin.cb.view_destroy {
                // SAFETY: a handle from `view_create`, given back once, here.
                unsafe { destroy(self.plugin.cb.state, self.view) };
            }
        }
        // The producer's deleter runs after the plugin let go of its view.
        drop(self.managed.take());
    }
}

// SAFETY: `data` is the imported tensor's own, valid until its deleter runs (when this value
// drops) for `len` bytes (byte_offset + span); the access is the import's own.
unsafe impl TensorStorage for View {
    fn data_ptr(&mut self) -> *mut c_void {
        self.data
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        self.memory
    }
    fn access(&self) -> Access {
        self.access
    }
}

/// An export holding the plugin's external reference and dlport's own counted one: the
/// plugin's is released, then dlport's, once, when the consumer's deleter runs.
struct ExternalRef {
    reference: *mut c_void,
    inner: Option<ManagedTensor>,
    len: usize,
    device: Device,
    plugin: Arc<PluginBackend>,
}

// SAFETY: as for View.
unsafe impl Send for ExternalRef {}

impl Drop for ExternalRef {
    fn drop(&mut self) {
        if let Some(release) = self.plugin.cb.release {
            // SAFETY: a handle from `acquire` (never NULL here), given back once, here.
            unsafe { release(self.plugin.cb.state, self.reference) };
        }
        drop(self.inner.take());
    }
}

// SAFETY: `data` is the inner export's, which this value keeps alive; the access is shared
// (the exporting tensor's other handles may read and write it).
unsafe impl TensorStorage for ExternalRef {
    fn data_ptr(&mut self) -> *mut c_void {
        self.inner
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| m.view().data())
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn device(&self) -> Device {
        self.device
    }
    fn access(&self) -> Access {
        match &self.inner {
            Some(m) if m.is_read_only() => Access::ReadOnly,
            _ => Access::Shared,
        }
    }
}

fn byte_len_of(view: &TensorRef<'_>) -> usize {
    let end = i128::from(view.byte_offset()) + i128::from(view.byte_span().hi);
    usize::try_from(end.max(0)).unwrap_or(usize::MAX)
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
        let Some(f) = self.cb.translate_device_id else {
            return Ok(producer_id);
        };
        let mut out = producer_id;
        // SAFETY: plugin contract; `out` is writable.
        let status = unsafe { f(self.cb.state, producer_id, &mut out) };
        self.check("translate_device_id", status)?;
        Ok(out)
    }

    fn export_device_id(&self, local_id: i32) -> i32 {
        let Some(f) = self.cb.export_device_id else {
            return local_id;
        };
        let mut out = local_id;
        // SAFETY: plugin contract; `out` is writable.
        let status = unsafe { f(self.cb.state, local_id, &mut out) };
        // The trait's export has no error path: a failing translation keeps the plugin's id.
        if status == 0 { out } else { local_id }
    }

    fn view_external(&self, tensor: ManagedTensor, memory: Device) -> Result<Tensor, Error> {
        if !self.serves(memory) {
            return Err(Error::Dispatch(DispatchError::CopyRequired {
                reason: dlport_core::CopyReason::Device {
                    from: memory,
                    to: memory,
                },
            }));
        }
        let local = Device::new(
            memory.device_type,
            self.translate_device_id(memory.device_id)?,
        );
        let view = tensor.view();
        let (dtype, shape, byte_offset) = (view.dtype(), view.shape().to_vec(), view.byte_offset());
        let strides: Vec<i64> = view.strides().collect();
        let read_only = if tensor.is_read_only() {
            FLAG_READ_ONLY
        } else {
            0
        };
        let flags = view.flags() | read_only;
        let (data, len) = (view.data(), byte_len_of(&view));
        let mut handle: *mut c_void = std::ptr::null_mut();
        if let Some(create) = self.cb.view_create {
            let described = Described::of(&view, local.device_id);
            // SAFETY: plugin contract; the tensor and its arrays live during the call.
            let status = unsafe { create(self.cb.state, &described.tensor, &mut handle) };
            // On error `tensor` is dropped on return: the producer's deleter runs once.
            self.check("view_create", status)?;
            if handle.is_null() {
                return Err(self.lied("view_create", "a NULL view"));
            }
        }
        let storage = View {
            view: handle,
            access: tensor.access(),
            managed: Some(tensor),
            data,
            len,
            memory,
            plugin: self.arc(),
        };
        // On error the storage drops: view_destroy, then the producer's deleter, once each.
        Tensor::new(
            Buffer::new(Box::new(storage)),
            self.name,
            dtype,
            &shape,
            Some(&strides),
            byte_offset,
            flags,
        )
        .map(|t| t.with_device(local))
    }

    fn acquire_external(
        &self,
        tensor: &Tensor,
        versioned: bool,
        as_device: Device,
    ) -> Result<ManagedTensor, Error> {
        self.wait(tensor.device())?;
        let dev = Device::new(
            as_device.device_type,
            self.export_device_id(as_device.device_id),
        );
        let inner = dlport_core::backend::acquire_external(tensor, versioned, dev)?;
        let Some(acquire) = self.cb.acquire else {
            return Ok(inner);
        };
        let view = inner.view();
        let (dtype, shape, byte_offset) = (view.dtype(), view.shape().to_vec(), view.byte_offset());
        let strides: Vec<i64> = view.strides().collect();
        let len = byte_len_of(&view);
        let (read_only, copied) = (inner.is_read_only(), inner.is_copied());
        let described = Described::of(&view, tensor.device().device_id);
        let mut reference: *mut c_void = std::ptr::null_mut();
        // SAFETY: plugin contract; the tensor and its arrays live during the call.
        let status = unsafe { acquire(self.cb.state, &described.tensor, &mut reference) };
        drop(described);
        // On error `inner` drops here: dlport's own reference goes, the plugin holds nothing.
        self.check("acquire", status)?;
        if reference.is_null() {
            return Err(self.lied("acquire", "a NULL reference"));
        }
        let storage = ExternalRef {
            reference,
            inner: Some(inner),
            len,
            device: dev,
            plugin: self.arc(),
        };
        let builder = ExportBuilder::new(storage, dtype, &shape)
            .strides(&strides)
            .byte_offset(byte_offset)
            .read_only(read_only)
            .copied(copied);
        if versioned {
            builder.build()
        } else {
            builder.build_legacy()
        }
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        let bytes = compact_bytes(dtype, shape)?;
        let alloc = self.allocate_raw(device, bytes)?;
        Tensor::new(
            Buffer::new(Box::new(alloc)),
            self.name,
            dtype,
            shape,
            None,
            0,
            0,
        )
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        let from = src.device();
        if self.serves(from) && target.device_type == DeviceType::CPU {
            let Some(to_host) = self.cb.copy_to_host else {
                return Ok(None);
            };
            let local = self.translate_device_id(from.device_id)?;
            let bytes = compact_bytes(src.dtype(), src.shape())?;
            let host = AlignedBuffer::zeroed(bytes, CPU_ALIGN)?;
            let described = Described::of(src, local);
            // SAFETY: plugin contract; `host` is writable for `bytes` bytes and the tensor
            // and its arrays live during the call.
            let status = unsafe {
                to_host(
                    self.cb.state,
                    &described.tensor,
                    host.as_ptr().cast(),
                    bytes,
                    std::ptr::null_mut(),
                )
            };
            self.check("copy_to_host", status)?;
            let t = Tensor::new(
                Buffer::new(Box::new(host)),
                "cpu",
                src.dtype(),
                src.shape(),
                None,
                0,
                0,
            )?;
            return Ok(Some(t));
        }
        if self.serves(target) && from.is_host_accessible() {
            let (Some(from_host), Some(_)) = (self.cb.copy_from_host, self.cb.allocate) else {
                return Ok(None);
            };
            let local = Device::new(
                target.device_type,
                self.translate_device_id(target.device_id)?,
            );
            let bytes = compact_bytes(src.dtype(), src.shape())?;
            // A compact row-major source is read in place; any other layout is compacted on
            // the host first (the plugin receives compact bytes).
            let staged;
            let host: *const c_void = if src.contiguity().is_row_major() && bytes > 0 {
                src.data()
                    .cast::<u8>()
                    .wrapping_add(src.byte_offset() as usize)
                    .cast_const()
                    .cast()
            } else {
                staged = dlport_core::backend::compact_copy(src, Some(u64::MAX))?;
                staged.as_ptr().cast_const().cast()
            };
            let alloc = self.allocate_raw(local, bytes)?;
            let described = Described::compact(alloc.handle, local, src.dtype(), src.shape());
            // SAFETY: plugin contract; `host` is readable for `bytes` bytes (a host-accessible
            // validated view, or the staging copy, both alive here).
            let status = unsafe {
                from_host(
                    self.cb.state,
                    host,
                    bytes,
                    &described.tensor,
                    std::ptr::null_mut(),
                )
            };
            // On error `alloc` drops: deallocate runs once.
            self.check("copy_from_host", status)?;
            let t = Tensor::new(
                Buffer::new(Box::new(alloc)),
                self.name,
                src.dtype(),
                src.shape(),
                None,
                0,
                0,
            )?;
            return Ok(Some(t.with_device(target)));
        }
        Ok(None)
    }
}
