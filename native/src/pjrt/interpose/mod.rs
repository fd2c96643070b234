//! A `PJRT_Api` table interposed between a host that loads PJRT plugins (JAX) and a vendor's
//! table, so that dlport sees the host's own client and buffers without a patch to the host.
//!
//! [`interpose`] copies the vendor's table (its `struct_size` bytes, nothing more) and replaces
//! a few slots with dlport's functions; every other call goes to the vendor's function
//! unchanged. The replaced slots, each forwarding to the vendor:
//! - `PJRT_Client_Create` and `PJRT_Client_Destroy`: record the client the host made (the one
//!   its buffers belong to) and count its holders, so dlport can borrow it ([`borrow_client`]);
//! - `PJRT_Client_PlatformName`: answers a name the caller chose, where one is given (a
//!   stand-in vendor for tests: the XLA CPU plugin answering "xpu");
//! - `PJRT_Buffer_UnsafePointer`: while a thread [`learn`]s, gives dlport the host's
//!   `PJRT_Buffer*` and pins it, on that thread, before the vendor answers;
//! - `PJRT_Buffer_Destroy` and `PJRT_Buffer_Delete`: deferred while an export pins the buffer
//!   (the vendor frees memory at `Destroy` even under an external reference), run when the
//!   last pin goes; `PJRT_Buffer_IsDeleted` answers true for a buffer whose `Delete` waits.
//!
//! Each interposed table is one of [`MAX_TABLES`] numbered rooms, whose functions are
//! monomorphised on the room's number: a C function pointer carries no data, so the number
//! finds the vendor's table.

mod clients;
mod export;
mod pins;

pub use export::{export, host_copies};
pub use pins::pins;

/// How many holders the host's client of the interposed table `table` has (the host, each
/// borrow, each pinned buffer); 0 once the vendor destroyed it. For tests.
pub fn client_holders(table: *const c_void) -> usize {
    by_table(table).map_or(0, |ip| clients::holders(ip.client.load(Ordering::Acquire)))
}

use std::cell::Cell;
use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use dlport_core::Error;
use dlport_core::abi::DeviceType;

use super::result::Api;
use super::sys::{self, Head, Slot};

/// How many tables can be interposed in one process (one per platform; a stand-in and the
/// table over it count two).
pub const MAX_TABLES: usize = 8;

/// One interposed table: the vendor's, checked; dlport's copy; what it changes.
pub(crate) struct Interposer {
    pub(crate) vendor: Api,
    vendor_table: usize,
    table: Box<[usize]>,
    rename: Option<CString>,
    pub(crate) hooks: bool,
    stubs: Vec<String>,
    pub(crate) device_type: DeviceType,
    pub(crate) client: AtomicPtr<sys::PJRT_Client>,
}

static ROOMS: [OnceLock<Interposer>; MAX_TABLES] = [const { OnceLock::new() }; MAX_TABLES];
static INSTALL: Mutex<()> = Mutex::new(());

/// The interposer in room `n` (set before its table is handed out).
pub(crate) fn room(n: usize) -> Option<&'static Interposer> {
    ROOMS.get(n).and_then(OnceLock::get)
}

/// What a table should change: the platform name it answers (`None`: the vendor's) and
/// whether it hooks buffers and clients (`false`: a renaming only).
#[derive(Clone, Debug, Default)]
pub struct Interposition {
    /// The name `PJRT_Client_PlatformName` answers instead of the vendor's.
    pub rename: Option<String>,
    /// Whether the client and buffer slots are hooked (what an export needs).
    pub hooks: bool,
    /// Functions the table leaves NULL, by name (each one of [`STUBBABLE`]): a stand-in for a
    /// plugin that lacks them (jax-mps, tt-xla), for tests.
    pub stubs: Vec<String>,
    /// The DLPack device type of the platform's memory (`None`: the platform table's for the
    /// name `origin`, else kDLExtDev).
    pub device_type: Option<DeviceType>,
}

/// The functions an [`Interposition`] may leave NULL: what a view needs.
pub const STUBBABLE: [Slot; 4] = [
    sys::BUFFER_INCREASE_EXTERNAL_REF,
    sys::BUFFER_DECREASE_EXTERNAL_REF,
    sys::BUFFER_OPAQUE_POINTER,
    sys::CLIENT_CREATE_VIEW,
];

/// Interposes a table over the vendor's `PJRT_Api` at `vendor` and returns it. The same
/// vendor table with the same interposition returns the same table (installing twice is
/// harmless); another interposition of the same table, or a table already interposed by
/// dlport, is refused.
///
/// # Safety
/// `vendor` is NULL or a `PJRT_Api` readable for its `struct_size` bytes for the rest of the
/// process, whose functions follow the PJRT C API.
pub unsafe fn interpose(
    vendor: *const c_void,
    what: &Interposition,
    origin: &str,
) -> Result<*const c_void, Error> {
    let _guard = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: the caller's contract.
    let api = unsafe { Api::new(vendor, origin) }?;
    // The PJRT door's one rule: the caller's device type, else the platform table's, else
    // kDLExtDev (never a wrong label).
    let device_type = super::types::device_type_for(origin, what.device_type);
    let refuse = |what: String| api.error("dlport.jax.install", -1, &what);
    let mut free = None;
    for (n, slot) in ROOMS.iter().enumerate() {
        match slot.get() {
            Some(ip)
                if std::ptr::eq(ip.table.as_ptr().cast(), vendor) && ip.hooks && what.hooks =>
            {
                return Err(refuse(
                    "this table is already dlport's interposed table: interpose the vendor's \
                     table, once"
                        .into(),
                ));
            }
            Some(ip) if ip.vendor_table == vendor as usize => {
                let same = ip.hooks == what.hooks
                    && ip.stubs == what.stubs
                    && ip.device_type == device_type
                    && ip.rename.as_ref().map(|c| c.to_string_lossy().into_owned()) == what.rename;
                if same {
                    return Ok(ip.table.as_ptr().cast());
                }
                return Err(refuse(format!(
                    "the table is already interposed (room {n}) with device type {}: \
                     install it once per process, with one device type",
                    ip.device_type.0
                )));
            }
            Some(_) => {}
            None => {
                free.get_or_insert(n);
            }
        }
    }
    let n = free.ok_or_else(|| {
        refuse(format!(
            "{MAX_TABLES} tables are interposed already: the most one process holds"
        ))
    })?;
    let rename = match &what.rename {
        Some(r) => Some(
            CString::new(r.as_str())
                .map_err(|_| refuse(format!("the platform name {r:?} has a NUL byte")))?,
        ),
        None => None,
    };
    let mut stubs = Vec::new();
    for name in &what.stubs {
        let slot = STUBBABLE.iter().find(|s| s.name == name).ok_or_else(|| {
            let names: Vec<_> = STUBBABLE.iter().map(|s| s.name).collect();
            refuse(format!(
                "{name:?} is not a function a table may stub: one of {names:?}"
            ))
        })?;
        stubs.push(*slot);
    }
    let words = api.size.div_ceil(std::mem::size_of::<usize>());
    let mut table = vec![0usize; words].into_boxed_slice();
    // SAFETY: the vendor's table is readable for `size` bytes (contract); the copy has room
    // for them (`words` words).
    unsafe {
        std::ptr::copy_nonoverlapping(vendor.cast::<u8>(), table.as_mut_ptr().cast(), api.size)
    };
    let hooks = HOOKS[n]();
    let mut set = |slot: Slot, f: sys::Fn| {
        // Only slots the vendor's table has and fills: a NULL stays NULL.
        if api.has(slot) {
            table[slot.end() / std::mem::size_of::<usize>() - 1] = f as usize;
        }
    };
    if rename.is_some() {
        set(sys::CLIENT_PLATFORM_NAME, hooks.platform_name);
    }
    if what.hooks {
        set(sys::CLIENT_CREATE, hooks.client_create);
        set(sys::CLIENT_DESTROY, hooks.client_destroy);
        set(sys::BUFFER_DESTROY, hooks.destroy);
        set(sys::BUFFER_DELETE, hooks.delete);
        set(sys::BUFFER_IS_DELETED, hooks.is_deleted);
        set(sys::BUFFER_UNSAFE_POINTER, hooks.unsafe_pointer);
    }
    for slot in &stubs {
        if api.size >= slot.end() {
            table[slot.end() / std::mem::size_of::<usize>() - 1] = 0;
        }
    }
    let ip = Interposer {
        vendor: api,
        vendor_table: vendor as usize,
        table,
        rename,
        hooks: what.hooks,
        stubs: what.stubs.clone(),
        device_type,
        client: AtomicPtr::new(std::ptr::null_mut()),
    };
    let ptr = ip.table.as_ptr().cast::<c_void>();
    if ROOMS[n].set(ip).is_err() {
        return Err(refuse(format!("room {n} was taken while installing")));
    }
    Ok(ptr)
}

/// The interposer whose table is `table`.
pub(crate) fn by_table(table: *const c_void) -> Option<&'static Interposer> {
    ROOMS
        .iter()
        .filter_map(OnceLock::get)
        .find(|ip| std::ptr::eq(ip.table.as_ptr().cast(), table))
}

/// The client the host created through the interposed table `table` (NULL before it did).
pub fn host_client(table: *const c_void) -> *mut c_void {
    by_table(table).map_or(std::ptr::null_mut(), |ip| {
        ip.client.load(Ordering::Acquire).cast()
    })
}

/// A counted reference to the client the host created through the interposed table `table`,
/// for a second user of it (`PjrtClient::adopt` over `table`): the vendor destroys the client
/// only when the host and every borrower gave theirs back through `table`'s
/// `PJRT_Client_Destroy`. `None` before the host created one, or after it was destroyed.
pub fn borrow_client(table: *const c_void) -> Option<*mut c_void> {
    let ip = by_table(table).filter(|ip| ip.hooks)?;
    let client = ip.client.load(Ordering::Acquire);
    (!client.is_null() && clients::borrow(client)).then_some(client.cast())
}

/// Gives back a reference [`borrow_client`] gave, for a borrower that made no client value of
/// it (a value's drop gives it back through the table itself).
///
/// # Safety
/// `client` came from `borrow_client(table)` and is given back once.
pub unsafe fn give_back_client(table: *const c_void, client: *mut c_void) {
    if clients::release(client.cast()) {
        let mut a = sys::Client_Destroy_Args::new();
        a.client = client.cast();
        if let Some(ip) = by_table(table) {
            // SAFETY: the last reference: the vendor's Destroy runs once, here.
            let _ = unsafe { ip.vendor.client_destroy(&mut a) };
        }
    }
}

/// The DLPack device type of the interposed table `table` (`None`: not one of dlport's).
pub fn table_device_type(table: *const c_void) -> Option<DeviceType> {
    by_table(table).map(|ip| ip.device_type)
}

/// What a thread's [`learn`] found: the buffer, pinned, and the room whose table saw it.
#[derive(Clone, Copy)]
enum Learning {
    Off,
    Waiting,
    Got(*mut sys::PJRT_Buffer, usize),
}

thread_local! {
    static LEARN: Cell<Learning> = const { Cell::new(Learning::Off) };
}

/// A host buffer learnt through an interposed table, pinned: its `Destroy` and `Delete` wait
/// until this value (and every other pin of it) is gone.
pub struct Learnt {
    pub(crate) buffer: *mut sys::PJRT_Buffer,
    pub(crate) room: usize,
}

// SAFETY: the pin may be dropped on any thread (PJRT functions may be called from any thread).
unsafe impl Send for Learnt {}

impl Drop for Learnt {
    fn drop(&mut self) {
        pins::unpin(self.buffer);
    }
}

impl core::fmt::Debug for Learnt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Learnt")
            .field("buffer", &self.buffer)
            .field("room", &self.room)
            .finish()
    }
}

/// Runs `f` (which makes the host call `PJRT_Buffer_UnsafePointer` on one buffer, as JAX's
/// `unsafe_buffer_pointer()` does, on this thread) and returns its result and the buffer the
/// interposed table saw first, pinned. `None` when no interposed table saw one.
pub fn learn<R>(f: impl FnOnce() -> R) -> (R, Option<Learnt>) {
    LEARN.with(|l| l.set(Learning::Waiting));
    let r = f();
    let got = LEARN.with(|l| l.replace(Learning::Off));
    let learnt = match got {
        Learning::Got(buffer, room) => Some(Learnt { buffer, room }),
        _ => None,
    };
    (r, learnt)
}

/// The functions of one room.
struct Hooks {
    client_create: sys::Fn,
    client_destroy: sys::Fn,
    platform_name: sys::Fn,
    destroy: sys::Fn,
    delete: sys::Fn,
    is_deleted: sys::Fn,
    unsafe_pointer: sys::Fn,
}

const HOOKS: [fn() -> Hooks; MAX_TABLES] = [
    hooks::<0>, hooks::<1>, hooks::<2>, hooks::<3>, hooks::<4>, hooks::<5>, hooks::<6>, hooks::<7>,
];

fn hooks<const N: usize>() -> Hooks {
    Hooks {
        client_create: client_create::<N>,
        client_destroy: client_destroy::<N>,
        platform_name: platform_name::<N>,
        destroy: destroy::<N>,
        delete: delete::<N>,
        is_deleted: is_deleted::<N>,
        unsafe_pointer: unsafe_pointer::<N>,
    }
}

/// Calls the vendor's function in `slot` with the host's args.
///
/// # Safety
/// `args` are the host's args for `slot`.
unsafe fn forward(n: usize, slot: Slot, args: *mut c_void) -> *mut sys::PJRT_Error {
    let Some(f) = room(n).and_then(|ip| ip.vendor.function(slot).ok()) else {
        // Unreachable: a room's hook is installed only over a vendor function that exists.
        return std::ptr::null_mut();
    };
    // SAFETY: table functions have this signature (header); the host's args go on unchanged.
    unsafe { std::mem::transmute::<*const c_void, sys::Fn>(f)(args) }
}

/// Whether the host's args struct (its `struct_size`) reaches `end` bytes.
///
/// # Safety
/// `args` points to an args struct that starts with [`Head`].
unsafe fn reaches(args: *mut c_void, end: usize) -> bool {
    // SAFETY: every args struct starts with its size (contract).
    !args.is_null() && unsafe { (*args.cast::<Head>()).struct_size } >= end
}

/// The buffer of a buffer call's args (all start with the head, then the buffer).
///
/// # Safety
/// `args` is NULL or a buffer call's args.
unsafe fn buffer_of(args: *mut c_void) -> *mut sys::PJRT_Buffer {
    // SAFETY: as the contract says; the field follows the head in every buffer call.
    if unsafe { reaches(args, std::mem::size_of::<sys::Buffer_Destroy_Args>()) } {
        // SAFETY: the args reach the buffer field (checked).
        unsafe { (*args.cast::<sys::Buffer_Destroy_Args>()).buffer }
    } else {
        std::ptr::null_mut()
    }
}

unsafe extern "C" fn client_create<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: the host's args for PJRT_Client_Create.
    let err = unsafe { forward(N, sys::CLIENT_CREATE, args) };
    let end = std::mem::offset_of!(sys::Client_Create_Args, client) + 8;
    // SAFETY: the args reach the client field (checked); the vendor wrote it on success.
    if err.is_null() && unsafe { reaches(args, end) } {
        // SAFETY: as above: the field is in the host's struct, written by the vendor.
        let client = unsafe { (*args.cast::<sys::Client_Create_Args>()).client };
        if let Some(ip) = room(N) {
            clients::created(client);
            ip.client.store(client, Ordering::Release);
        }
    }
    err
}

unsafe extern "C" fn client_destroy<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    let end = std::mem::offset_of!(sys::Client_Destroy_Args, client) + 8;
    // SAFETY: the host's args for PJRT_Client_Destroy, reaching the client (checked).
    if unsafe { reaches(args, end) } {
        // SAFETY: as above.
        let client = unsafe { (*args.cast::<sys::Client_Destroy_Args>()).client };
        if !clients::release(client) {
            return std::ptr::null_mut();
        }
    }
    // SAFETY: the host's args, forwarded: the last reference.
    unsafe { forward(N, sys::CLIENT_DESTROY, args) }
}

unsafe extern "C" fn platform_name<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    let end = std::mem::size_of::<sys::Client_PlatformName_Args>();
    match room(N).and_then(|ip| ip.rename.as_ref()) {
        // SAFETY: the host's args for PJRT_Client_PlatformName, reaching the out fields
        // (checked); the name lives in the room for the rest of the process.
        Some(name) if unsafe { reaches(args, end) } => unsafe {
            let a = args.cast::<sys::Client_PlatformName_Args>();
            (*a).platform_name = name.as_ptr();
            (*a).platform_name_size = name.as_bytes().len();
            std::ptr::null_mut()
        },
        // SAFETY: the host's args, forwarded.
        _ => unsafe { forward(N, sys::CLIENT_PLATFORM_NAME, args) },
    }
}

unsafe extern "C" fn destroy<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: the host's args for PJRT_Buffer_Destroy.
    let buffer = unsafe { buffer_of(args) };
    if pins::defer(buffer, pins::Deferred::Destroy) {
        return std::ptr::null_mut();
    }
    // SAFETY: the host's args, forwarded.
    unsafe { forward(N, sys::BUFFER_DESTROY, args) }
}

unsafe extern "C" fn delete<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: the host's args for PJRT_Buffer_Delete.
    let buffer = unsafe { buffer_of(args) };
    if pins::defer(buffer, pins::Deferred::Delete) {
        return std::ptr::null_mut();
    }
    // SAFETY: the host's args, forwarded.
    unsafe { forward(N, sys::BUFFER_DELETE, args) }
}

unsafe extern "C" fn is_deleted<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: the host's args for PJRT_Buffer_IsDeleted.
    let buffer = unsafe { buffer_of(args) };
    // The header's struct size ends at the flag (no tail padding).
    let end = std::mem::offset_of!(sys::Buffer_IsDeleted_Args, is_deleted) + 1;
    // SAFETY: the args reach `is_deleted` (checked).
    if pins::is_deleted(buffer) && unsafe { reaches(args, end) } {
        // SAFETY: as above: the host's struct reaches the flag.
        unsafe { (*args.cast::<sys::Buffer_IsDeleted_Args>()).is_deleted = true };
        return std::ptr::null_mut();
    }
    // SAFETY: the host's args, forwarded.
    unsafe { forward(N, sys::BUFFER_IS_DELETED, args) }
}

unsafe extern "C" fn unsafe_pointer<const N: usize>(args: *mut c_void) -> *mut sys::PJRT_Error {
    // SAFETY: the host's args for PJRT_Buffer_UnsafePointer.
    let buffer = unsafe { buffer_of(args) };
    if !buffer.is_null() {
        LEARN.with(|l| {
            if let (Learning::Waiting, Some(ip)) = (l.get(), room(N)) {
                // Pinned before the vendor answers: the host holds the buffer for this call.
                pins::pin(buffer, ip.vendor, ip.client.load(Ordering::Acquire));
                l.set(Learning::Got(buffer, N));
            }
        });
    }
    // SAFETY: the host's args, forwarded.
    unsafe { forward(N, sys::BUFFER_UNSAFE_POINTER, args) }
}
