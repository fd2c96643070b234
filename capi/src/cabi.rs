//! The names of the C ABI (`capi/include/dlport.h`, generated from this crate by cbindgen):
//! status and error codes, the copy and layout enums, and DLPack's own C declarations (structs,
//! device types, type codes, flags), which the header emits only when `dlpack.h` was not
//! included first.
//!
//! The DLPack declarations here exist for the header alone: Rust code uses
//! [`dlport_core::abi`], and compile-time assertions below keep the two layouts identical. They
//! are under `cfg(not(dlpack_h))`, a cfg that is never set when compiling (so they are always
//! compiled and checked) and that cbindgen turns into `#if !defined(DLPACK_DLPACK_H_)`.
#![allow(non_camel_case_types, non_upper_case_globals)]

use std::ffi::c_int;

/// The major version of the C ABI: the `N` of the SONAME `libdlport.so.N` and of
/// `dlport.pc`'s version. It changes when a function's signature or meaning changes
/// incompatibly.
pub const DLPORT_ABI_VERSION_MAJOR: c_int = 0;

// The ABI major version is the crate's (build.rs puts it in the SONAME).
const _: () = assert!(
    DLPORT_ABI_VERSION_MAJOR as u8 == env!("CARGO_PKG_VERSION_MAJOR").as_bytes()[0] - b'0'
        && env!("CARGO_PKG_VERSION_MAJOR").len() == 1
);

/// Success.
pub const DLPORT_OK: c_int = 0;
/// A panic was caught inside dlport (a bug: please report the message).
pub const DLPORT_PANIC: c_int = -1;
/// A required pointer argument was NULL, or an enum argument out of range.
pub const DLPORT_INVALID_ARGUMENT: c_int = -2;

// dlport's error codes, `dlport_core::Error::code()`, 1..=`Error::CODE_COUNT`. The test
// `header_names_every_error_code` checks that every code has exactly one name here and that the
// name is its sub-error variant's name (`BackendError::Failed` keeps `DLPORT_ERR_BACKEND`).

/// The managed tensor pointer is NULL.
pub const DLPORT_ERR_NULL_MANAGED_TENSOR: c_int = 1;
/// The DLPack major version is not 1.
pub const DLPORT_ERR_UNSUPPORTED_VERSION: c_int = 2;
/// Flag bits that DLPack does not define are set.
pub const DLPORT_ERR_UNKNOWN_FLAGS: c_int = 3;
/// `ndim` is negative or above dlport's maximum.
pub const DLPORT_ERR_NDIM_OUT_OF_RANGE: c_int = 4;
/// `shape` is NULL while `ndim` > 0.
pub const DLPORT_ERR_NULL_SHAPE: c_int = 5;
/// `strides` is NULL where they are required.
pub const DLPORT_ERR_NULL_STRIDES: c_int = 6;
/// `data` is NULL for a non-empty tensor.
pub const DLPORT_ERR_NULL_DATA: c_int = 7;
/// An extent is negative.
pub const DLPORT_ERR_NEGATIVE_EXTENT: c_int = 8;
/// The element count overflows 64 bits.
pub const DLPORT_ERR_ELEMENT_COUNT_OVERFLOW: c_int = 9;
/// The bytes the strides reach overflow.
pub const DLPORT_ERR_SPAN_OVERFLOW: c_int = 10;
/// data + byte_offset (+ the span) leaves user-space memory.
pub const DLPORT_ERR_ADDRESS_OVERFLOW: c_int = 11;
/// A type code DLPack does not name.
pub const DLPORT_ERR_UNKNOWN_TYPE_CODE: c_int = 12;
/// A bit width the type code does not have.
pub const DLPORT_ERR_INVALID_BITS: c_int = 13;
/// A lane count that is 0 or not allowed for the type.
pub const DLPORT_ERR_INVALID_LANES: c_int = 14;
/// The element type is not the one asked for.
pub const DLPORT_ERR_DTYPE_MISMATCH: c_int = 15;
/// The memory cannot be read from the host.
pub const DLPORT_ERR_NOT_HOST_ACCESSIBLE: c_int = 16;
/// The tensor is not contiguous where that is required.
pub const DLPORT_ERR_NOT_CONTIGUOUS: c_int = 17;
/// The first element is not aligned as required.
pub const DLPORT_ERR_MISALIGNED: c_int = 18;
/// Write access to read-only memory.
pub const DLPORT_ERR_READ_ONLY: c_int = 19;
/// A storage is smaller than the tensor that views it.
pub const DLPORT_ERR_STORAGE_TOO_SMALL: c_int = 20;
/// Strides and shape differ in length.
pub const DLPORT_ERR_STRIDES_LENGTH: c_int = 21;
/// A name that cannot be parsed (dtype or device).
pub const DLPORT_ERR_INVALID_NAME: c_int = 22;
/// No registered backend serves the device.
pub const DLPORT_ERR_NO_BACKEND: c_int = 23;
/// The tensor is on another device than the one required.
pub const DLPORT_ERR_DEVICE_MISMATCH: c_int = 24;
/// A copy is needed but the copy policy is DLPORT_COPY_NEVER.
pub const DLPORT_ERR_COPY_REQUIRED: c_int = 25;
/// The buffer's memory was released to another owner.
pub const DLPORT_ERR_BUFFER_RELEASED: c_int = 26;
/// The buffer is in use and cannot be released.
pub const DLPORT_ERR_BUFFER_IN_USE: c_int = 27;
/// The operation is not supported by this backend or build.
pub const DLPORT_ERR_UNSUPPORTED: c_int = 28;
/// An allocation failed.
pub const DLPORT_ERR_ALLOCATION_FAILED: c_int = 29;
/// A backend of that name is already registered.
pub const DLPORT_ERR_DUPLICATE_BACKEND: c_int = 30;
/// The device id does not exist.
pub const DLPORT_ERR_INVALID_DEVICE_ID: c_int = 31;
/// A backend (driver or operating system) call failed; the message names it.
pub const DLPORT_ERR_BACKEND: c_int = 32;
/// The device driver library was not found.
pub const DLPORT_ERR_DRIVER_NOT_FOUND: c_int = 33;
/// An invalid DLPack stream value.
pub const DLPORT_ERR_INVALID_STREAM: c_int = 34;
/// Exclusive (&mut) access to shared memory.
pub const DLPORT_ERR_NOT_EXCLUSIVE: c_int = 35;
/// READ_ONLY or IS_SUBBYTE_TYPE_PADDED cannot travel in the legacy form.
pub const DLPORT_ERR_FLAG_NOT_REPRESENTABLE: c_int = 36;
/// Above the allocation limit; nothing was allocated.
pub const DLPORT_ERR_ALLOCATION_LIMIT: c_int = 37;
/// An option out of range, named in the message.
pub const DLPORT_ERR_INVALID_OPTION: c_int = 38;
/// A copy's destination has the wrong size.
pub const DLPORT_ERR_DESTINATION_SIZE: c_int = 39;
/// Another registry is already the process-wide default (installed once).
pub const DLPORT_ERR_DEFAULT_INSTALLED: c_int = 40;
/// A value read from outside (a sharing descriptor's field, Arrow metadata) is out of range.
pub const DLPORT_ERR_INVALID_VALUE: c_int = 41;
/// A device id breaks the rule of device ids: negative, or not 0 for `kDLCPU`; the message
/// names the argument or field and the device given.
pub const DLPORT_ERR_INVALID_DEVICE: c_int = 42;
/// A typed vector has fewer elements than its shape needs (counted in elements).
pub const DLPORT_ERR_DATA_TOO_SHORT: c_int = 43;
/// A value read from outside that is not one number (Arrow metadata's JSON, an IPC stream's
/// flatbuffer) breaks its rule; the message shows the value as found.
pub const DLPORT_ERR_INVALID_INPUT: c_int = 44;

/// Copy policies: the array API's `copy` argument (`DlportImportOptions.copy` and the `copy`
/// arguments of `dlport_export` and `dlport_compact`).
/// cbindgen:rename-all=QualifiedScreamingSnakeCase
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DlportCopy {
    /// Never copy: what needs a copy is `DLPORT_ERR_COPY_REQUIRED`.
    Never = 0,
    /// Copy only when needed.
    IfNeeded = 1,
    /// Always copy.
    Always = 2,
}

impl DlportCopy {
    /// The policy a C `int32_t` names, if any.
    pub fn from_c(value: i32) -> Option<Self> {
        [Self::Never, Self::IfNeeded, Self::Always]
            .into_iter()
            .find(|v| *v as i32 == value)
    }
}

/// Layout needs for an import (`DlportImportOptions.layout`).
/// cbindgen:rename-all=QualifiedScreamingSnakeCase
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DlportLayout {
    /// Any strides.
    Any = 0,
    /// Dense: no gaps, any axis order.
    Dense = 1,
    /// Row-major contiguous.
    RowMajor = 2,
}

impl DlportLayout {
    /// The layout a C `int32_t` names, if any.
    pub fn from_c(value: i32) -> Option<Self> {
        [Self::Any, Self::Dense, Self::RowMajor]
            .into_iter()
            .find(|v| *v as i32 == value)
    }
}

/// DLPack's flag: the consumer must not write to the data.
#[cfg(not(dlpack_h))]
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1;
/// DLPack's flag: the producer made a copy that the consumer owns alone.
#[cfg(not(dlpack_h))]
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 2;
/// DLPack's flag: sub-byte elements occupy whole bytes (padded, not packed).
#[cfg(not(dlpack_h))]
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 4;

/// DLPack's device types (`DLDeviceType`; `DLDevice.device_type` holds one as `int32_t`).
#[cfg(not(dlpack_h))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DLDeviceType {
    /// Host memory.
    kDLCPU = 1,
    /// CUDA device memory.
    kDLCUDA = 2,
    /// Page-locked host memory registered with CUDA.
    kDLCUDAHost = 3,
    /// An OpenCL buffer.
    kDLOpenCL = 4,
    /// A Vulkan buffer.
    kDLVulkan = 7,
    /// A Metal buffer.
    kDLMetal = 8,
    /// Verilog simulator memory.
    kDLVPI = 9,
    /// ROCm/HIP device memory.
    kDLROCM = 10,
    /// Page-locked host memory registered with ROCm.
    kDLROCMHost = 11,
    /// A reserved extension device.
    kDLExtDev = 12,
    /// CUDA unified (managed) memory.
    kDLCUDAManaged = 13,
    /// Intel oneAPI unified shared memory.
    kDLOneAPI = 14,
    /// A WebGPU buffer (an opaque handle).
    kDLWebGPU = 15,
    /// Qualcomm Hexagon DSP.
    kDLHexagon = 16,
    /// Microsoft MAIA.
    kDLMAIA = 17,
    /// AWS Trainium.
    kDLTrn = 18,
    /// Google TPU device memory.
    kDLTPU = 19,
    /// TPU host memory.
    kDLTPUHost = 20,
    /// Huawei Ascend NPU.
    kDLAscend = 21,
}

/// DLPack's type codes (`DLDataTypeCode`; `DLDataType.code` holds one as `uint8_t`).
#[cfg(not(dlpack_h))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DLDataTypeCode {
    /// Signed integer.
    kDLInt = 0,
    /// Unsigned integer.
    kDLUInt = 1,
    /// IEEE floating point.
    kDLFloat = 2,
    /// An opaque pointer-sized handle.
    kDLOpaqueHandle = 3,
    /// bfloat16.
    kDLBfloat = 4,
    /// Complex of two IEEE floats (`bits` counts both parts).
    kDLComplex = 5,
    /// Boolean.
    kDLBool = 6,
    /// 8-bit float e3m4.
    kDLFloat8_e3m4 = 7,
    /// 8-bit float e4m3.
    kDLFloat8_e4m3 = 8,
    /// 8-bit float e4m3b11fnuz.
    kDLFloat8_e4m3b11fnuz = 9,
    /// 8-bit float e4m3fn.
    kDLFloat8_e4m3fn = 10,
    /// 8-bit float e4m3fnuz.
    kDLFloat8_e4m3fnuz = 11,
    /// 8-bit float e5m2.
    kDLFloat8_e5m2 = 12,
    /// 8-bit float e5m2fnuz.
    kDLFloat8_e5m2fnuz = 13,
    /// 8-bit float e8m0fnu.
    kDLFloat8_e8m0fnu = 14,
    /// 6-bit float e2m3fn (packed unless flagged padded).
    kDLFloat6_e2m3fn = 15,
    /// 6-bit float e3m2fn (packed unless flagged padded).
    kDLFloat6_e3m2fn = 16,
    /// 4-bit float e2m1fn (packed unless flagged padded).
    kDLFloat4_e2m1fn = 17,
    /// Complex of two bfloat16.
    kDLBcomplex = 18,
}

/// The DLPack version of a versioned tensor.
#[cfg(not(dlpack_h))]
#[repr(C)]
pub struct DLPackVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// A device: a `DLDeviceType` and an id.
#[cfg(not(dlpack_h))]
#[repr(C)]
pub struct DLDevice {
    /// A `DLDeviceType` value.
    pub device_type: i32,
    /// The device's ordinal (0 for the host).
    pub device_id: i32,
}

/// An element type: a `DLDataTypeCode`, the bits of one lane and the lanes.
#[cfg(not(dlpack_h))]
#[repr(C)]
pub struct DLDataType {
    /// A `DLDataTypeCode` value.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

/// A tensor: data, device, shape, strides (in elements; NULL: compact row-major), dtype and
/// the byte offset of the first element.
#[cfg(not(dlpack_h))]
#[repr(C)]
pub struct DLTensor {
    /// The data pointer (a host address or a device handle).
    pub data: *mut std::ffi::c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for compact row-major.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// A legacy (unversioned, flagless) DLPack managed tensor.
#[cfg(not(dlpack_h))]
#[repr(C)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut std::ffi::c_void,
    /// Called once by the consumer when done.
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

/// A versioned DLPack managed tensor (DLPack >= 1.0).
#[cfg(not(dlpack_h))]
#[repr(C)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut std::ffi::c_void,
    /// Called once by the consumer when done.
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

// The header's declarations have exactly the layout of the structs Rust uses.
macro_rules! same_layout {
    ($($ours:ident = $core:ty: [$($field:ident),*];)*) => {$(
        const _: () = {
            use std::mem::{align_of, offset_of, size_of};
            assert!(size_of::<$ours>() == size_of::<$core>());
            assert!(align_of::<$ours>() == align_of::<$core>());
            $(assert!(offset_of!($ours, $field) == offset_of!($core, $field));)*
        };
    )*};
}

same_layout! {
    DLPackVersion = dlport_core::abi::DLPackVersion: [major, minor];
    DLDevice = dlport_core::Device: [device_type, device_id];
    DLDataType = dlport_core::DataType: [code, bits, lanes];
    DLTensor = dlport_core::abi::DLTensor: [data, device, ndim, dtype, shape, strides, byte_offset];
    DLManagedTensor = dlport_core::abi::DLManagedTensor: [dl_tensor, manager_ctx, deleter];
    DLManagedTensorVersioned = dlport_core::abi::DLManagedTensorVersioned:
        [version, manager_ctx, deleter, flags, dl_tensor];
}

const _: () = {
    assert!(DLPACK_FLAG_BITMASK_READ_ONLY == dlport_core::abi::FLAG_READ_ONLY);
    assert!(DLPACK_FLAG_BITMASK_IS_COPIED == dlport_core::abi::FLAG_IS_COPIED);
    assert!(
        DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == dlport_core::abi::FLAG_IS_SUBBYTE_TYPE_PADDED
    );
};

#[cfg(test)]
mod tests {
    use super::*;
    use dlport_core::abi::{DeviceType, TypeCode};

    #[test]
    fn device_types_and_type_codes_match_core() {
        let devices = [
            DLDeviceType::kDLCPU,
            DLDeviceType::kDLCUDA,
            DLDeviceType::kDLCUDAHost,
            DLDeviceType::kDLOpenCL,
            DLDeviceType::kDLVulkan,
            DLDeviceType::kDLMetal,
            DLDeviceType::kDLVPI,
            DLDeviceType::kDLROCM,
            DLDeviceType::kDLROCMHost,
            DLDeviceType::kDLExtDev,
            DLDeviceType::kDLCUDAManaged,
            DLDeviceType::kDLOneAPI,
            DLDeviceType::kDLWebGPU,
            DLDeviceType::kDLHexagon,
            DLDeviceType::kDLMAIA,
            DLDeviceType::kDLTrn,
            DLDeviceType::kDLTPU,
            DLDeviceType::kDLTPUHost,
            DLDeviceType::kDLAscend,
        ];
        assert_eq!(devices.len(), DeviceType::ALL_KNOWN.len());
        for (ours, core) in devices.iter().zip(DeviceType::ALL_KNOWN) {
            assert_eq!(*ours as i32, core.0);
            assert_eq!(Some(format!("{ours:?}").as_str()), core.c_name());
        }
        let codes = [
            DLDataTypeCode::kDLInt,
            DLDataTypeCode::kDLUInt,
            DLDataTypeCode::kDLFloat,
            DLDataTypeCode::kDLOpaqueHandle,
            DLDataTypeCode::kDLBfloat,
            DLDataTypeCode::kDLComplex,
            DLDataTypeCode::kDLBool,
            DLDataTypeCode::kDLFloat8_e3m4,
            DLDataTypeCode::kDLFloat8_e4m3,
            DLDataTypeCode::kDLFloat8_e4m3b11fnuz,
            DLDataTypeCode::kDLFloat8_e4m3fn,
            DLDataTypeCode::kDLFloat8_e4m3fnuz,
            DLDataTypeCode::kDLFloat8_e5m2,
            DLDataTypeCode::kDLFloat8_e5m2fnuz,
            DLDataTypeCode::kDLFloat8_e8m0fnu,
            DLDataTypeCode::kDLFloat6_e2m3fn,
            DLDataTypeCode::kDLFloat6_e3m2fn,
            DLDataTypeCode::kDLFloat4_e2m1fn,
            DLDataTypeCode::kDLBcomplex,
        ];
        assert_eq!(codes.len(), TypeCode::ALL_KNOWN.len());
        for (ours, core) in codes.iter().zip(TypeCode::ALL_KNOWN) {
            assert_eq!(*ours as u8, core.0);
            assert_eq!(Some(format!("{ours:?}").as_str()), core.c_name());
        }
    }

    #[test]
    fn enums_round_trip_and_refuse_out_of_range() {
        for v in 0..3 {
            assert_eq!(DlportCopy::from_c(v).map(|c| c as i32), Some(v));
            assert_eq!(DlportLayout::from_c(v).map(|c| c as i32), Some(v));
        }
        for v in [-1, 3, i32::MAX] {
            assert_eq!(DlportCopy::from_c(v), None);
            assert_eq!(DlportLayout::from_c(v), None);
        }
    }
}
