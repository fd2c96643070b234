//! `#[repr(C)]` mirrors of every struct in `dlpack.h` 1.3 (the exchange API's table and its
//! function-pointer types included), plus the open device-type and type-code newtypes and the
//! flag bits.
//!
//! These are plain data: no method here dereferences a pointer. Foreign code can put any value
//! in any field, so [`DeviceType`] and [`TypeCode`] are transparent newtypes with named
//! constants, never Rust enums (an out-of-range enum value is undefined behaviour).
//!
//! The C names are kept as aliases (`DLDevice`, `DLDataType`) of the friendlier Rust types
//! [`Device`] and [`DataType`], which have exactly the C layout. [`RawManaged`] is a managed
//! tensor's pointer of either form, as it crosses the ABI (what
//! [`ManagedTensor::into_raw`](crate::ManagedTensor::into_raw) returns and
//! [`ManagedTensor::from_raw`](crate::ManagedTensor::from_raw) takes).

use core::ffi::c_void;
use core::ptr::NonNull;

mod codes;
mod exchange;

pub use crate::device::Device;
pub use crate::dtype::DataType;
pub use codes::*;
pub use exchange::*;

/// `DLDevice`: the C name of [`Device`], which has its exact layout.
pub type DLDevice = Device;
/// `DLDataType`: the C name of [`DataType`], which has its exact layout.
pub type DLDataType = DataType;

/// `DLTensor`: a plain, unmanaged tensor description.
///
/// Every field is untrusted when it comes from foreign code; build a
/// [`TensorRef`](crate::TensorRef) to validate it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// Base address (host or device pointer) or an opaque handle on some devices.
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents; may be NULL when `ndim == 0`.
    pub shape: *mut i64,
    /// `ndim` strides in elements; NULL means compact row-major before DLPack 1.2.
    pub strides: *mut i64,
    /// Offset in bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// The deleter of a legacy [`DLManagedTensor`].
pub type DLManagedTensorDeleter = unsafe extern "C" fn(*mut DLManagedTensor);
/// The deleter of a [`DLManagedTensorVersioned`].
pub type DLManagedTensorVersionedDeleter = unsafe extern "C" fn(*mut DLManagedTensorVersioned);

/// `DLManagedTensor`: the legacy (pre-0.8, unversioned) managed tensor. Deprecated by DLPack,
/// still the only form JAX exchanges.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor description.
    pub dl_tensor: DLTensor,
    /// Producer context; may be NULL.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when done; may be NULL.
    pub deleter: Option<DLManagedTensorDeleter>,
}

/// `DLManagedTensorVersioned`: the DLPack 1.x managed tensor.
///
/// Everything up to `flags` stays stable across versions, so the deleter can always be called.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version the producer wrote.
    pub version: DLPackVersion,
    /// Producer context; may be NULL.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when done; may be NULL.
    pub deleter: Option<DLManagedTensorVersionedDeleter>,
    /// Bit flags: [`FLAG_READ_ONLY`], [`FLAG_IS_COPIED`], [`FLAG_IS_SUBBYTE_TYPE_PADDED`].
    pub flags: u64,
    /// The tensor description.
    pub dl_tensor: DLTensor,
}

/// A raw managed-tensor pointer of either form: what
/// [`ManagedTensor::into_raw`](crate::ManagedTensor::into_raw) returns and
/// [`ManagedTensor::from_raw`](crate::ManagedTensor::from_raw) takes back.
///
/// # Examples
///
/// ```
/// use dlport_core::abi::RawManaged;
/// use dlport_core::{ExportBuilder, ManagedTensor};
///
/// let raw = ExportBuilder::from_vec(vec![1u8, 2, 3], &[3]).build()?.into_raw();
/// assert!(matches!(raw, RawManaged::Versioned(_))); // hand it to a DLPack 1.x consumer …
/// // … or take it back: its deleter runs once, when the owner is dropped.
/// // SAFETY: `raw` is a live tensor, handed over once.
/// let back = unsafe { ManagedTensor::from_raw(raw) }?;
/// assert_eq!(back.view().as_slice::<u8>()?, &[1, 2, 3]);
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawManaged {
    /// A DLPack 1.x `DLManagedTensorVersioned`.
    Versioned(NonNull<DLManagedTensorVersioned>),
    /// A legacy `DLManagedTensor`.
    Legacy(NonNull<DLManagedTensor>),
}

impl RawManaged {
    /// The address, for logging and identity checks.
    pub fn addr(self) -> usize {
        match self {
            Self::Versioned(p) => p.as_ptr() as usize,
            Self::Legacy(p) => p.as_ptr() as usize,
        }
    }
}

/// Compile-time layout checks against the numbers of `dlpack.h` for the target's pointer width.
mod layout_asserts {
    use super::{
        DLDataType, DLDevice, DLManagedTensor, DLManagedTensorDeleter, DLManagedTensorVersioned,
        DLPackVersion, DLTensor, c_void,
    };
    use core::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<DLPackVersion>() == 8 && align_of::<DLPackVersion>() == 4);
    const _: () = assert!(size_of::<DLDevice>() == 8 && align_of::<DLDevice>() == 4);
    const _: () = assert!(offset_of!(DLDevice, device_id) == 4);
    const _: () = assert!(size_of::<DLDataType>() == 4 && align_of::<DLDataType>() == 2);
    const _: () = assert!(offset_of!(DLDataType, bits) == 1 && offset_of!(DLDataType, lanes) == 2);
    const _: () = assert!(size_of::<Option<DLManagedTensorDeleter>>() == size_of::<*mut c_void>());

    cfg_if::cfg_if! {
        if #[cfg(target_pointer_width = "64")] {
            const _: () = assert!(size_of::<DLTensor>() == 48 && align_of::<DLTensor>() == 8);
            const _: () = assert!(offset_of!(DLTensor, data) == 0);
            const _: () = assert!(offset_of!(DLTensor, device) == 8);
            const _: () = assert!(offset_of!(DLTensor, ndim) == 16);
            const _: () = assert!(offset_of!(DLTensor, dtype) == 20);
            const _: () = assert!(offset_of!(DLTensor, shape) == 24);
            const _: () = assert!(offset_of!(DLTensor, strides) == 32);
            const _: () = assert!(offset_of!(DLTensor, byte_offset) == 40);
            const _: () = assert!(size_of::<DLManagedTensor>() == 64);
            const _: () = assert!(offset_of!(DLManagedTensor, manager_ctx) == 48);
            const _: () = assert!(offset_of!(DLManagedTensor, deleter) == 56);
            const _: () = assert!(size_of::<DLManagedTensorVersioned>() == 80);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, version) == 0);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, deleter) == 16);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
        } else if #[cfg(target_pointer_width = "32")] {
            // wasm32, ARM EABI and most 32-bit ABIs align u64/i64 to 8 inside structs (the
            // numbers in dlpack-facts.md); i386 System V aligns them to 4, and C does the same.
            const A8: bool = align_of::<u64>() == 8;
            const _: () = assert!(size_of::<DLTensor>() == if A8 { 40 } else { 36 });
            const _: () = assert!(offset_of!(DLTensor, data) == 0);
            const _: () = assert!(offset_of!(DLTensor, device) == 4);
            const _: () = assert!(offset_of!(DLTensor, ndim) == 12);
            const _: () = assert!(offset_of!(DLTensor, dtype) == 16);
            const _: () = assert!(offset_of!(DLTensor, shape) == 20);
            const _: () = assert!(offset_of!(DLTensor, strides) == 24);
            const _: () = assert!(offset_of!(DLTensor, byte_offset) == if A8 { 32 } else { 28 });
            const _: () = assert!(size_of::<DLManagedTensor>() == if A8 { 48 } else { 44 });
            const _: () = assert!(offset_of!(DLManagedTensor, manager_ctx) == if A8 { 40 } else { 36 });
            const _: () = assert!(offset_of!(DLManagedTensor, deleter) == if A8 { 44 } else { 40 });
            const _: () = assert!(size_of::<DLManagedTensorVersioned>() == if A8 { 64 } else { 60 });
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, version) == 0);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, deleter) == 12);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, flags) == 16);
            const _: () = assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 24);
        } else {
            compile_error!("dlport-core supports 32- and 64-bit targets only");
        }
    }
}
