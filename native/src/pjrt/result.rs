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
/// (it stays loaded for the process), the platform names of its clients and their backend
/// names (`pjrt:<platform>`). Only what succeeded is kept: a failed load or a plugin's error
/// message never enters it, so no number of failures changes what a later load does.
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

/// Whether `e` says a function is not implemented: its slot is missing or NULL
/// ([`Api::function`]), or the plugin answered `UNIMPLEMENTED` (a stub in the table).
pub fn is_unimplemented(e: &Error) -> bool {
    matches!(e, Error::Backend(dlport_core::error::BackendError::Failed { code, .. }) if *code == UNIMPLEMENTED)
}

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
                    "{} is not implemented by this plugin (PJRT API 0.{}): its table \
                     (struct_size {}) ends before {}'s slot (it needs {} bytes); the plugin's \
                     API is too old for this function",
                    slot.name,
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

    /// Calls the function in `slot` with `args`, turning a returned `PJRT_Error` into an error
    /// naming the call. Reached only through the typed functions below, each of which pairs one
    /// slot with its args struct.
    ///
    /// # Safety
    /// `args` is the args struct the header declares for `slot`, its inputs valid for the
    /// function's contract.
    unsafe fn call<A>(&self, slot: Slot, args: &mut A) -> Result<(), Error> {
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

/// One method on [`Api`] per PJRT function dlport calls: `method = SLOT(Args)` pairs the slot
/// with the args struct the header declares for it, here and nowhere else. Each is gated on the
/// table's `struct_size` (a function past its end is not implemented by that plugin) and on a
/// NULL slot.
macro_rules! functions {
    ($($method:ident = $slot:ident($args:ident);)*) => {
        impl Api {$(
            #[doc = concat!("Calls the function in `sys::", stringify!($slot), "` with its args, `sys::",
                stringify!($args), "`; an error names the function and the plugin.")]
            ///
            /// # Safety
            /// The args' inputs are valid for the function's contract (pjrt_c_api.h).
            pub unsafe fn $method(&self, args: &mut sys::$args) -> Result<(), Error> {
                // SAFETY: the slot's own args struct (paired here); the caller's contract.
                unsafe { self.call(sys::$slot, args) }
            }
        )*}

        /// Each slot with the header name of the args struct paired with it.
        #[cfg(test)]
        const PAIRS: &[(Slot, &str)] = &[$((sys::$slot, concat!("PJRT_", stringify!($args)))),*];
    };
}

functions! {
    plugin_initialize = PLUGIN_INITIALIZE(Plugin_Initialize_Args);
    event_destroy = EVENT_DESTROY(Event_Destroy_Args);
    event_await = EVENT_AWAIT(Event_Await_Args);
    client_create = CLIENT_CREATE(Client_Create_Args);
    client_destroy = CLIENT_DESTROY(Client_Destroy_Args);
    client_platform_name = CLIENT_PLATFORM_NAME(Client_PlatformName_Args);
    client_addressable_devices = CLIENT_ADDRESSABLE_DEVICES(Client_AddressableDevices_Args);
    client_compile = CLIENT_COMPILE(Client_Compile_Args);
    client_buffer_from_host_buffer =
        CLIENT_BUFFER_FROM_HOST_BUFFER(Client_BufferFromHostBuffer_Args);
    client_create_view = CLIENT_CREATE_VIEW(Client_CreateViewOfDeviceBuffer_Args);
    device_description_id = DEVICE_DESCRIPTION_ID(DeviceDescription_Id_Args);
    device_description_kind = DEVICE_DESCRIPTION_KIND(DeviceDescription_Kind_Args);
    device_get_description = DEVICE_GET_DESCRIPTION(Device_GetDescription_Args);
    device_addressable_memories =
        DEVICE_ADDRESSABLE_MEMORIES(Device_AddressableMemories_Args);
    memory_kind = MEMORY_KIND(Memory_Kind_Args);
    executable_destroy = EXECUTABLE_DESTROY(Executable_Destroy_Args);
    executable_num_outputs = EXECUTABLE_NUM_OUTPUTS(Executable_NumOutputs_Args);
    loaded_executable_destroy = LOADED_EXECUTABLE_DESTROY(LoadedExecutable_Destroy_Args);
    loaded_executable_get_executable =
        LOADED_EXECUTABLE_GET_EXECUTABLE(LoadedExecutable_GetExecutable_Args);
    loaded_executable_execute = LOADED_EXECUTABLE_EXECUTE(LoadedExecutable_Execute_Args);
    buffer_destroy = BUFFER_DESTROY(Buffer_Destroy_Args);
    buffer_element_type = BUFFER_ELEMENT_TYPE(Buffer_ElementType_Args);
    buffer_dimensions = BUFFER_DIMENSIONS(Buffer_Dimensions_Args);
    buffer_get_memory_layout = BUFFER_GET_MEMORY_LAYOUT(Buffer_GetMemoryLayout_Args);
    buffer_on_device_size = BUFFER_ON_DEVICE_SIZE(Buffer_OnDeviceSizeInBytes_Args);
    buffer_device = BUFFER_DEVICE(Buffer_Device_Args);
    buffer_delete = BUFFER_DELETE(Buffer_Delete_Args);
    buffer_to_host = BUFFER_TO_HOST(Buffer_ToHostBuffer_Args);
    buffer_ready_event = BUFFER_READY_EVENT(Buffer_ReadyEvent_Args);
    buffer_increase_external_ref =
        BUFFER_INCREASE_EXTERNAL_REF(Buffer_IncreaseExternalReferenceCount_Args);
    buffer_decrease_external_ref =
        BUFFER_DECREASE_EXTERNAL_REF(Buffer_DecreaseExternalReferenceCount_Args);
    buffer_opaque_pointer = BUFFER_OPAQUE_POINTER(Buffer_OpaqueDeviceMemoryDataPointer_Args);
    buffer_unsafe_pointer = BUFFER_UNSAFE_POINTER(Buffer_UnsafePointer_Args);
}

#[cfg(test)]
mod tests {
    use super::PAIRS;

    /// Every function is called with the args struct the header names after it.
    #[test]
    fn each_slot_has_its_own_args() {
        for (slot, args) in PAIRS {
            assert_eq!(format!("{}_Args", slot.name), *args);
        }
        assert_eq!(PAIRS.len(), 33);
    }
}
