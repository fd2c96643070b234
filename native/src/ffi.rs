//! The C ABI (`native/include/dlport.h`).
//!
//! Every entry is `extern "C"` and runs behind `catch_unwind`: a panic becomes the status
//! `DLPORT_PANIC`, never an unwind across the boundary. Failures return a non-zero status (the
//! dlport error code, see `Error::code`) and leave a message for `dlport_last_error()` on the
//! calling thread. Managed-tensor arguments are `void*` plus a `versioned` flag (0 = legacy
//! `DLManagedTensor`, 1 = `DLManagedTensorVersioned`). Functions documented as *consuming*
//! take ownership of their input on every path, success or error.
//!
//! Every entry also works while its thread or the process shuts down (from an `atexit`
//! handler, a C++ static destructor or a pthread-key destructor, which glibc runs after the
//! thread's TLS destructors): the only thread-local, the last error, has no destructor, and the
//! other state is in statics (`Mutex`, `OnceLock`, atomics).
//!
//! The DLPack tensors handed to C are dlport's own header blocks wrapping the
//! real export, told from foreign tensors by identity (see `ExportBlock` and `dlport_release`).

use std::cell::{Cell, UnsafeCell};
use std::collections::{HashSet, VecDeque};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::hash::BuildHasherDefault;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{NonNull, null_mut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use dlport_core::device::{
    CopyPolicy, ExportOptions, ImportOptions, LayoutNeed, Registry, Tensor, ViewRequirements,
};
use dlport_core::{
    DLPackVersion, DataType, Device, DeviceType, Error, ManagedTensor, RawManaged, TensorInfo,
    TensorRef,
};

pub use crate::cabi::{DLPORT_INVALID_ARGUMENT, DLPORT_OK, DLPORT_PANIC, DlportCopy, DlportLayout};

/// The longest error message kept, in bytes (without the NUL); a longer one is cut at a
/// character boundary and ends in "...".
const MESSAGE_CAP: usize = 2047;

/// A thread's last error, stored inline: no heap block and no destructor. A thread-local
/// without a destructor is never torn down, so an entry called while its thread or the process
/// shuts down (an `atexit` handler, a C++ static destructor or a pthread-key destructor: glibc
/// runs them after the thread's TLS destructors) still records and returns its message.
struct LastError {
    set: Cell<bool>,
    text: UnsafeCell<[u8; MESSAGE_CAP + 1]>,
}

// No destructor, hence no "destroyed" state in which the thread-local can no longer be reached.
const _: () = assert!(!std::mem::needs_drop::<LastError>());

thread_local! {
    static LAST_ERROR: LastError = const {
        LastError {
            set: Cell::new(false),
            text: UnsafeCell::new([0; MESSAGE_CAP + 1]),
        }
    };
}

/// What `dlport_last_error` returns if this thread's error state cannot be reached (not
/// expected: the thread-local has no destructor; this only keeps the entry total).
static UNREACHABLE_ERROR: &CStr = c"dlport: the last error message of this thread cannot be \
    read (its thread-local storage is gone); check the status code instead";

/// Records `message` as this thread's last error (NUL bytes become spaces; cut to
/// `MESSAGE_CAP` bytes). Never panics and never touches a thread-local that can be destroyed.
fn set_last_error(message: &str) {
    let _ = LAST_ERROR.try_with(|e| {
        let cut = if message.len() <= MESSAGE_CAP {
            message.len()
        } else {
            let mut end = MESSAGE_CAP - "...".len();
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            end
        };
        // SAFETY: only this thread reaches its own buffer, and no reference into it outlives
        // this call (C receives a raw pointer, valid until its next dlport call).
        let text = unsafe { &mut *e.text.get() };
        let mut n = 0;
        let tail = if cut < message.len() { "..." } else { "" };
        for b in message.as_bytes()[..cut].iter().chain(tail.as_bytes()) {
            text[n] = if *b == 0 { b' ' } else { *b };
            n += 1;
        }
        text[n] = 0;
        e.set.set(true);
    });
}

fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|e| e.set.set(false));
}

/// What an entry point can fail with.
pub(crate) enum Failure {
    Dlport(Error),
    Argument(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Dlport(e)
    }
}

pub(crate) fn arg(message: impl Into<String>) -> Failure {
    Failure::Argument(message.into())
}

/// Runs an entry point: catches panics, records the error message, returns the status.
pub(crate) fn entry(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    run(true, f)
}

/// As `entry`; `clear_on_success` false leaves the last error alone on success (for callbacks
/// such as deleters, which the caller does not see as dlport calls).
fn run(clear_on_success: bool, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            if clear_on_success {
                clear_last_error();
            }
            DLPORT_OK
        }
        Ok(Err(Failure::Dlport(e))) => {
            set_last_error(&e.to_string());
            e.code() as c_int
        }
        Ok(Err(Failure::Argument(m))) => {
            set_last_error(&m);
            DLPORT_INVALID_ARGUMENT
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("unknown panic");
            set_last_error(&format!(
                "internal error (panic caught at the C boundary): {what}"
            ));
            // The payload is dropped here, inside the entry: a payload whose drop panics
            // would otherwise unwind across `extern "C"`.
            let _ = catch_unwind(AssertUnwindSafe(|| drop(panic)));
            DLPORT_PANIC
        }
    }
}

pub(crate) fn out_ptr<T>(out: *mut T, name: &str) -> Result<NonNull<T>, Failure> {
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
pub(crate) unsafe fn take(
    managed: *mut c_void,
    versioned: c_int,
) -> Result<ManagedTensor, Failure> {
    refuse_released(managed)?;
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

/// How many released exports keep their block (and so their address) reserved.
const QUARANTINE: usize = 4096;

/// The header of a DLPack tensor handed to C, in either form. It is what C sees: its address
/// is the tensor's address, its `deleter` is dlport's.
#[repr(C)]
union Header {
    versioned: ManuallyDrop<DLManagedTensorVersioned>,
    legacy: ManuallyDrop<DLManagedTensor>,
}

/// A DLPack tensor this C ABI handed out: dlport's own header (a copy of the inner export's,
/// with dlport's deleter) and the real export, dropped when a consumer releases.
///
/// Identity, not address, tells dlport's exports from foreign tensors: a released block is not
/// freed but kept in a quarantine of the last [`QUARANTINE`] released ones, so malloc cannot
/// give its address to anything else while dlport still knows it. Hence an address in
/// `Tracker::live` is a live export of ours, one in `Tracker::dead` a released export of ours,
/// and any other address a foreign tensor (or an export released more than `QUARANTINE`
/// releases ago, which is then indistinguishable from one).
#[repr(C)]
struct ExportBlock {
    /// First: the address of the block is the address of the header.
    header: Header,
    /// The real export (`None` once released).
    inner: Option<ManagedTensor>,
}

/// A quarantined block, owned by the tracker.
struct BlockPtr(NonNull<ExportBlock>);

// SAFETY: a released block is plain memory owned by the tracker (its inner export is gone);
// it is only freed, under or after the tracker lock, by whichever thread evicts it.
unsafe impl Send for BlockPtr {}

/// Hashes addresses (a folded multiply): fast, and free of `RandomState`, whose keys live in a
/// thread-local.
#[derive(Default)]
struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let p = u128::from(self.0) * 0x9E37_79B9_7F4A_7C15;
        (p as u64) ^ ((p >> 64) as u64)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8)) ^ u64::from(b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }
}

/// A set of block addresses. (cbindgen cannot read it and the header needs nothing here.)
///
/// cbindgen:ignore
type AddrSet = HashSet<usize, BuildHasherDefault<AddrHasher>>;

/// The states of dlport's exports, by block address: live (handed out, not released), dead
/// (its release has begun: being dropped or quarantined). An address is in at most one set.
struct Tracker {
    live: AddrSet,
    dead: AddrSet,
    /// Released blocks whose inner export is dropped, oldest first; at most `QUARANTINE`.
    quarantine: VecDeque<BlockPtr>,
}

static TRACKER: Mutex<Tracker> = Mutex::new(Tracker {
    live: HashSet::with_hasher(BuildHasherDefault::new()),
    dead: HashSet::with_hasher(BuildHasherDefault::new()),
    quarantine: VecDeque::new(),
});

fn tracker() -> MutexGuard<'static, Tracker> {
    // A poisoned lock only means a panic elsewhere; every update leaves the sets consistent.
    TRACKER.lock().unwrap_or_else(|p| p.into_inner())
}

fn already_released(p: *const c_void) -> Failure {
    arg(format!(
        "managed tensor {p:p} was already released (dlport exported it and its deleter has \
         run): releasing or using a DLPack tensor after its release is a bug in the caller; \
         release each tensor exactly once and drop every pointer to it"
    ))
}

/// Refuses a dlport export that was released (and is still in the quarantine), before anything
/// reads it: its header no longer describes a tensor.
fn refuse_released(p: *const c_void) -> Result<(), Failure> {
    if !p.is_null() && tracker().dead.contains(&(p as usize)) {
        return Err(already_released(p));
    }
    Ok(())
}

/// Releases one of dlport's exports: the first call drops the inner export (its deleter runs
/// once, outside the lock, so it may call dlport again); any later call, nested inside that
/// drop or after it, is refused without touching anything. The block then joins the
/// quarantine; the oldest quarantined block is freed.
fn release_export(block: *mut ExportBlock) -> Result<(), Failure> {
    let addr = block as usize;
    let inner = {
        let mut t = tracker();
        if !t.live.remove(&addr) {
            return Err(already_released(block.cast()));
        }
        t.dead.insert(addr);
        // SAFETY: `block` was live: allocated by `give` and not released; removing it from
        // `live` under the lock made this call its only releaser, so nothing else accesses it.
        unsafe { poison(block) }
    };
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(inner)));
    RELEASED.fetch_add(1, Ordering::SeqCst);
    let evicted = {
        let mut t = tracker();
        // SAFETY: `block` comes from Box::into_raw in `give`: not NULL.
        t.quarantine
            .push_back(BlockPtr(unsafe { NonNull::new_unchecked(block) }));
        if t.quarantine.len() > QUARANTINE {
            t.quarantine.pop_front().inspect(|old| {
                t.dead.remove(&(old.0.as_ptr() as usize));
            })
        } else {
            None
        }
    };
    if let Some(old) = evicted {
        // SAFETY: allocated by `give`, released (its inner export is gone) and now out of every
        // set: nothing refers to it any more.
        drop(unsafe { Box::from_raw(old.0.as_ptr()) });
    }
    if let Err(panic) = dropped {
        std::panic::resume_unwind(panic);
    }
    Ok(())
}

/// Takes the inner export out of a block being released and poisons its header (NULL data,
/// shape and strides, `ndim` -1), keeping dlport's deleter so that a second call is detected.
///
/// # Safety
/// `block` is a block from `give`, being released by the caller alone.
unsafe fn poison(block: *mut ExportBlock) -> Option<ManagedTensor> {
    // SAFETY: exclusive access (contract).
    let inner = unsafe { (*block).inner.take() };
    let dead = DLTensor {
        data: null_mut(),
        device: Device::CPU,
        ndim: -1,
        dtype: DataType::new(dlport_core::TypeCode(0), 0, 0),
        shape: null_mut(),
        strides: null_mut(),
        byte_offset: 0,
    };
    match inner.as_ref().map(ManagedTensor::is_versioned) {
        // SAFETY: the header is in the form of the inner export (`give`); exclusive access.
        Some(true) => unsafe { (*(*block).header.versioned).dl_tensor = dead },
        // SAFETY: as above.
        Some(false) => unsafe { (*(*block).header.legacy).dl_tensor = dead },
        None => {}
    }
    inner
}

/// The deleter of dlport's versioned exports.
///
/// # Safety
/// Called by a consumer with a pointer from this C ABI (once; later calls are refused while the
/// block is quarantined).
unsafe extern "C" fn export_deleter_versioned(managed: *mut DLManagedTensorVersioned) {
    deleter(managed.cast());
}

/// The deleter of dlport's legacy exports.
///
/// # Safety
/// As [`export_deleter_versioned`].
unsafe extern "C" fn export_deleter_legacy(managed: *mut DLManagedTensor) {
    deleter(managed.cast());
}

/// A deleter has no status: a refused call (a second release) only leaves its message for
/// `dlport_last_error`; a successful one leaves the last error alone.
fn deleter(block: *mut ExportBlock) {
    let _ = run(false, || {
        if block.is_null() {
            return Ok(());
        }
        release_export(block)
    });
}

/// Releases any managed tensor handed to dlport to be released: dlport's own exports through
/// the tracker (a released one is refused), foreign ones by calling their deleter.
///
/// # Safety
/// `p` is an owned managed tensor of the form `versioned` says, or one of dlport's exports
/// (live or released, in either form).
unsafe fn release_any(p: NonNull<c_void>, versioned: c_int) -> Result<(), Failure> {
    let addr = p.as_ptr() as usize;
    let ours = {
        let t = tracker();
        t.live.contains(&addr) || t.dead.contains(&addr)
    };
    if ours {
        return release_export(p.as_ptr().cast());
    }
    let raw = if versioned != 0 {
        RawManaged::Versioned(p.cast())
    } else {
        RawManaged::Legacy(p.cast())
    };
    // SAFETY: a foreign tensor, owned and handed over (contract).
    unsafe { raw.release() };
    Ok(())
}

/// Hands a managed tensor to C, in the requested form, counted and tracked.
pub(crate) fn give(
    t: ManagedTensor,
    versioned: bool,
    out: NonNull<*mut c_void>,
) -> Result<(), Failure> {
    let inner = t.reexport_with((), versioned)?;
    let header = match inner.as_raw() {
        RawManaged::Versioned(p) => {
            // SAFETY: `inner` owns this live, validated header.
            let h = unsafe { p.as_ref() };
            Header {
                versioned: ManuallyDrop::new(DLManagedTensorVersioned {
                    version: h.version,
                    manager_ctx: null_mut(),
                    deleter: Some(export_deleter_versioned),
                    flags: h.flags,
                    dl_tensor: h.dl_tensor,
                }),
            }
        }
        RawManaged::Legacy(p) => {
            // SAFETY: as above.
            let h = unsafe { p.as_ref() };
            Header {
                legacy: ManuallyDrop::new(DLManagedTensor {
                    dl_tensor: h.dl_tensor,
                    manager_ctx: null_mut(),
                    deleter: Some(export_deleter_legacy),
                }),
            }
        }
    };
    // The header's shape and strides point into `inner`, alive as long as the block is live.
    let block = Box::into_raw(Box::new(ExportBlock {
        header,
        inner: Some(inner),
    }));
    EXPORTED.fetch_add(1, Ordering::SeqCst);
    tracker().live.insert(block as usize);
    // SAFETY: `out` is a valid, writable pointer (checked non-NULL; the caller's contract).
    unsafe { out.as_ptr().write(block.cast()) };
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

pub(crate) fn copy_arg(copy: i32) -> Result<CopyPolicy, Failure> {
    match DlportCopy::from_c(copy) {
        Some(DlportCopy::Never) => Ok(CopyPolicy::Never),
        Some(DlportCopy::IfNeeded) => Ok(CopyPolicy::IfNeeded),
        Some(DlportCopy::Always) => Ok(CopyPolicy::Always),
        None => Err(arg(format!(
            "copy = {copy} is invalid: use DLPORT_COPY_NEVER (0), DLPORT_COPY_IF_NEEDED (1) or \
             DLPORT_COPY_ALWAYS (2)"
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
    /// A `DlportCopy`: `DLPORT_COPY_NEVER`, `DLPORT_COPY_IF_NEEDED` or `DLPORT_COPY_ALWAYS`.
    pub copy: i32,
    /// A `DlportLayout`: `DLPORT_LAYOUT_ANY`, `DLPORT_LAYOUT_DENSE` (any axis order) or
    /// `DLPORT_LAYOUT_ROW_MAJOR`.
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
pub(crate) fn alloc_limit(per_call: u64) -> Option<u64> {
    [per_call, ALLOC_LIMIT.load(Ordering::Relaxed)]
        .into_iter()
        .find(|&l| l != 0)
}

/// Sets the most bytes any copy or allocation made by this ABI may take. 0 restores the
/// default: the machine's memory as the native registry measures it (the smallest of physical
/// memory, the cgroup's memory.max and RLIMIT_AS / RLIMIT_DATA). Above the limit a call fails
/// with `DLPORT_ERR_ALLOCATION_LIMIT`, naming the size and the limit, before anything is
/// allocated.
///
/// Ownership: nothing is transferred.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_set_alloc_limit(bytes: u64) {
    ALLOC_LIMIT.store(bytes, Ordering::Relaxed);
}

/// The allocation limit in force for calls that give none of their own.
///
/// Ownership: nothing is transferred.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_alloc_limit() -> u64 {
    registry().alloc_limit(alloc_limit(0))
}

fn import_options(o: &DlportImportOptions) -> Result<ImportOptions, Failure> {
    let layout = match DlportLayout::from_c(o.layout) {
        Some(DlportLayout::Any) => LayoutNeed::Any,
        Some(DlportLayout::Dense) => LayoutNeed::Dense,
        Some(DlportLayout::RowMajor) => LayoutNeed::RowMajor,
        None => {
            return Err(arg(format!(
                "layout = {} is invalid: use DLPORT_LAYOUT_ANY (0), DLPORT_LAYOUT_DENSE (1) or \
                 DLPORT_LAYOUT_ROW_MAJOR (2)",
                o.layout
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

/// The library version (the crate's, e.g. "0.1.0"), a static NUL-terminated string.
///
/// Ownership: the string is dlport's, static; never free it.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}

/// The last error message on this thread, or NULL after a success. Valid until the next dlport
/// call on this thread (at most 2047 bytes; a longer message is cut and ends in "..."). Like
/// every entry, it also works while the thread or the process shuts down: from an `atexit`
/// handler, a C++ static destructor or a pthread-key destructor (the message lives in a
/// thread-local without a destructor).
///
/// Ownership: the string is dlport's (per thread); never free it.
#[unsafe(no_mangle)]
pub extern "C" fn dlport_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| {
            if e.set.get() {
                e.text.get().cast::<c_char>().cast_const()
            } else {
                std::ptr::null()
            }
        })
        .unwrap_or(UNREACHABLE_ERROR.as_ptr())
}

/// Frees a string returned by dlport (NULL is ignored).
///
/// Ownership: takes `s`, which must not be used again.
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

impl Description {
    fn of(view: &TensorRef<'_>) -> Self {
        Self {
            info: TensorInfo::from(view),
            host_accessible: view.device().is_host_accessible(),
            alignment: view.alignment(),
            read_only: view.is_read_only(),
            copied: view.is_copied(),
        }
    }
}

/// What `dlport_tensor_describe` returns: a [`Description`] plus the handle's own facts.
#[derive(serde::Serialize)]
struct HandleDescription {
    #[serde(flatten)]
    tensor: Description,
    backend: &'static str,
    users: usize,
    data: usize,
}

fn to_json(value: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|e| arg(format!("internal: {e}")))
}

fn describe(view: &TensorRef<'_>) -> Result<String, Failure> {
    to_json(&Description::of(view))
}

/// Validates a managed tensor WITHOUT taking ownership and describes it as JSON, one object
/// with exactly these keys:
/// - `"shape"`, `"strides"`: arrays of integers (strides in elements, computed when NULL);
/// - `"dtype"`: string (`"float32"`, `"int4"`, `"float32x4"`, ...);
/// - `"device"`: string (`"cpu"`, `"cuda:0"`, `"cuda_host"`, ...);
/// - `"byte_offset"`, `"flags"`, `"numel"`: integers (`flags` 0 for legacy);
/// - `"version"`: `{"major": integer, "minor": integer}`, or null for legacy;
/// - `"contiguity"`: one of `"both"`, `"row_major"`, `"column_major"`, `"permuted"`,
///   `"strided"`;
/// - `"byte_span"`: `[lo, hi]` integers, the bytes touched relative to the first element;
/// - `"host_accessible"`, `"read_only"`, `"copied"`: booleans;
/// - `"alignment"`: integer (the first element's address alignment in bytes) or null.
///
/// Ownership: `managed` stays the caller's on every path. On success `*json_out` is a new
/// string the caller frees with `dlport_string_free`; on error it is untouched.
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
        refuse_released(managed)?;
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
/// one (`*versioned_out` says which); `dl_device_type` 0 means the tensor's own device; `copy`
/// is a `DlportCopy`. A legacy consumer never receives a READ_ONLY or padded sub-byte tensor
/// by reference: it gets a compact copy, or with `DLPORT_COPY_NEVER` the error
/// `DLPORT_ERR_COPY_REQUIRED` naming the flag.
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

/// CONSUMING. Copies any host-accessible tensor (strided, negative, broadcast) into a new
/// compact, 64-byte-aligned one with IS_COPIED; with `DLPORT_COPY_IF_NEEDED` a tensor that is
/// already compact and aligned is passed through without a copy, and with `DLPORT_COPY_NEVER`
/// a tensor that would need one is an error.
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
/// one that serves the device).
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
            tensor: Description::of(&guard),
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

/// The release callback of `dlport_wrap`: called exactly once, with the `ctx` given to
/// `dlport_wrap`, when nobody uses the memory any more (or at once when `dlport_wrap` fails). It
/// may run on any thread and must not unwind.
pub type DlportReleaseFn = Option<unsafe extern "C" fn(ctx: *mut c_void)>;

/// Runs the caller's release callback once, when dropped.
struct CallerRelease {
    release: DlportReleaseFn,
    ctx: *mut c_void,
}

// SAFETY: `dlport_wrap`'s contract: the callback may run on any thread, with its context.
unsafe impl Send for CallerRelease {}

impl Drop for CallerRelease {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            // SAFETY: the caller's callback with the caller's context, called once (`take`).
            unsafe { release(self.ctx) };
        }
    }
}

/// The managed tensor `dlport_wrap` builds over caller memory: the header, the shape and
/// strides it points to, and the caller's release, which runs when this is dropped.
struct Wrapped {
    header: DLManagedTensorVersioned,
    _shape: Box<[i64]>,
    _strides: Box<[i64]>,
    _release: CallerRelease,
}

/// The deleter of `dlport_wrap`'s tensors: frees the block, which runs the caller's release.
///
/// # Safety
/// `managed` is NULL or the header of a live `Wrapped` block (its `manager_ctx`), released once.
unsafe extern "C" fn wrapped_deleter(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: the header of a live block whose manager_ctx is the block (contract).
    let block = unsafe { (*managed).manager_ctx }.cast::<Wrapped>();
    // SAFETY: allocated by Box::into_raw in `dlport_wrap` and released once (contract).
    drop(unsafe { Box::from_raw(block) });
}

/// Wraps caller-owned memory as a DLPack managed tensor (versioned when `to_versioned` is
/// non-zero, legacy otherwise), without a copy: DLPack's "external reference". `data`,
/// `device_*`, `code`/`bits`/`lanes`, `ndim`, `shape`, `strides` (NULL: compact row-major),
/// `byte_offset` and `flags` (`DLPACK_FLAG_BITMASK_*`) are those of the DLTensor; they are
/// validated as any import is (ndim, extents, dtype widths, address range, known flags), and
/// flags the legacy form cannot carry (READ_ONLY, IS_SUBBYTE_TYPE_PADDED) are refused for it
/// with `DLPORT_ERR_FLAG_NOT_REPRESENTABLE`. `shape` and `strides` are copied: the caller may
/// free them when the call returns.
///
/// Ownership: `release(ctx)` is called exactly once on every path. On success `*out` owns the
/// memory; `release(ctx)` runs when the tensor's deleter is called (or `dlport_release`, or the
/// import that consumed it is freed), on any thread. On every error, including a NULL `out`,
/// `release(ctx)` has run before `dlport_wrap` returns. `release` may be NULL: the caller then
/// keeps the memory and must keep it alive until the tensor is released.
///
/// # Safety
/// `data` + `byte_offset` addresses the tensor's bytes, valid (and not written by the caller
/// while READ_ONLY is set) until `release(ctx)` runs; `shape` (and `strides`, when not NULL) is
/// readable for `ndim` values when `ndim` is in range; `out` is NULL or writable; `release` is
/// NULL or a function that may be called once with `ctx` from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_wrap(
    data: *mut c_void,
    device_type: i32,
    device_id: i32,
    code: u8,
    bits: u8,
    lanes: u16,
    ndim: i32,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
    flags: u64,
    to_versioned: c_int,
    release: DlportReleaseFn,
    ctx: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // Made before anything can fail: every path drops it exactly once, or hands it to the
    // tensor, whose deleter drops it.
    let guard = CallerRelease { release, ctx };
    entry(move || {
        let out = out_ptr(out, "out")?;
        let n = dlport_core::layout::check_ndim(i64::from(ndim))?;
        if n > 0 && shape.is_null() {
            return Err(Error::NullShape { ndim }.into());
        }
        let copy = |p: *const i64| -> Box<[i64]> {
            if n == 0 {
                Box::default()
            } else {
                // SAFETY: readable for `n` values (contract), `n` bounded by MAX_NDIM.
                unsafe { std::slice::from_raw_parts(p, n) }.into()
            }
        };
        let mut shape = copy(shape);
        // DLPack >= 1.2 requires explicit strides: NULL means compact row-major, computed here
        // (saturating: an overflowing shape is refused by the validation below, by name).
        let mut strides = if strides.is_null() {
            let mut compact = vec![1i64; n].into_boxed_slice();
            for i in (0..n.saturating_sub(1)).rev() {
                compact[i] = compact[i + 1].saturating_mul(shape[i + 1].max(1));
            }
            compact
        } else {
            copy(strides)
        };
        let header = DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: null_mut(),
            deleter: Some(wrapped_deleter),
            flags,
            dl_tensor: DLTensor {
                data,
                device: Device::new(DeviceType(device_type), device_id),
                ndim,
                dtype: DataType::new(dlport_core::TypeCode(code), bits, lanes),
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset,
            },
        };
        let block = Box::into_raw(Box::new(Wrapped {
            header,
            _shape: shape,
            _strides: strides,
            _release: guard,
        }));
        // SAFETY: just allocated and not shared yet. The header's shape and strides point into
        // the block's boxes, which do not move; its manager_ctx is the block, for the deleter.
        unsafe { (*block).header.manager_ctx = block.cast() };
        // SAFETY: an owned versioned tensor handed over: its deleter frees the block (running
        // the caller's release); `from_raw_versioned` releases it on every error.
        let m = unsafe { ManagedTensor::from_raw_versioned(&raw mut (*block).header) }?;
        give(m, to_versioned != 0, out)
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

/// How many DLPack tensors this C ABI has handed out, and how many of them consumers released
/// (their deleter ran). Either pointer may be NULL.
///
/// Ownership: nothing is transferred.
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
        let sym = python_symbol;
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

/// Looks a CPython function up in the running process: every loaded module on Unix (`dlsym`
/// with `RTLD_DEFAULT`), the already-loaded `python3X.dll` on Windows (`GetModuleHandleA`, which
/// loads nothing, then `GetProcAddress`). `None` outside Python.
#[cfg(unix)]
fn python_symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a symbol up.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// As the Unix `python_symbol`, through the CPython DLL that is loaded (3.8 to 3.29, then the
/// stable-ABI `python3.dll`).
#[cfg(windows)]
fn python_symbol(name: &CStr) -> Option<*mut c_void> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    let dlls = (8..30)
        .map(|minor| format!("python3{minor}.dll\0"))
        .chain(std::iter::once("python3.dll\0".to_owned()));
    for dll in dlls {
        // SAFETY: a NUL-terminated name; GetModuleHandleA only looks a loaded module up.
        let module = unsafe { GetModuleHandleA(dll.as_ptr()) };
        if module.is_null() {
            continue;
        }
        // SAFETY: a loaded module and a NUL-terminated name; only looks the symbol up.
        if let Some(f) = unsafe { GetProcAddress(module, name.as_ptr().cast()) } {
            return Some(f as *mut c_void);
        }
    }
    None
}

/// Neither Unix nor Windows: no way to find CPython, so the destructor does nothing.
#[cfg(not(any(unix, windows)))]
fn python_symbol(_name: &CStr) -> Option<*mut c_void> {
    None
}

/// A `PyCapsule_Destructor` for DLPack capsules, safe to run while an exception is set: it
/// calls the tensor's deleter only while the capsule still bears its unconsumed name
/// (`"dltensor"` or `"dltensor_versioned"`); a consumer that renamed it to `used_*` owns the
/// tensor. The pending exception, if any, is preserved. CPython's functions are looked up in
/// the running process (no link dependency on libpython); outside Python it does nothing.
///
/// Ownership: takes the capsule's tensor while the capsule is unconsumed; the capsule itself
/// stays CPython's.
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
        let mut released = Ok(());
        // SAFETY: GIL held (contract); saves any pending exception.
        unsafe { (py.err_fetch)(&mut t, &mut v, &mut tb) };
        for (name, versioned) in [(c"dltensor_versioned", true), (c"dltensor", false)] {
            // SAFETY: a capsule object, GIL held; IsValid never raises.
            if unsafe { (py.is_valid)(capsule, name.as_ptr()) } == 1 {
                // SAFETY: valid with this name, so GetPointer succeeds without raising.
                let p = unsafe { (py.get_pointer)(capsule, name.as_ptr()) };
                if let Some(p) = NonNull::new(p) {
                    // SAFETY: an unconsumed capsule owns its tensor; it is released once, here.
                    released = unsafe { release_any(p, c_int::from(versioned)) };
                }
                break;
            }
        }
        // SAFETY: restores exactly what was fetched (steals the references back).
        unsafe { (py.err_restore)(t, v, tb) };
        released
    });
}
