//! The PJRT C API's ABI, as the XLA CPU plugin's `pjrt_c_api.h` (API 0.81) lays it out: the
//! subset dlport calls (its client and the interposer), declared here once. Nothing in this room
//! calls a function; `result` pairs each slot with its args struct and reads a slot only where
//! the plugin's `struct_size` covers it.
//!
//! Every args struct starts with `struct_size` (set to its `STRUCT_SIZE`, the header's
//! `PJRT_STRUCT_SIZE`: the end of its last field, before any tail padding) and
//! `extension_start`. `native/tests/pjrt_header.rs` checks every slot's offset and every
//! struct's size and field offsets here against the plugins' `pjrt_c_api.h`.
#![allow(non_camel_case_types, missing_docs)]

use std::ffi::{c_char, c_int, c_void};

/// The major version of the API this room declares; another major is refused.
pub const API_MAJOR: c_int = 0;
/// The minor version of the header the declarations come from.
pub const API_MINOR: c_int = 81;

macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    PJRT_Error,
    PJRT_Client,
    PJRT_Device,
    PJRT_DeviceDescription,
    PJRT_Buffer,
    PJRT_Event,
    PJRT_LoadedExecutable,
    PJRT_Executable,
    PJRT_Memory
);

/// The head of every args struct.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Head {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
}

/// A struct as this room lays it out, for the test that checks it against pjrt_c_api.h
/// (`native/tests/pjrt_header.rs`).
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The header's name for the struct.
    pub name: &'static str,
    /// Its `size_of` here.
    pub size: usize,
    /// The `struct_size` dlport sends: the end of its last field (the header's `NAME_STRUCT_SIZE`).
    pub struct_size: usize,
    /// Each field declared here: the header's name for it (`a.b` for a nested one) and its
    /// offset here.
    pub fields: Vec<(&'static str, usize)>,
}

/// Declares `#[repr(C)]` structs of the header, each with its header name and, where a field's
/// header name differs (`type`, an anonymous union's first member), that name after `as`. Each
/// gets `STRUCT_SIZE` (the end of its last field: the header's `PJRT_STRUCT_SIZE`, which
/// `size_of` exceeds by any tail padding) and `layout()` (its [`Layout`]).
macro_rules! c_structs {
    ($($(#[$m:meta])* $name:ident = $c:expr, { $($field:ident $(as $cf:literal)?: $ty:ty),* $(,)? })*) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            $(pub $field: $ty,)*
        }
        impl $name {
            /// The `struct_size` the header gives this struct: the end of its last field.
            pub const STRUCT_SIZE: usize = {
                let mut end = 0;
                $(
                    let e = std::mem::offset_of!($name, $field) + std::mem::size_of::<$ty>();
                    if e > end {
                        end = e;
                    }
                )*
                end
            };
            /// This struct's layout, for the test against the header.
            #[doc(hidden)]
            pub fn layout() -> $crate::pjrt::sys::Layout {
                $crate::pjrt::sys::Layout {
                    name: $c,
                    size: std::mem::size_of::<Self>(),
                    struct_size: Self::STRUCT_SIZE,
                    fields: vec![$(
                        (c_structs!(@name $field $($cf)?), std::mem::offset_of!($name, $field)),
                    )*],
                }
            }
        }
    )*};
    (@name $f:ident) => { stringify!($f) };
    (@name $f:ident $c:literal) => { $c };
}

/// Declares an args struct `PJRT_<name>` that starts with [`Head`], and its `new()` (the head
/// set, every other field zero: NULL pointers, zero counts).
macro_rules! args {
    ($($name:ident { $($field:ident $(as $cf:literal)?: $ty:ty),* $(,)? })*) => {$(
        c_structs! {
            $name = concat!("PJRT_", stringify!($name)), {
                head as "struct_size": Head,
                $($field $(as $cf)?: $ty,)*
            }
        }
        #[allow(clippy::new_without_default)]
        impl $name {
            /// The args with `struct_size` set and every other field zeroed.
            pub fn new() -> Self {
                // SAFETY: every field is an integer, a raw pointer or an Option of a function
                // pointer, for which all zeroes is a valid value (0 / NULL / None).
                let mut a: Self = unsafe { std::mem::zeroed() };
                a.head.struct_size = Self::STRUCT_SIZE;
                a
            }
        }
    )*
        /// Every struct this room declares, as laid out here, for the test against the header.
        #[doc(hidden)]
        pub fn layouts() -> Vec<Layout> {
            vec![
                ApiHead::layout(), LayoutTiled::layout(), LayoutStrides::layout(),
                MemoryLayout::layout(), Program::layout(), ExecuteOptions::layout(),
                NamedValue::layout(), ExtensionBase::layout(), $($name::layout()),*
            ]
        }
    };
}

pub type OnDelete = Option<unsafe extern "C" fn(device_buffer_ptr: *mut c_void, arg: *mut c_void)>;

c_structs! {
    /// `PJRT_Buffer_MemoryLayout_Tiled`.
    #[derive(Clone, Copy)]
    LayoutTiled = "PJRT_Buffer_MemoryLayout_Tiled", {
        head as "struct_size": Head,
        minor_to_major: *const i64,
        minor_to_major_size: usize,
        tile_dims: *const i64,
        tile_dim_sizes: *const usize,
        num_tiles: usize,
    }
    /// `PJRT_Buffer_MemoryLayout_Strides`.
    #[derive(Clone, Copy)]
    LayoutStrides = "PJRT_Buffer_MemoryLayout_Strides", {
        head as "struct_size": Head,
        byte_strides: *const i64,
        num_byte_strides: usize,
    }
}

/// The union in `PJRT_Buffer_MemoryLayout`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union LayoutUnion {
    pub tiled: LayoutTiled,
    pub strides: LayoutStrides,
}

/// `PJRT_Buffer_MemoryLayout_Type_Tiled`.
pub const LAYOUT_TILED: c_int = 0;
/// `PJRT_Buffer_MemoryLayout_Type_Strides`.
pub const LAYOUT_STRIDES: c_int = 1;

c_structs! {
    /// `PJRT_Buffer_MemoryLayout`.
    #[derive(Clone, Copy)]
    MemoryLayout = "PJRT_Buffer_MemoryLayout", {
        head as "struct_size": Head,
        u as "tiled": LayoutUnion,
        kind as "type": c_int,
    }
    /// `PJRT_Program`.
    Program = "PJRT_Program", {
        head as "struct_size": Head,
        code: *mut c_char,
        code_size: usize,
        format: *const c_char,
        format_size: usize,
    }
    /// `PJRT_ExecuteOptions`.
    ExecuteOptions = "PJRT_ExecuteOptions", {
        head as "struct_size": Head,
        send_callbacks: *mut c_void,
        recv_callbacks: *mut c_void,
        num_send_ops: usize,
        num_recv_ops: usize,
        launch_id: c_int,
        non_donatable_input_indices: *const i64,
        num_non_donatable_input_indices: usize,
        context: *mut c_void,
        call_location: *const c_char,
        num_tasks: usize,
        task_ids: *mut c_int,
        incarnation_ids: *mut i64,
    }
    /// `PJRT_NamedValue`: `value` is the union of its values (a pointer, an integer, a bool).
    NamedValue = "PJRT_NamedValue", {
        head as "struct_size": Head,
        name: *const c_char,
        name_size: usize,
        kind as "type": c_int,
        value as "string_value": u64,
        value_size: usize,
    }
    /// `PJRT_Extension_Base`: the head of every extension in a table's chain.
    ExtensionBase = "PJRT_Extension_Base", {
        struct_size: usize,
        kind as "type": c_int,
        next: *const ExtensionBase,
    }
}

/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`: the plugin copies during the call.
pub const HOST_COPY_DURING_CALL: c_int = 0;

args! {
    Error_Destroy_Args { error: *mut PJRT_Error }
    Error_Message_Args { error: *const PJRT_Error, message: *const c_char, message_size: usize }
    Error_GetCode_Args { error: *const PJRT_Error, code: c_int }
    Plugin_Initialize_Args {}
    Event_Destroy_Args { event: *mut PJRT_Event }
    Event_Await_Args { event: *mut PJRT_Event }
    Client_Create_Args {
        create_options: *const c_void, num_options: usize,
        kv_get_callback: *mut c_void, kv_get_user_arg: *mut c_void,
        kv_put_callback: *mut c_void, kv_put_user_arg: *mut c_void,
        client: *mut PJRT_Client,
        kv_try_get_callback: *mut c_void, kv_try_get_user_arg: *mut c_void,
    }
    Client_Destroy_Args { client: *mut PJRT_Client }
    Client_PlatformName_Args {
        client: *mut PJRT_Client, platform_name: *const c_char, platform_name_size: usize,
    }
    Client_AddressableDevices_Args {
        client: *mut PJRT_Client, addressable_devices: *const *mut PJRT_Device,
        num_addressable_devices: usize,
    }
    Client_Compile_Args {
        client: *mut PJRT_Client, program: *const Program,
        compile_options: *const c_char, compile_options_size: usize,
        executable: *mut PJRT_LoadedExecutable,
    }
    Client_BufferFromHostBuffer_Args {
        client: *mut PJRT_Client, data: *const c_void, kind as "type": c_int,
        dims: *const i64, num_dims: usize,
        byte_strides: *const i64, num_byte_strides: usize,
        host_buffer_semantics: c_int,
        device: *mut PJRT_Device, memory: *mut PJRT_Memory,
        device_layout: *mut MemoryLayout,
        done_with_host_buffer: *mut PJRT_Event,
        buffer: *mut PJRT_Buffer,
    }
    Client_CreateViewOfDeviceBuffer_Args {
        client: *mut PJRT_Client, device_buffer_ptr: *mut c_void,
        dims: *const i64, num_dims: usize, element_type: c_int,
        layout: *mut MemoryLayout, device: *mut PJRT_Device,
        on_delete_callback: OnDelete, on_delete_callback_arg: *mut c_void,
        stream: isize, buffer: *mut PJRT_Buffer, memory: *mut PJRT_Memory,
    }
    Device_GetDescription_Args {
        device: *mut PJRT_Device, device_description: *mut PJRT_DeviceDescription,
    }
    DeviceDescription_Id_Args { device_description: *mut PJRT_DeviceDescription, id: c_int }
    DeviceDescription_Kind_Args {
        device_description: *mut PJRT_DeviceDescription,
        device_kind: *const c_char, device_kind_size: usize,
    }
    Device_AddressableMemories_Args {
        device: *mut PJRT_Device, memories: *const *mut PJRT_Memory, num_memories: usize,
    }
    Memory_Kind_Args { memory: *mut PJRT_Memory, kind: *const c_char, kind_size: usize }
    LoadedExecutable_Destroy_Args { executable: *mut PJRT_LoadedExecutable }
    LoadedExecutable_GetExecutable_Args {
        loaded_executable: *mut PJRT_LoadedExecutable, executable: *mut PJRT_Executable,
    }
    Executable_Destroy_Args { executable: *mut PJRT_Executable }
    Executable_NumOutputs_Args { executable: *mut PJRT_Executable, num_outputs: usize }
    LoadedExecutable_Execute_Args {
        executable: *mut PJRT_LoadedExecutable, options: *mut ExecuteOptions,
        argument_lists: *const *const *mut PJRT_Buffer, num_devices: usize, num_args: usize,
        output_lists: *const *mut *mut PJRT_Buffer,
        device_complete_events: *mut *mut PJRT_Event,
        execute_device: *mut PJRT_Device,
    }
    Buffer_Destroy_Args { buffer: *mut PJRT_Buffer }
    Buffer_ElementType_Args { buffer: *mut PJRT_Buffer, kind as "type": c_int }
    Buffer_Dimensions_Args { buffer: *mut PJRT_Buffer, dims: *const i64, num_dims: usize }
    Buffer_GetMemoryLayout_Args { buffer: *mut PJRT_Buffer, layout: MemoryLayout }
    Buffer_OnDeviceSizeInBytes_Args { buffer: *mut PJRT_Buffer, on_device_size_in_bytes: usize }
    Buffer_Device_Args { buffer: *mut PJRT_Buffer, device: *mut PJRT_Device }
    Buffer_ReadyEvent_Args { buffer: *mut PJRT_Buffer, event: *mut PJRT_Event }
    Buffer_IncreaseExternalReferenceCount_Args { buffer: *mut PJRT_Buffer }
    Buffer_DecreaseExternalReferenceCount_Args { buffer: *mut PJRT_Buffer }
    Buffer_Delete_Args { buffer: *mut PJRT_Buffer }
    Buffer_IsDeleted_Args { buffer: *mut PJRT_Buffer, is_deleted: bool }
    Buffer_UnsafePointer_Args { buffer: *mut PJRT_Buffer, buffer_pointer: usize }
    Buffer_ToHostBuffer_Args {
        src: *mut PJRT_Buffer, host_layout: *mut MemoryLayout,
        dst: *mut c_void, dst_size: usize, event: *mut PJRT_Event,
    }
    Buffer_OpaqueDeviceMemoryDataPointer_Args {
        buffer: *mut PJRT_Buffer, device_memory_ptr: *mut c_void,
    }
}

c_structs! {
    /// The head of `PJRT_Api`: its size, extensions and version; the function pointers follow.
    ApiHead = "PJRT_Api", {
        struct_size: usize,
        extension_start: *mut c_void,
        version_struct_size as "pjrt_api_version.struct_size": usize,
        version_extension_start as "pjrt_api_version.extension_start": *mut c_void,
        major as "pjrt_api_version.major_version": c_int,
        minor as "pjrt_api_version.minor_version": c_int,
    }
}

/// A slot of the function table: the function's name and its place (0-based) after the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The function's name in the header, for errors.
    pub name: &'static str,
    /// Its index among the function pointers.
    pub index: usize,
}

impl Slot {
    /// The byte just past this slot's pointer: a table reaches it when `struct_size` is at
    /// least this (`offsetof(PJRT_Api, fn) + sizeof(fn)`).
    pub const fn end(self) -> usize {
        std::mem::size_of::<ApiHead>() + (self.index + 1) * std::mem::size_of::<usize>()
    }
}

macro_rules! slots {
    ($($konst:ident = $index:literal $name:ident;)*) => {
        $(pub const $konst: Slot = Slot { name: stringify!($name), index: $index };)*
        /// Every slot this room declares, for the test against the header.
        #[doc(hidden)]
        pub const SLOTS: &[Slot] = &[$($konst),*];
    };
}
// The table's order in the header (index = position among the function pointers).
slots! {
    ERROR_DESTROY = 0 PJRT_Error_Destroy;
    ERROR_MESSAGE = 1 PJRT_Error_Message;
    ERROR_GET_CODE = 2 PJRT_Error_GetCode;
    PLUGIN_INITIALIZE = 3 PJRT_Plugin_Initialize;
    EVENT_DESTROY = 5 PJRT_Event_Destroy;
    EVENT_AWAIT = 8 PJRT_Event_Await;
    CLIENT_CREATE = 10 PJRT_Client_Create;
    CLIENT_DESTROY = 11 PJRT_Client_Destroy;
    CLIENT_PLATFORM_NAME = 12 PJRT_Client_PlatformName;
    CLIENT_ADDRESSABLE_DEVICES = 16 PJRT_Client_AddressableDevices;
    CLIENT_COMPILE = 20 PJRT_Client_Compile;
    CLIENT_BUFFER_FROM_HOST_BUFFER = 22 PJRT_Client_BufferFromHostBuffer;
    DEVICE_DESCRIPTION_ID = 23 PJRT_DeviceDescription_Id;
    DEVICE_DESCRIPTION_KIND = 26 PJRT_DeviceDescription_Kind;
    DEVICE_GET_DESCRIPTION = 29 PJRT_Device_GetDescription;
    DEVICE_ADDRESSABLE_MEMORIES = 32 PJRT_Device_AddressableMemories;
    MEMORY_KIND = 36 PJRT_Memory_Kind;
    EXECUTABLE_DESTROY = 40 PJRT_Executable_Destroy;
    EXECUTABLE_NUM_OUTPUTS = 44 PJRT_Executable_NumOutputs;
    LOADED_EXECUTABLE_DESTROY = 50 PJRT_LoadedExecutable_Destroy;
    LOADED_EXECUTABLE_GET_EXECUTABLE = 51 PJRT_LoadedExecutable_GetExecutable;
    LOADED_EXECUTABLE_EXECUTE = 55 PJRT_LoadedExecutable_Execute;
    BUFFER_DESTROY = 58 PJRT_Buffer_Destroy;
    BUFFER_ELEMENT_TYPE = 59 PJRT_Buffer_ElementType;
    BUFFER_DIMENSIONS = 60 PJRT_Buffer_Dimensions;
    BUFFER_GET_MEMORY_LAYOUT = 63 PJRT_Buffer_GetMemoryLayout;
    BUFFER_ON_DEVICE_SIZE = 64 PJRT_Buffer_OnDeviceSizeInBytes;
    BUFFER_DEVICE = 65 PJRT_Buffer_Device;
    BUFFER_DELETE = 67 PJRT_Buffer_Delete;
    BUFFER_IS_DELETED = 68 PJRT_Buffer_IsDeleted;
    BUFFER_TO_HOST = 70 PJRT_Buffer_ToHostBuffer;
    BUFFER_READY_EVENT = 72 PJRT_Buffer_ReadyEvent;
    BUFFER_UNSAFE_POINTER = 73 PJRT_Buffer_UnsafePointer;
    BUFFER_INCREASE_EXTERNAL_REF = 74 PJRT_Buffer_IncreaseExternalReferenceCount;
    BUFFER_DECREASE_EXTERNAL_REF = 75 PJRT_Buffer_DecreaseExternalReferenceCount;
    BUFFER_OPAQUE_POINTER = 76 PJRT_Buffer_OpaqueDeviceMemoryDataPointer;
    CLIENT_CREATE_VIEW = 93 PJRT_Client_CreateViewOfDeviceBuffer;
}

/// The size of the whole 0.81 table: the head and its 118 function pointers.
pub const API_SIZE_0_81: usize =
    std::mem::size_of::<ApiHead>() + 118 * std::mem::size_of::<usize>();

/// The signature every table function has but the two error helpers: one args pointer in, an
/// error (NULL for success) out.
pub type Fn = unsafe extern "C" fn(args: *mut c_void) -> *mut PJRT_Error;
/// `PJRT_Error_Destroy` and `PJRT_Error_Message`: no error out.
pub type VoidFn = unsafe extern "C" fn(args: *mut c_void);

const _: () = {
    assert!(std::mem::size_of::<ApiHead>() == 40);
    assert!(API_SIZE_0_81 == 984);
    assert!(CLIENT_CREATE_VIEW.end() == 40 + 94 * 8);
    assert!(std::mem::size_of::<MemoryLayout>() == 16 + 56 + 8);
    assert!(std::mem::size_of::<Client_CreateViewOfDeviceBuffer_Args>() == 112);
    assert!(std::mem::size_of::<Client_BufferFromHostBuffer_Args>() == 120);
    assert!(std::mem::size_of::<ExecuteOptions>() == 112);
};
