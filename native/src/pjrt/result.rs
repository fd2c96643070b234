//! Each PJRT call as a `Result`: the function read from the plugin's table only where its
//! `struct_size` covers the slot, called, and a `PJRT_Error` turned into a dlport error that
//! carries the plugin's message, its code and the call's name (the error destroyed at once).

use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

use dlport_core::Error;

use super::sys::{self, Slot};
use crate::plugin::plugin_error;

/// The longest plugin message kept, in bytes.
const MESSAGE_CAP: usize = 1023;

/// A plugin's function table, checked: the pointer, the table's size and where it came from.
#[derive(Clone, Copy, Debug)]
pub struct Api {
    table: *const sys::ApiHead,
    /// The table's `struct_size`, read once.
    pub size: usize,
    /// The table's minor version.
    pub minor: i32,
    /// The plugin's name in errors (its platform, or its path before the client exists).
    pub name: &'static str,
    /// Where it came from (its path).
    pub origin: &'static str,
}

// SAFETY: the table is immutable after GetPjrtApi, and PJRT functions may be called from any
// thread (the header's contract).
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}

/// A `'static` copy of `s`, shared by equal texts: the path or name of a plugin that loaded
/// (it stays loaded for the process) and the platform names of its clients. Only what
/// succeeded is kept: a failed load or a plugin's error message never enters it, so no
/// number of failures changes what a later load does.
pub(super) fn keep(s: &str) -> &'static str {
    static KEPT: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(k) = kept.iter().find(|k| **k == s) {
        return k;
    }
    let k: &'static str = Box::leak(s.to_owned().into_boxed_str());
    kept.push(k);
    k
}

/// The PJRT error code `UNIMPLEMENTED`.
pub const UNIMPLEMENTED: i32 = 12;

impl Api {
    /// Checks a table: not NULL, `struct_size` at least its head, the major version this room
    /// declares. Functions are checked one by one, when called. `origin` names the plugin in
    /// errors; it is kept for the process only when the table is accepted.
    ///
    /// # Safety
    /// `table` is NULL or readable for its `struct_size` bytes (at least the head), and stays
    /// so for the life of the process.
    pub unsafe fn new(table: *const c_void, origin: &str) -> Result<Self, Error> {
        let fail = |what: String| plugin_error(origin, origin, "GetPjrtApi", -1, &what);
        if table.is_null() {
            return Err(fail("GetPjrtApi returned NULL".into()));
        }
        let table = table.cast::<sys::ApiHead>();
        // SAFETY: readable for at least the size field (contract).
        let size = unsafe { table.cast::<usize>().read_unaligned() };
        let head = std::mem::size_of::<sys::ApiHead>();
        if size < head {
            return Err(fail(format!(
                "PJRT_Api.struct_size = {size} is smaller than the table's head ({head} bytes)"
            )));
        }
        // SAFETY: readable for `size` >= the head's bytes.
        let (major, minor) = unsafe { ((*table).major, (*table).minor) };
        if major != sys::API_MAJOR {
            return Err(fail(format!(
                "PJRT API version {major}.{minor}: dlport speaks major version {} (built from \
                 pjrt_c_api.h {}.{}); use a plugin of major version {}",
                sys::API_MAJOR,
                sys::API_MAJOR,
                sys::API_MINOR,
                sys::API_MAJOR
            )));
        }
        let origin = keep(origin);
        Ok(Self {
            table,
            size,
            minor,
            name: origin,
            origin,
        })
    }

    /// The same table reported under another name (the platform, once known).
    pub fn named(self, name: &'static str) -> Self {
        Self { name, ..self }
    }

    /// An error naming the plugin and `function`.
    pub fn error(&self, function: &'static str, code: i32, what: &str) -> Error {
        plugin_error(self.name, self.origin, function, code, what)
    }

    /// The raw pointer in `slot`, or an error saying the table is too short for it (its API
    /// version too old) or the plugin left it NULL (not implemented).
    pub fn function(&self, slot: Slot) -> Result<*const c_void, Error> {
        if self.size < slot.end() {
            return Err(self.error(
                slot.name,
                UNIMPLEMENTED,
                &format!(
                    "the plugin's table (API 0.{}, struct_size {}) ends before {} (it needs \
                     {} bytes): the plugin's API is too old for this function",
                    self.minor,
                    self.size,
                    slot.name,
                    slot.end()
                ),
            ));
        }
        // SAFETY: the table is readable for `size` bytes, which cover the slot.
        let p = unsafe {
            self.table
                .cast::<u8>()
                .add(slot.end() - std::mem::size_of::<usize>())
                .cast::<*const c_void>()
                .read_unaligned()
        };
        if p.is_null() {
            return Err(self.error(
                slot.name,
                UNIMPLEMENTED,
                &format!("the plugin leaves {} NULL (not implemented)", slot.name),
            ));
        }
        Ok(p)
    }

    /// Whether the plugin offers `slot` (in its table, not NULL).
    pub fn has(&self, slot: Slot) -> bool {
        self.function(slot).is_ok()
    }

    /// The extensions the table's `extension_start` chain lists: `(type, struct_size)` of each
    /// `PJRT_Extension_Base`, in order, at most 64 (a longer chain, or one that loops, is cut).
    pub fn extensions(&self) -> Vec<(i32, usize)> {
        let mut out = Vec::new();
        // SAFETY: the head is readable (checked in `new`).
        let mut at = unsafe { (*self.table).extension_start }
            .cast::<sys::ExtensionBase>()
            .cast_const();
        while !at.is_null() && out.len() < 64 {
            // SAFETY: a non-NULL extension the plugin lists lives as long as its table; every
            // extension starts with PJRT_Extension_Base (header).
            let b = unsafe { &*at };
            out.push((b.kind, b.struct_size));
            at = b.next;
        }
        out
    }

    /// Calls the function in `slot` with `args` (an args struct of the slot's type), turning a
    /// returned `PJRT_Error` into an error naming the call.
    ///
    /// # Safety
    /// `args` is the args struct the header declares for `slot`, its inputs valid for the
    /// function's contract.
    pub unsafe fn call<A>(&self, slot: Slot, args: &mut A) -> Result<(), Error> {
        let f = self.function(slot)?;
        // SAFETY: every table function but the error helpers has this signature (header).
        let f: sys::Fn = unsafe { std::mem::transmute::<*const c_void, sys::Fn>(f) };
        // SAFETY: the caller's contract.
        let err = unsafe { f(std::ptr::from_mut(args).cast()) };
        if err.is_null() {
            Ok(())
        } else {
            // SAFETY: a PJRT_Error the plugin just returned, owned by us.
            Err(unsafe { self.take_error(slot.name, err) })
        }
    }

    /// The dlport error for a plugin's `PJRT_Error` from `function`: its message and code,
    /// after which the error is destroyed (once, here).
    ///
    /// # Safety
    /// `err` is a live `PJRT_Error` of this plugin, not used afterwards.
    pub unsafe fn take_error(&self, function: &'static str, err: *mut sys::PJRT_Error) -> Error {
        let mut message = String::from("(the plugin gives no message: PJRT_Error_Message missing)");
        if let Ok(f) = self.function(sys::ERROR_MESSAGE) {
            let mut a = sys::Error_Message_Args::new();
            a.error = err;
            // SAFETY: PJRT_Error_Message's signature and args (header).
            unsafe {
                let f: sys::VoidFn = std::mem::transmute::<*const c_void, sys::VoidFn>(f);
                f(std::ptr::from_mut(&mut a).cast());
            }
            if !a.message.is_null() {
                let n = a.message_size.min(MESSAGE_CAP);
                // SAFETY: the message is readable for `message_size` bytes while the error
                // lives (header); at most MESSAGE_CAP are copied.
                let bytes = unsafe { std::slice::from_raw_parts(a.message.cast::<u8>(), n) };
                message = String::from_utf8_lossy(bytes).into_owned();
            }
        }
        let mut code = -1;
        if let Ok(f) = self.function(sys::ERROR_GET_CODE) {
            let mut a = sys::Error_GetCode_Args::new();
            a.error = err;
            // SAFETY: PJRT_Error_GetCode's signature and args (header).
            let e = unsafe {
                let f: sys::Fn = std::mem::transmute::<*const c_void, sys::Fn>(f);
                f(std::ptr::from_mut(&mut a).cast())
            };
            if e.is_null() {
                code = a.code;
            }
        }
        if let Ok(f) = self.function(sys::ERROR_DESTROY) {
            let mut a = sys::Error_Destroy_Args::new();
            a.error = err;
            // SAFETY: PJRT_Error_Destroy's signature; the error is destroyed once, here.
            unsafe {
                let f: sys::VoidFn = std::mem::transmute::<*const c_void, sys::VoidFn>(f);
                f(std::ptr::from_mut(&mut a).cast());
            }
        }
        self.error(function, code, &message)
    }
}
