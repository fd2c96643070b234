//! The C plugin interface: `DlportPlugin`, its callbacks and constants, as the header shows them.

use std::ffi::{c_char, c_int, c_void};

use dlport_core::abi::DLTensor;

/// The plugin interface version this dlport implements. A plugin sets
/// `DlportPlugin.interface_version` to the version it was written for; dlport refuses any
/// other (`DLPORT_ERR_BACKEND`, naming the plugin, the field and both versions). Later
/// versions only append fields, and `struct_size` tells dlport which ones a plugin has.
pub const DLPORT_PLUGIN_INTERFACE_VERSION: u32 = 1;

/// The status a plugin callback returns on success. Any other value is the plugin's own error
/// code: dlport turns it into `DLPORT_ERR_BACKEND` with a message naming the plugin, the
/// callback, the code and the plugin's `last_error` text.
pub const DLPORT_PLUGIN_OK: c_int = 0;

/// Returns the plugin's message for the last failure of a callback on the calling thread
/// (NULL or "" for none). dlport calls it right after a callback returns a non-zero status, on
/// the same thread, and copies at most 1023 bytes of it (up to its NUL) before returning; the
/// string stays the plugin's.
pub type DlportPluginLastError = Option<unsafe extern "C" fn(state: *mut c_void) -> *const c_char>;

/// Import: checks that `tensor` (on a device the plugin serves, `data` being the plugin's handle
/// such as a `cl_mem`, `byte_offset` kept apart) is memory the plugin can use, and returns in
/// `*view_out` a non-NULL handle the plugin keeps for the view (a retained reference, say).
/// `tensor` and its arrays are valid only during the call. dlport calls `view_destroy` with
/// the handle exactly once, when the last user of the view is gone and before the producer's
/// DLPack deleter runs. On a non-zero status nothing is held and `view_destroy` is not called;
/// a zero status with a NULL `*view_out` is refused (the import fails, the producer's tensor is
/// released) and `view_destroy` is not called.
pub type DlportPluginViewCreate = Option<
    unsafe extern "C" fn(
        state: *mut c_void,
        tensor: *const DLTensor,
        view_out: *mut *mut c_void,
    ) -> c_int,
>;

/// Releases a handle returned by `view_create` (exactly once, on any thread). It cannot fail.
pub type DlportPluginViewDestroy =
    Option<unsafe extern "C" fn(state: *mut c_void, view: *mut c_void)>;

/// Export: takes an external reference to the memory of `tensor` before dlport hands it to a
/// DLPack consumer, returning a non-NULL handle in `*ref_out`. dlport calls `release` with it
/// exactly once, when the consumer's deleter runs. Failure and a NULL handle as for
/// `view_create` (the export fails; nothing is handed out).
pub type DlportPluginAcquire = Option<
    unsafe extern "C" fn(
        state: *mut c_void,
        tensor: *const DLTensor,
        ref_out: *mut *mut c_void,
    ) -> c_int,
>;

/// Releases a handle returned by `acquire` (exactly once, on any thread, possibly after the
/// plugin was unregistered: the plugin stays loaded until then). It cannot fail.
pub type DlportPluginRelease =
    Option<unsafe extern "C" fn(state: *mut c_void, reference: *mut c_void)>;

/// Makes the work queued on `stream` (the plugin's stream or queue, such as a
/// `cl_command_queue`; NULL: the plugin's own default one) on the device
/// `device_type`/`device_id` (the plugin's numbering) complete before the memory is read by
/// someone else. dlport calls it before every export of a plugin tensor, with NULL.
pub type DlportPluginWait = Option<
    unsafe extern "C" fn(
        state: *mut c_void,
        device_type: i32,
        device_id: i32,
        stream: *mut c_void,
    ) -> c_int,
>;

/// Copies the elements of `src` (device memory the plugin serves, any strides it supports) to
/// `dst`, host memory of `dst_bytes` bytes, compact and row-major. `stream` is the stream to
/// order the copy on (NULL: the plugin's default); the copy is complete when the call returns.
/// A plugin that cannot copy a layout returns an error saying so.
pub type DlportPluginCopyToHost = Option<
    unsafe extern "C" fn(
        state: *mut c_void,
        src: *const DLTensor,
        dst: *mut c_void,
        dst_bytes: usize,
        stream: *mut c_void,
    ) -> c_int,
>;

/// Copies `src_bytes` bytes of compact row-major host memory into the elements of `dst`
/// (device memory the plugin serves; dlport passes its own compact allocations). Complete when
/// the call returns, as for `copy_to_host`.
pub type DlportPluginCopyFromHost = Option<
    unsafe extern "C" fn(
        state: *mut c_void,
        src: *const c_void,
        src_bytes: usize,
        dst: *const DLTensor,
        stream: *mut c_void,
    ) -> c_int,
>;

/// Allocates `bytes` bytes (zeroed where the device can) on `device_type`/`device_id` (the
/// plugin's numbering) and returns a non-NULL handle, the future `DLTensor.data`, in
/// `*handle_out` (also for 0 bytes). dlport calls `deallocate` with it exactly once.
pub type DlportPluginAllocate = Option<
    unsafe extern "C" fn(
        state: *mut c_void,
        device_type: i32,
        device_id: i32,
        bytes: usize,
        handle_out: *mut *mut c_void,
    ) -> c_int,
>;

/// Frees a handle returned by `allocate` (exactly once, on any thread). It cannot fail.
pub type DlportPluginDeallocate = Option<
    unsafe extern "C" fn(state: *mut c_void, device_type: i32, device_id: i32, handle: *mut c_void),
>;

/// Maps a device id between a DLPack producer's numbering and the plugin's (`translate`: the
/// producer's to the plugin's, on import; `export`: back, on export). NULL: the identity.
pub type DlportPluginDeviceId =
    Option<unsafe extern "C" fn(state: *mut c_void, id: i32, id_out: *mut i32) -> c_int>;

/// Called exactly once, after the plugin was unregistered (or, for a plugin in a `Registry` of
/// Rust code, dropped) and the last tensor, view and export that uses it is gone; then dlport
/// closes the plugin's library if it loaded it. No callback is called afterwards. It runs when
/// the last handle to the plugin is gone, on the thread that lets go of it: possibly another
/// thread, a moment after the last tensor was freed, when a call running there at that moment
/// (a listing by `dlport_backends`, a lookup, a registration) held the plugin until it returned.
/// So `destroy` is callable from any thread, and a program that must know it ran waits for it
/// (a flag `destroy` sets), never for the free of the last tensor to return. When a
/// registration fails: `dlport_register_backend` never calls `destroy` (its caller keeps the
/// state); `dlport_load_plugin` calls it when the plugin's init succeeded and its struct was
/// valid (a name already in use), and never after a failed init or a refused struct (so an
/// init frees what it made when it fails, and fills the struct in correctly).
pub type DlportPluginDestroy = Option<unsafe extern "C" fn(state: *mut c_void)>;

/// A device backend written in C: its name, the DLPack device types it serves, and callbacks.
///
/// Versioning: `struct_size` is `sizeof(DlportPlugin)` as the plugin was compiled; dlport reads
/// only that many bytes (fields past it are taken as NULL) and refuses a size smaller than
/// version 1's. `interface_version` must be `DLPORT_PLUGIN_INTERFACE_VERSION`.
///
/// Required: `name`, `device_types`/`num_device_types` (1 to 32 types), and in pairs either both
/// or neither of `view_create`/`view_destroy`, `acquire`/`release`, `allocate`/`deallocate`.
/// Every other callback may be NULL: without `view_create` an import is a view that the plugin
/// is not told about; without `acquire` an export is a reference counted by dlport alone;
/// without `copy_to_host`/`copy_from_host` (or `allocate`) those copies are refused; without
/// `wait` exports do not wait.
///
/// Threads: dlport may call any callback from any thread, several at once; a plugin makes its
/// callbacks thread-safe. Callbacks must not unwind (C++ exceptions), must not call back into
/// dlport, and must return (dlport cannot time them out).
///
/// Ownership: dlport copies the struct and the name and device types during registration; the
/// caller's struct may be freed when the call returns. `state` is the plugin's and is passed
/// to every callback; dlport never reads it.
///
/// Dispatch: a new tensor (an import, an allocation, a copy of a producer's tensor) goes to the
/// latest registered plugin serving its device type; every later operation on a plugin's
/// tensor (its export, `wait`, `acquire`, `copy_to_host`) goes to the plugin that made it,
/// whatever other plugin serves the same type, or fails with `DLPORT_ERR_NO_BACKEND` once
/// that plugin is unregistered. Device ids: a caller's id is translated once on the way in
/// (`translate_device_id`) and once on the way out (`export_device_id`); every callback is
/// given the plugin's numbering, and a failing translation fails the operation.
///
/// What dlport cannot check (a plugin's promise): that handles are the plugin's, that
/// copies move the right bytes, that `destroy` frees what the plugin holds, and that the
/// plugin does not free memory behind a handle dlport still holds.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DlportPlugin {
    /// `sizeof(DlportPlugin)` as the plugin was compiled.
    pub struct_size: usize,
    /// `DLPORT_PLUGIN_INTERFACE_VERSION` as the plugin was compiled.
    pub interface_version: u32,
    /// The backend's name, NUL-terminated: 1 to 63 bytes of ASCII letters, digits, `_` and `-`,
    /// unique among the registered backends ("opencl", "xpu").
    pub name: *const c_char,
    /// The DLPack device types served (`kDLOpenCL` = 4, `kDLOneAPI` = 14, ...). Refused at
    /// registration, naming the field and the value, in every build and on every machine:
    /// host-class types (kDLCPU, kDLCUDAHost, kDLROCMHost, kDLTPUHost, kDLCUDAManaged: a
    /// plugin's handles are never presented as host memory) and the types dlport's built-in
    /// backends serve (kDLCUDA, kDLCUDAHost, kDLCUDAManaged), whether or not a driver is
    /// present.
    pub device_types: *const i32,
    /// How many `device_types` there are.
    pub num_device_types: usize,
    /// The plugin's own state, passed to every callback.
    pub state: *mut c_void,
    /// See `DlportPluginLastError`.
    pub last_error: DlportPluginLastError,
    /// See `DlportPluginViewCreate`.
    pub view_create: DlportPluginViewCreate,
    /// See `DlportPluginViewDestroy`.
    pub view_destroy: DlportPluginViewDestroy,
    /// See `DlportPluginAcquire`.
    pub acquire: DlportPluginAcquire,
    /// See `DlportPluginRelease`.
    pub release: DlportPluginRelease,
    /// See `DlportPluginWait`.
    pub wait: DlportPluginWait,
    /// See `DlportPluginCopyToHost`.
    pub copy_to_host: DlportPluginCopyToHost,
    /// See `DlportPluginCopyFromHost`.
    pub copy_from_host: DlportPluginCopyFromHost,
    /// See `DlportPluginAllocate`.
    pub allocate: DlportPluginAllocate,
    /// See `DlportPluginDeallocate`.
    pub deallocate: DlportPluginDeallocate,
    /// See `DlportPluginDeviceId` (producer's id to the plugin's).
    pub translate_device_id: DlportPluginDeviceId,
    /// See `DlportPluginDeviceId` (the plugin's id to the producer's).
    pub export_device_id: DlportPluginDeviceId,
    /// See `DlportPluginDestroy`.
    pub destroy: DlportPluginDestroy,
}

/// The plugin library's entry point, exported under the name `dlport_plugin_init`:
/// `int dlport_plugin_init(uint32_t interface_version, DlportPlugin *plugin, size_t size)`.
/// dlport passes the version it implements and a zeroed struct of `size` bytes; the plugin
/// fills it in (setting `struct_size` and `interface_version`) and returns 0, or a non-zero
/// status (for instance when no device is present) that `dlport_load_plugin` reports with the
/// path. A failing init may set `last_error` (and `state`) first: dlport then calls it once,
/// right away, for the message. After a non-zero status dlport calls nothing else (not even
/// `destroy`) and closes the library.
pub type DlportPluginInit = Option<
    unsafe extern "C" fn(interface_version: u32, plugin: *mut DlportPlugin, size: usize) -> c_int,
>;

/// The name of a plugin library's entry point (see `DlportPluginInit`).
pub const DLPORT_PLUGIN_INIT_SYMBOL: &str = "dlport_plugin_init";

impl DlportPlugin {
    /// A struct with every field zero or NULL and `struct_size`/`interface_version` set, for
    /// plugins written in Rust (tests) to fill in.
    pub const fn empty() -> Self {
        Self {
            struct_size: std::mem::size_of::<Self>(),
            interface_version: DLPORT_PLUGIN_INTERFACE_VERSION,
            name: std::ptr::null(),
            device_types: std::ptr::null(),
            num_device_types: 0,
            state: std::ptr::null_mut(),
            last_error: None,
            view_create: None,
            view_destroy: None,
            acquire: None,
            release: None,
            wait: None,
            copy_to_host: None,
            copy_from_host: None,
            allocate: None,
            deallocate: None,
            translate_device_id: None,
            export_device_id: None,
            destroy: None,
        }
    }
}
