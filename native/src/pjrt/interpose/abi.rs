//! The slots and args structs the interposer uses beyond dlport's own client's (`sys`), in
//! pjrt_c_api.h 0.81's order and layout.

use super::super::sys::{self, Head, Slot};

/// Slots the interposer uses that dlport's own client does not (pjrt_c_api.h 0.81 order).
pub(crate) const BUFFER_DELETE: Slot = Slot {
    name: "PJRT_Buffer_Delete",
    index: 67,
};
pub(crate) const BUFFER_IS_DELETED: Slot = Slot {
    name: "PJRT_Buffer_IsDeleted",
    index: 68,
};
pub(crate) const TO_HOST: Slot = Slot {
    name: "PJRT_Buffer_ToHostBuffer",
    index: 70,
};
pub(crate) const BUFFER_UNSAFE_POINTER: Slot = Slot {
    name: "PJRT_Buffer_UnsafePointer",
    index: 73,
};

sys::c_structs! {
    /// `PJRT_Buffer_Destroy_Args` and `PJRT_Buffer_Delete_Args`.
    BufferArgs = "PJRT_Buffer_Delete_Args", {
        head as "struct_size": Head,
        buffer: *mut sys::PJRT_Buffer,
    }
    /// `PJRT_Buffer_IsDeleted_Args`.
    IsDeletedArgs = "PJRT_Buffer_IsDeleted_Args", {
        head as "struct_size": Head,
        buffer: *mut sys::PJRT_Buffer,
        is_deleted: bool,
    }
    /// `PJRT_Buffer_UnsafePointer_Args`.
    UnsafePointerArgs = "PJRT_Buffer_UnsafePointer_Args", {
        head as "struct_size": Head,
        buffer: *mut sys::PJRT_Buffer,
        buffer_pointer: usize,
    }
}

/// The slots above, for the test against the header.
pub(crate) const SLOTS: &[Slot] = &[
    BUFFER_DELETE,
    BUFFER_IS_DELETED,
    TO_HOST,
    BUFFER_UNSAFE_POINTER,
];

/// The structs above as laid out here, for the test against the header.
pub(crate) fn layouts() -> Vec<sys::Layout> {
    vec![
        BufferArgs::layout(),
        IsDeletedArgs::layout(),
        UnsafePointerArgs::layout(),
    ]
}

const _: () = {
    assert!(std::mem::offset_of!(IsDeletedArgs, is_deleted) == 24);
    assert!(std::mem::size_of::<UnsafePointerArgs>() == 32);
    assert!(BUFFER_UNSAFE_POINTER.end() == 40 + 74 * 8);
};
