//! The C ABI (`native/include/dlport.h`).
//!
//! Every entry is `extern "C"` and runs behind `catch_unwind`: a panic becomes the status
//! `DLPORT_PANIC`, never an unwind across the boundary. Failures return a non-zero status (the
//! dlport error code, see `Error::code`) and leave a message for `dlport_last_error()` on the
//! calling thread. Managed-tensor arguments are `void*` plus a `versioned` flag (0 = legacy
//! `DLManagedTensor`, 1 = `DLManagedTensorVersioned`). Functions documented as *consuming*
//! take ownership of their input on every path, success or error.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{NonNull, null_mut};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned};
use dlport_core::device::{
    CopyPolicy, ExportOptions, ImportOptions, LayoutNeed, Registry, Tensor, ViewRequirements,
};
use dlport_core::{
    DLPackVersion, DataType, Device, DeviceType, Error, ManagedTensor, RawManaged, TensorInfo,
    TensorRef,
};

/// Success.
pub const DLPORT_OK: c_int = 0;
/// A panic was caught inside dlport (a bug: please report the message).
pub const DLPORT_PANIC: c_int = -1;
/// A required pointer argument was NULL, or an enum argument out of range.
pub const DLPORT_INVALID_ARGUMENT: c_int = -2;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last_error(message: String) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(c));
}

/// What an entry point can fail with.
enum Failure {
    Dlport(Error),
    Argument(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Dlport(e)
    }
}

fn arg(message: impl Into<String>) -> Failure {
    Failure::Argument(message.into())
}

/// Runs an entry point: catches panics, records the error message, returns the status.
fn entry(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            LAST_ERROR.with(|e| *e.borrow_mut() = None);
            DLPORT_OK
        }
        Ok(Err(Failure::Dlport(e))) => {
            set_last_error(e.to_string());
            e.code() as c_int
        }
        Ok(Err(Failure::Argument(m))) => {
            set_last_error(m);
            DLPORT_INVALID_ARGUMENT
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(format!(
                "internal error (panic caught at the C boundary): {what}"
            ));
            DLPORT_PANIC
        }
    }
}

fn out_ptr<T>(out: *mut T, name: &str) -> Result<NonNull<T>, Failure> {
    NonNull::new(out).ok_or_else(|| {
        arg(format!(
            "{name} is NULL: pass a pointer to receive the result"
        ))
    })
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(crate::registry)
}

/// Takes ownership of a managed tensor from C.
///
/// # Safety
/// `managed` is NULL or an owned managed tensor of the form `versioned` says, handed over.
unsafe fn take(managed: *mut c_void, versioned: c_int) -> Result<ManagedTensor, Failure> {
    let t = if versioned != 0 {
        // SAFETY: forwarded contract.
        unsafe { ManagedTensor::from_raw_versioned(managed.cast()) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { ManagedTensor::from_raw_legacy(managed.cast()) }
    };
    Ok(t?)
}

/// Counts the DLPack tensors this C ABI handed out and how many consumers released.
static EXPORTED: AtomicU64 = AtomicU64::new(0);
static RELEASED: AtomicU64 = AtomicU64::new(0);

/// The addresses of the DLPack tensors handed out and not yet released, and of the most
/// recently released ones: enough to detect a double release of a dlport export through
/// `dlport_release` (a foreign tensor released twice cannot be detected: its memory is gone).
struct Tracker {
    live: std::collections::HashSet<usize>,
    /// Released addresses → the generation they were released in (O(1) lookups).
    recent: std::collections::HashMap<usize, u64>,
    /// Eviction order of `recent`: (address, generation).
    order: std::collections::VecDeque<(usize, u64)>,
    generation: u64,
}

impl Tracker {
    fn released(&mut self, addr: usize) {
        if !self.live.remove(&addr) {
            return;
        }
        self.generation += 1;
        self.recent.insert(addr, self.generation);
        self.order.push_back((addr, self.generation));
        if self.order.len() > RECENT {
            if let Some((old, g)) = self.order.pop_front() {
                // Only forget it if it was not released again later.
                if self.recent.get(&old) == Some(&g) {
                    self.recent.remove(&old);
                }
            }
        }
    }
}

const RECENT: usize = 4096;

fn tracker() -> std::sync::MutexGuard<'static, Tracker> {
    static TRACKER: OnceLock<std::sync::Mutex<Tracker>> = OnceLock::new();
    let m = TRACKER.get_or_init(|| {
        std::sync::Mutex::new(Tracker {
            live: Default::default(),
            recent: Default::default(),
            order: Default::default(),
            generation: 0,
        })
    });
    // A poisoned lock only means a panic elsewhere; the sets stay consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Dropped with the export (when the consumer calls the deleter): counts and untracks it.
struct ExportCounter(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for ExportCounter {
    fn drop(&mut self) {
        RELEASED.fetch_add(1, Ordering::SeqCst);
        let addr = self.0.load(Ordering::SeqCst);
        tracker().released(addr);
    }
}

/// Hands a managed tensor to C, in the requested form, counted.
fn give(t: ManagedTensor, versioned: bool, out: NonNull<*mut c_void>) -> Result<(), Failure> {
    EXPORTED.fetch_add(1, Ordering::SeqCst);
    let addr = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = t.reexport_with(ExportCounter(std::sync::Arc::clone(&addr)), versioned)?;
    let raw: *mut c_void = match counted.into_raw() {
        RawManaged::Versioned(p) => p.as_ptr().cast(),
        RawManaged::Legacy(p) => p.as_ptr().cast(),
    };
    addr.store(raw as usize, Ordering::SeqCst);
    {
        let mut t = tracker();
        t.recent.remove(&(raw as usize));
        t.live.insert(raw as usize);
    }
    // SAFETY: `out` is a valid, writable pointer (checked non-NULL; the caller's contract).
    unsafe { out.as_ptr().write(raw) };
    Ok(())
}

fn c_string(s: String, out: NonNull<*mut c_char>) -> Result<(), Failure> {
    let c = CString::new(s).map_err(|_| arg("internal: NUL in a generated string"))?;
    // SAFETY: writable out pointer (caller contract).
    unsafe { out.as_ptr().write(c.into_raw()) };
    Ok(())
}

fn device_arg(device_type: i32, device_id: i32) -> Option<Device> {
    (device_type != 0).then(|| Device::new(DeviceType(device_type), device_id))
}

fn copy_arg(copy: i32) -> Result<CopyPolicy, Failure> {
    match copy {
        0 => Ok(CopyPolicy::Never),
        1 => Ok(CopyPolicy::IfNeeded),
        2 => Ok(CopyPolicy::Always),
        other => Err(arg(format!(
            "copy = {other} is invalid: use 0 (never), 1 (if needed) or 2 (always)"
        ))),
    }
}

/// A backend tensor held by C code. Free with `dlport_tensor_free`.
pub struct DlportTensor(Tensor);

/// Import options (`DlportImportOptions` in C). Device types of 0 mean "not given".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DlportImportOptions {
    /// Target device type (0: the data's own device).
    pub target_device_type: i32,
    /// Target device id.
    pub target_device_id: i32,
    /// What `__dlpack_device__` advertised (0: nothing).
    pub advertised_device_type: i32,
    /// Advertised device id.
    pub advertised_device_id: i32,
    /// 0 never, 1 if needed, 2 always.
    pub copy: i32,
    /// 0 any layout, 1 dense (any axis order), 2 row-major contiguous.
    pub layout: i32,
    /// Required alignment of the first element in bytes (0 or 1: none; a power of two up to
    /// 2^30). A copy made for the import is aligned to it too.
    pub alignment: u32,
    /// The most bytes a copy made for this import may allocate (0: the process default, see
    /// `dlport_set_alloc_limit`).
    pub max_alloc_bytes: u64,
}

/// The C ABI's allocation limit (0: the native registry's default, the machine's memory).
static ALLOC_LIMIT: AtomicU64 = AtomicU64::new(0);

/// The limit for a call that gives `per_call` (0: none given).
fn alloc_limit(per_call: u64) -> Option<u64> {
    [per_call, ALLOC_LIMIT.load(Ordering::Relaxed)]
        .into_iter()
        .find(|&l| l != 0)
}

/// Sets the most bytes any copy or allocation made by the C ABI may take (0: back to the
/// default, the machine's memory as the native registry measures it: physical memory, the
/// cgroup limit and RLIMIT_AS, whichever is smallest). Above it a call fails with
/// `DLPORT_ERR_ALLOCATION_LIMIT` naming the size and the limit, before anything is allocated.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_set_alloc_limit(bytes: u64) {
    ALLOC_LIMIT.store(bytes, Ordering::Relaxed);
}

/// The allocation limit in force for calls that give none of their own.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_alloc_limit() -> u64 {
    registry().alloc_limit(alloc_limit(0))
}

fn import_options(o: &DlportImportOptions) -> Result<ImportOptions, Failure> {
    let layout = match o.layout {
        0 => LayoutNeed::Any,
        1 => LayoutNeed::Dense,
        2 => LayoutNeed::RowMajor,
        other => {
            return Err(arg(format!(
                "layout = {other} is invalid: use 0 (any), 1 (dense) or 2 (row-major)"
            )));
        }
    };
    Ok(ImportOptions {
        device: device_arg(o.target_device_type, o.target_device_id),
        advertised: device_arg(o.advertised_device_type, o.advertised_device_id),
        copy: copy_arg(o.copy)?,
        // Checked by the registry (a power of two up to 2^30), and honoured by its copies.
        requirements: Some(ViewRequirements {
            layout,
            alignment: o.alignment.max(1) as usize,
        }),
        max_alloc: alloc_limit(o.max_alloc_bytes),
    })
}

/// The library version, a static NUL-terminated string.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_version() -> *const c_char {
    static VERSION: &CStr = c"0.1.0";
    VERSION.as_ptr()
}

/// The message of the last failed call on this thread, or NULL after a success. Valid until the
/// next dlport call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
}

/// Frees a string returned by dlport (NULL is ignored).
///
/// # Safety
/// `s` is NULL or a string from a dlport function, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: created by CString::into_raw in `c_string` (contract).
        drop(unsafe { CString::from_raw(s) });
    }
}

#[derive(serde::Serialize)]
struct Description {
    #[serde(flatten)]
    info: TensorInfo,
    host_accessible: bool,
    alignment: Option<usize>,
    read_only: bool,
    copied: bool,
}

fn describe(view: &TensorRef<'_>) -> Result<String, Failure> {
    let d = Description {
        info: TensorInfo::from(view),
        host_accessible: view.device().is_host_accessible(),
        alignment: view.alignment(),
        read_only: view.is_read_only(),
        copied: view.is_copied(),
    };
    serde_json::to_string(&d).map_err(|e| arg(format!("internal: {e}")))
}

/// Validates a managed tensor **without taking ownership** and describes it as JSON (shape,
/// strides, dtype, device, byte_offset, flags, version, numel, contiguity, byte_span,
/// host_accessible, alignment, read_only, copied). Free the string with `dlport_string_free`.
///
/// # Safety
/// `managed` is NULL or a live managed tensor of the form `versioned` says, readable for the
/// duration of the call; `json_out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_describe(
    managed: *const c_void,
    versioned: c_int,
    json_out: *mut *mut c_char,
) -> c_int {
    entry(|| {
        let out = out_ptr(json_out, "json_out")?;
        if managed.is_null() {
            return Err(Error::NullManagedTensor.into());
        }
        let text = if versioned != 0 {
            // SAFETY: a live versioned tensor (contract); the header is read first.
            let m = unsafe { &*managed.cast::<DLManagedTensorVersioned>() };
            dlport_core::layout::check_version(m.version)?;
            // SAFETY: major version 1, so the DLTensor is at its 1.x place (contract).
            describe(&unsafe { TensorRef::from_raw(&m.dl_tensor, Some(m.version), m.flags) }?)?
        } else {
            // SAFETY: a live legacy tensor (contract).
            let m = unsafe { &*managed.cast::<DLManagedTensor>() };
            // SAFETY: as above.
            describe(&unsafe { TensorRef::from_raw(&m.dl_tensor, None, 0) }?)?
        };
        c_string(text, out)
    })
}

/// Calls a managed tensor's deleter (for C code that owns one and is done with it). NULL is
/// ignored. A second release of a tensor that dlport exported is detected (for the last 4096
/// released) and refused with `DLPORT_INVALID_ARGUMENT`; a foreign tensor released twice cannot
/// be detected, since its memory is already gone.
///
/// # Safety
/// `managed` is NULL or an owned managed tensor of the form `versioned` says; it is released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_release(managed: *mut c_void, versioned: c_int) -> c_int {
    entry(|| {
        let Some(p) = NonNull::new(managed) else {
            return Ok(());
        };
        {
            let t = tracker();
            if !t.live.contains(&(managed as usize)) && t.recent.contains_key(&(managed as usize)) {
                return Err(arg(format!(
                    "managed tensor {managed:p} was already released: a double release is a bug in \
                     the caller (each DLPack tensor is released exactly once)"
                )));
            }
        }
        let raw = if versioned != 0 {
            RawManaged::Versioned(p.cast())
        } else {
            RawManaged::Legacy(p.cast())
        };
        // SAFETY: owned and handed over (contract).
        unsafe { raw.release() };
        Ok(())
    })
}

/// **Consuming.** Imports a managed tensor onto a backend of the native registry, following
/// `options` (NULL: defaults: the data's own device, copy if needed, any layout).
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
                copy: 1,
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
/// `__dlpack__`: `max_version_major` < 1 gives a legacy `DLManagedTensor`, ≥ 1 a versioned one
/// (`*versioned_out` says which); `dl_device_type` 0 means the tensor's own device; `copy` is
/// 0 never, 1 if needed, 2 always.
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
        // SAFETY: a live handle (contract).
        let t = unsafe { tensor.as_ref() }.ok_or_else(|| arg("tensor is NULL"))?;
        let out = out_ptr(managed_out, "managed_out")?;
        let vout = out_ptr(versioned_out, "versioned_out")?;
        let max_version = (max_version_major >= 0)
            .then(|| DLPackVersion::new(max_version_major as u32, max_version_minor.max(0) as u32));
        if max_version_major >= 0 && max_version_minor < 0 {
            return Err(arg(format!(
                "max_version_minor = {max_version_minor} is negative: pass 0 or more"
            )));
        }
        let opts = ExportOptions {
            max_version,
            dl_device: device_arg(dl_device_type, dl_device_id),
            copy: copy_arg(copy)?,
            max_alloc: alloc_limit(0),
        };
        let m = registry().to_dlpack(&t.0, &opts)?;
        let versioned = m.is_versioned();
        give(m, versioned, out)?;
        // SAFETY: writable (contract).
        unsafe { vout.as_ptr().write(c_int::from(versioned)) };
        Ok(())
    })
}

/// **Consuming.** Converts legacy ↔ versioned without a copy; the original is released once,
/// when the result is.
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
fn pass_through(
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
        },
    )?;
    give(exported, to_versioned != 0, out)
}

/// **Consuming.** Makes host-accessible memory (pinned, managed, or CPU) visible to a consumer
/// that knows only `kDLCPU`, without a copy: the result says `kDLCPU` and keeps the original
/// alive (its deleter runs once, when the last consumer releases). `advertised_*` is what
/// `__dlpack_device__` said (0: nothing). Device memory is refused with a clear error.
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
            device: Some(Device::CPU),
            advertised: device_arg(advertised_device_type, advertised_device_id),
            copy: CopyPolicy::Never,
            requirements: None,
            max_alloc: alloc_limit(0),
        };
        pass_through(
            m,
            &opts,
            Some(Device::CPU),
            CopyPolicy::Never,
            to_versioned,
            out,
        )
    })
}

/// **Consuming.** Copies any host-accessible tensor (strided, negative, broadcast) into a new
/// compact, 64-byte-aligned one with IS_COPIED; with `copy` 1 (if needed) a tensor that is
/// already compact and aligned is passed through without a copy, and with 0 (never) a tensor
/// that would need one is an error.
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
        let opts = ImportOptions {
            device: Some(Device::CPU),
            advertised: None,
            copy: copy_arg(copy)?,
            requirements: Some(ViewRequirements {
                layout: LayoutNeed::RowMajor,
                alignment: dlport_core::device::CPU_ALIGN,
            }),
            max_alloc: alloc_limit(0),
        };
        pass_through(m, &opts, None, CopyPolicy::IfNeeded, to_versioned, out)
    })
}

/// Allocates a zeroed compact tensor on a backend of the native registry (`backend` NULL: the
/// one that resolves the device).
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
            return Err(Error::NullShape { ndim }.into());
        }
        let shape = if n == 0 {
            &[][..]
        } else {
            // SAFETY: `n` readable values (contract), bounded by MAX_NDIM.
            unsafe { std::slice::from_raw_parts(shape, n) }
        };
        let device = Device::new(DeviceType(device_type), device_id);
        let r = registry();
        let b = if backend.is_null() {
            r.resolve(device)?
        } else {
            // SAFETY: NUL-terminated (contract).
            let name = unsafe { CStr::from_ptr(backend) }
                .to_str()
                .map_err(|_| arg("backend is not UTF-8"))?;
            r.get(name).ok_or_else(|| {
                arg(format!(
                    "backend \"{name}\" is not registered; registered: {}",
                    r.names().collect::<Vec<_>>().join(", ")
                ))
            })?
        };
        let dtype = DataType::new(dlport_core::TypeCode(code), bits, lanes);
        let bytes = dlport_core::device::compact_bytes(dtype, shape)?;
        dlport_core::check_alloc(bytes as u128, Some(r.alloc_limit(alloc_limit(0))))?;
        let t = b.allocate(device, dtype, shape)?;
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(Box::into_raw(Box::new(DlportTensor(t)))) };
        Ok(())
    })
}

/// Describes a backend tensor as JSON (as `dlport_describe`, plus `backend` and `users`).
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
        let guard = t.0.read()?;
        let body = describe(&guard.view())?;
        let extra = format!(
            ",\"backend\":\"{}\",\"users\":{},\"data\":{}}}",
            t.0.backend(),
            t.0.buffer().users() - 1,
            t.0.buffer().ptr() as usize
        );
        c_string(format!("{}{extra}", &body[..body.len() - 1]), out)
    })
}

/// The data pointer (host address or device handle) and byte offset of a backend tensor.
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
        let _live = t.0.read()?;
        // SAFETY: writable (contract).
        unsafe {
            d.as_ptr().write(t.0.buffer().ptr());
            o.as_ptr().write(t.0.byte_offset());
        }
        Ok(())
    })
}

/// Frees a backend tensor handle (NULL is ignored). DLPack tensors exported from it stay valid.
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

/// How many DLPack tensors this C ABI has handed out, and how many of them consumers released
/// (their deleter ran). Either pointer may be NULL.
///
/// # Safety
/// Non-NULL pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_export_counts(exported: *mut u64, released: *mut u64) {
    // SAFETY: NULL or writable (contract).
    unsafe {
        if let Some(p) = exported.as_mut() {
            *p = EXPORTED.load(Ordering::SeqCst);
        }
        if let Some(p) = released.as_mut() {
            *p = RELEASED.load(Ordering::SeqCst);
        }
    }
}

// ── PyCapsule destructor ──

type PyObject = c_void;
type IsValidFn = unsafe extern "C" fn(*mut PyObject, *const c_char) -> c_int;
type GetPointerFn = unsafe extern "C" fn(*mut PyObject, *const c_char) -> *mut c_void;
type ErrFetchFn = unsafe extern "C" fn(*mut *mut PyObject, *mut *mut PyObject, *mut *mut PyObject);
type ErrRestoreFn = unsafe extern "C" fn(*mut PyObject, *mut PyObject, *mut PyObject);

/// The few CPython functions the destructor needs, looked up in the running process (no link
/// dependency on libpython: the library also loads into plain C programs).
struct PyApi {
    is_valid: IsValidFn,
    get_pointer: GetPointerFn,
    err_fetch: ErrFetchFn,
    err_restore: ErrRestoreFn,
}

fn py_api() -> Option<&'static PyApi> {
    static API: OnceLock<Option<PyApi>> = OnceLock::new();
    API.get_or_init(|| {
        let sym = |name: &CStr| {
            // SAFETY: dlsym with RTLD_DEFAULT only looks a symbol up.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        // SAFETY: each symbol, when present, is the CPython function of that exact signature.
        unsafe {
            Some(PyApi {
                is_valid: std::mem::transmute::<*mut c_void, IsValidFn>(sym(c"PyCapsule_IsValid")?),
                get_pointer: std::mem::transmute::<*mut c_void, GetPointerFn>(sym(
                    c"PyCapsule_GetPointer",
                )?),
                err_fetch: std::mem::transmute::<*mut c_void, ErrFetchFn>(sym(c"PyErr_Fetch")?),
                err_restore: std::mem::transmute::<*mut c_void, ErrRestoreFn>(sym(
                    c"PyErr_Restore",
                )?),
            })
        }
    })
    .as_ref()
}

/// A `PyCapsule_Destructor` for DLPack capsules, safe to run while an exception is set: it
/// calls the tensor's deleter only while the capsule still bears its unconsumed name
/// (`"dltensor"` or `"dltensor_versioned"`); a consumer that renamed it to `used_*` owns the
/// tensor. The pending exception, if any, is preserved.
///
/// # Safety
/// Called by CPython with the GIL held, with a capsule object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_capsule_destructor(capsule: *mut c_void) {
    let _ = entry(|| {
        let Some(py) = py_api() else { return Ok(()) };
        if capsule.is_null() {
            return Ok(());
        }
        let (mut t, mut v, mut tb) = (null_mut(), null_mut(), null_mut());
        // SAFETY: GIL held (contract); saves any pending exception.
        unsafe { (py.err_fetch)(&mut t, &mut v, &mut tb) };
        for (name, versioned) in [(c"dltensor_versioned", true), (c"dltensor", false)] {
            // SAFETY: a capsule object, GIL held; IsValid never raises.
            if unsafe { (py.is_valid)(capsule, name.as_ptr()) } == 1 {
                // SAFETY: valid with this name, so GetPointer succeeds without raising.
                let p = unsafe { (py.get_pointer)(capsule, name.as_ptr()) };
                if let Some(p) = NonNull::new(p) {
                    let raw = if versioned {
                        RawManaged::Versioned(p.cast())
                    } else {
                        RawManaged::Legacy(p.cast())
                    };
                    // SAFETY: an unconsumed capsule owns its tensor; it is released once, here.
                    unsafe { raw.release() };
                }
                break;
            }
        }
        // SAFETY: restores exactly what was fetched (steals the references back).
        unsafe { (py.err_restore)(t, v, tb) };
        Ok(())
    });
}
