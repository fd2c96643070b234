//! `DLPackExchangeAPI` (`dlpack.h` 1.3): the table of C functions a Python tensor type offers
//! through its `__dlpack_c_exchange_api__` attribute, so that a consumer can exchange tensors
//! without calling `__dlpack__`.
//!
//! Core knows no Python: every `PyObject*` of the header is a `*mut c_void` here. The
//! contract of the header, which every function of a table follows:
//! - A function returns 0 on success and -1 on failure. The functions taking or returning a
//!   Python object are called with the interpreter attached and set a Python exception on
//!   failure; the allocator reports through its `SetError` callback instead.
//! - `NoSync` functions synchronise no stream: the caller orders the work itself, asking
//!   `current_work_stream` for the producer's stream where it needs to.
//! - A table lives as long as the process; `header.prev_api` chains older tables (or is NULL),
//!   and a consumer checks `header.version.major` before reading past the header.

use core::ffi::{c_char, c_int, c_void};

use super::{DLManagedTensorVersioned, DLPackVersion, DLTensor, DeviceType};

/// `DLPackExchangeAPIHeader`: the part of the table that stays stable across versions.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    /// The DLPack version of the table (a consumer checks the major version first).
    pub version: DLPackVersion,
    /// An older table, or NULL.
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// The `SetError(error_ctx, kind, message)` callback of [`DLPackManagedTensorAllocator`]:
/// `kind` names the error class (a Python exception's name, such as `"MemoryError"`) and
/// `message` says what went wrong; both are NUL-terminated and live only during the call.
pub type DLPackSetError = unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char);

/// `DLPackManagedTensorAllocator(prototype, out, error_ctx, SetError)`: allocates a new
/// managed tensor with the prototype's dtype, shape and device and writes it to `*out`, owned
/// by the caller. On failure it returns -1 and calls `SetError(error_ctx, kind, message)`
/// (when not NULL); it sets no Python exception.
pub type DLPackManagedTensorAllocator = unsafe extern "C" fn(
    *mut DLTensor,
    *mut *mut DLManagedTensorVersioned,
    *mut c_void,
    Option<DLPackSetError>,
) -> c_int;

/// `DLPackManagedTensorFromPyObjectNoSync(py_object, out)`: exports a Python object of the
/// table's type as a new managed tensor written to `*out`, owned by the caller.
pub type DLPackManagedTensorFromPyObjectNoSync =
    unsafe extern "C" fn(*mut c_void, *mut *mut DLManagedTensorVersioned) -> c_int;

/// `DLPackManagedTensorToPyObjectNoSync(tensor, out_py_object)`: wraps a managed tensor in a
/// new Python object of the table's type (a new reference written to `*out_py_object`), which
/// owns the tensor from then on. On failure the tensor stays the caller's.
pub type DLPackManagedTensorToPyObjectNoSync =
    unsafe extern "C" fn(*mut DLManagedTensorVersioned, *mut *mut c_void) -> c_int;

/// `DLPackDLTensorFromPyObjectNoSync(py_object, out)`: writes a `DLTensor` borrowed from a
/// Python object of the table's type to `*out`, valid while the object lives (no ownership
/// moves).
pub type DLPackDLTensorFromPyObjectNoSync =
    unsafe extern "C" fn(*mut c_void, *mut DLTensor) -> c_int;

/// `DLPackCurrentWorkStream(device_type, device_id, out_current_stream)`: writes the
/// producer's current work stream for a device to `*out_current_stream` (NULL: the default
/// stream).
pub type DLPackCurrentWorkStream = unsafe extern "C" fn(DeviceType, i32, *mut *mut c_void) -> c_int;

/// `DLPackExchangeAPI`, member for member as in `dlpack.h` 1.3. Valid only when
/// `header.version.major` is 1.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    /// Version and older tables.
    pub header: DLPackExchangeAPIHeader,
    /// Allocates a tensor like a prototype (never NULL).
    pub managed_tensor_allocator: Option<DLPackManagedTensorAllocator>,
    /// Exports a Python object of the type (never NULL).
    pub managed_tensor_from_py_object_no_sync: Option<DLPackManagedTensorFromPyObjectNoSync>,
    /// Wraps a managed tensor in a Python object of the type (never NULL).
    pub managed_tensor_to_py_object_no_sync: Option<DLPackManagedTensorToPyObjectNoSync>,
    /// Lends a borrowed `DLTensor` (may be NULL).
    pub dltensor_from_py_object_no_sync: Option<DLPackDLTensorFromPyObjectNoSync>,
    /// The producer's current stream for a device (never NULL).
    pub current_work_stream: Option<DLPackCurrentWorkStream>,
}

/// Compile-time layout checks: a header of two words' worth, then five function pointers.
mod layout_asserts {
    use super::{DLPackExchangeAPI, DLPackExchangeAPIHeader, c_void};
    use core::mem::{align_of, offset_of, size_of};

    const P: usize = size_of::<*mut c_void>();
    // The version (8 bytes, align 4) then a pointer: 16 bytes on 64-bit, 12 on 32-bit.
    const H: usize = if P == 8 { 16 } else { 12 };
    const _: () = assert!(size_of::<DLPackExchangeAPIHeader>() == H);
    const _: () = assert!(offset_of!(DLPackExchangeAPIHeader, prev_api) == 8);
    const _: () = assert!(align_of::<DLPackExchangeAPI>() == align_of::<*mut c_void>());
    const _: () = assert!(offset_of!(DLPackExchangeAPI, managed_tensor_allocator) == H);
    const _: () =
        assert!(offset_of!(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == H + P);
    const _: () =
        assert!(offset_of!(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == H + 2 * P);
    const _: () =
        assert!(offset_of!(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == H + 3 * P);
    const _: () = assert!(offset_of!(DLPackExchangeAPI, current_work_stream) == H + 4 * P);
    const _: () = assert!(size_of::<DLPackExchangeAPI>() == H + 5 * P);
}
