//! The numbers of `dlpack.h`: the version, the flag bits, and the open device-type and
//! type-code newtypes. They name no other dlport type, so every room can use them.

/// The DLPack major version this crate speaks (`DLPACK_MAJOR_VERSION`).
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version this crate was written against (`DLPACK_MINOR_VERSION`).
pub const DLPACK_MINOR_VERSION: u32 = 3;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write to the data.
pub const FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a copy that the consumer owns alone
/// until it calls the deleter.
pub const FLAG_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`: sub-byte elements occupy whole bytes
/// instead of being packed.
pub const FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;
/// Every flag bit that DLPack 1.3 defines. Other bits are refused on import.
pub const KNOWN_FLAGS: u64 = FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_IS_SUBBYTE_TYPE_PADDED;

/// `DLPackVersion`.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, bytemuck::Zeroable, bytemuck::Pod,
)]
pub struct DLPackVersion {
    /// Major version; dlport reads only major version 1.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl DLPackVersion {
    /// The version dlport exports: 1.3.
    pub const CURRENT: Self = Self {
        major: DLPACK_MAJOR_VERSION,
        minor: DLPACK_MINOR_VERSION,
    };

    /// Builds a version.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl core::fmt::Display for DLPackVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// `DLDeviceType`, an open 32-bit value: any number can arrive from foreign code.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, bytemuck::Zeroable, bytemuck::Pod)]
pub struct DeviceType(pub i32);

/// `DLDataTypeCode`, an open 8-bit value: any number can arrive from foreign code.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, bytemuck::Zeroable, bytemuck::Pod)]
pub struct TypeCode(pub u8);

macro_rules! open_constants {
    ($ty:ident: $inner:ty { $($(#[$m:meta])* $name:ident = $val:expr, $c:literal, $short:literal;)* }) => {
        impl $ty {
            $($(#[$m])* pub const $name: Self = Self($val);)*
            /// Every value that DLPack names, in numeric order.
            pub const ALL_KNOWN: &'static [Self] = &[$(Self::$name),*];

            /// The C enumerator name (`"kDLCUDAHost"`), or `None` for a value DLPack does not name.
            pub const fn c_name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some($c),)*
                    _ => None,
                }
            }

            /// The short lower-case name (`"cuda_host"`), or `None` for a value DLPack does not name.
            pub const fn short_name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some($short),)*
                    _ => None,
                }
            }

            /// Looks a short name up (`"cuda_host"` → `CUDA_HOST`).
            pub fn from_short_name(name: &str) -> Option<Self> {
                match name {
                    $($short => Some(Self::$name),)*
                    _ => None,
                }
            }

            /// Whether DLPack 1.3 (or its main branch) names this value.
            pub const fn is_known(self) -> bool {
                self.c_name().is_some()
            }
        }
    };
}

open_constants!(DeviceType: i32 {
    /// `kDLCPU`: host memory.
    CPU = 1, "kDLCPU", "cpu";
    /// `kDLCUDA`: CUDA device memory.
    CUDA = 2, "kDLCUDA", "cuda";
    /// `kDLCUDAHost`: page-locked host memory registered with CUDA (formerly `kDLCPUPinned`).
    CUDA_HOST = 3, "kDLCUDAHost", "cuda_host";
    /// `kDLOpenCL`: an OpenCL `cl_mem` handle.
    OPENCL = 4, "kDLOpenCL", "opencl";
    /// `kDLVulkan`: a Vulkan buffer.
    VULKAN = 7, "kDLVulkan", "vulkan";
    /// `kDLMetal`: a Metal buffer.
    METAL = 8, "kDLMetal", "metal";
    /// `kDLVPI`: Verilog simulator memory.
    VPI = 9, "kDLVPI", "vpi";
    /// `kDLROCM`: ROCm/HIP device memory.
    ROCM = 10, "kDLROCM", "rocm";
    /// `kDLROCMHost`: page-locked host memory registered with ROCm.
    ROCM_HOST = 11, "kDLROCMHost", "rocm_host";
    /// `kDLExtDev`: a reserved extension device (PyTorch's PrivateUse1 maps here).
    EXT_DEV = 12, "kDLExtDev", "ext_dev";
    /// `kDLCUDAManaged`: CUDA unified (managed) memory.
    CUDA_MANAGED = 13, "kDLCUDAManaged", "cuda_managed";
    /// `kDLOneAPI`: Intel oneAPI (XPU) unified shared memory.
    ONEAPI = 14, "kDLOneAPI", "oneapi";
    /// `kDLWebGPU`: a WebGPU buffer; `data` is an opaque handle.
    WEBGPU = 15, "kDLWebGPU", "webgpu";
    /// `kDLHexagon`: Qualcomm Hexagon DSP.
    HEXAGON = 16, "kDLHexagon", "hexagon";
    /// `kDLMAIA`: Microsoft MAIA.
    MAIA = 17, "kDLMAIA", "maia";
    /// `kDLTrn`: AWS Trainium.
    TRN = 18, "kDLTrn", "trn";
    /// `kDLTPU`: Google TPU device memory (dlpack main after 1.3).
    TPU = 19, "kDLTPU", "tpu";
    /// `kDLTPUHost`: TPU host memory (dlpack main after 1.3).
    TPU_HOST = 20, "kDLTPUHost", "tpu_host";
    /// `kDLAscend`: Huawei Ascend NPU (dlpack main after 1.3).
    ASCEND = 21, "kDLAscend", "ascend";
});

open_constants!(TypeCode: u8 {
    /// `kDLInt`: signed integer.
    INT = 0, "kDLInt", "int";
    /// `kDLUInt`: unsigned integer.
    UINT = 1, "kDLUInt", "uint";
    /// `kDLFloat`: IEEE floating point.
    FLOAT = 2, "kDLFloat", "float";
    /// `kDLOpaqueHandle`: an opaque pointer-sized handle.
    OPAQUE_HANDLE = 3, "kDLOpaqueHandle", "handle";
    /// `kDLBfloat`: bfloat16.
    BFLOAT = 4, "kDLBfloat", "bfloat";
    /// `kDLComplex`: complex of two IEEE floats (`bits` counts both parts).
    COMPLEX = 5, "kDLComplex", "complex";
    /// `kDLBool`: boolean stored in 8 bits.
    BOOL = 6, "kDLBool", "bool";
    /// `kDLFloat8_e3m4`.
    FLOAT8_E3M4 = 7, "kDLFloat8_e3m4", "float8_e3m4";
    /// `kDLFloat8_e4m3`.
    FLOAT8_E4M3 = 8, "kDLFloat8_e4m3", "float8_e4m3";
    /// `kDLFloat8_e4m3b11fnuz`.
    FLOAT8_E4M3B11FNUZ = 9, "kDLFloat8_e4m3b11fnuz", "float8_e4m3b11fnuz";
    /// `kDLFloat8_e4m3fn`.
    FLOAT8_E4M3FN = 10, "kDLFloat8_e4m3fn", "float8_e4m3fn";
    /// `kDLFloat8_e4m3fnuz`.
    FLOAT8_E4M3FNUZ = 11, "kDLFloat8_e4m3fnuz", "float8_e4m3fnuz";
    /// `kDLFloat8_e5m2`.
    FLOAT8_E5M2 = 12, "kDLFloat8_e5m2", "float8_e5m2";
    /// `kDLFloat8_e5m2fnuz`.
    FLOAT8_E5M2FNUZ = 13, "kDLFloat8_e5m2fnuz", "float8_e5m2fnuz";
    /// `kDLFloat8_e8m0fnu`.
    FLOAT8_E8M0FNU = 14, "kDLFloat8_e8m0fnu", "float8_e8m0fnu";
    /// `kDLFloat6_e2m3fn` (6 bits, packed unless flagged padded).
    FLOAT6_E2M3FN = 15, "kDLFloat6_e2m3fn", "float6_e2m3fn";
    /// `kDLFloat6_e3m2fn` (6 bits, packed unless flagged padded).
    FLOAT6_E3M2FN = 16, "kDLFloat6_e3m2fn", "float6_e3m2fn";
    /// `kDLFloat4_e2m1fn` (4 bits, packed unless flagged padded).
    FLOAT4_E2M1FN = 17, "kDLFloat4_e2m1fn", "float4_e2m1fn";
    /// `kDLBcomplex`: complex of two bfloat16 (dlpack main after 1.3).
    BCOMPLEX = 18, "kDLBcomplex", "bcomplex";
});

impl core::fmt::Debug for DeviceType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl core::fmt::Display for DeviceType {
    /// `kDLOneAPI (14)`, or `device_type(99)` for a value DLPack does not name.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.c_name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "device_type({})", self.0),
        }
    }
}

impl core::fmt::Debug for TypeCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(self, f)
    }
}

impl core::fmt::Display for TypeCode {
    /// `kDLFloat (2)`, or `type_code(99)` for a value DLPack does not name.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.c_name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "type_code({})", self.0),
        }
    }
}
