//! The explicit maps between PJRT and DLPack: element types both ways (every other type is
//! refused by name), and the DLPack device type a platform name stands for.

use dlport_core::DataType;
use dlport_core::abi::{DeviceType, TypeCode};

/// `(PJRT_Buffer_Type value, its name, the DLPack type)`, for every type both sides have.
const TYPES: &[(i32, &str, DataType)] = &[
    (1, "PRED", DataType::BOOL),
    (2, "S8", DataType::INT8),
    (3, "S16", DataType::INT16),
    (4, "S32", DataType::INT32),
    (5, "S64", DataType::INT64),
    (6, "U8", DataType::UINT8),
    (7, "U16", DataType::UINT16),
    (8, "U32", DataType::UINT32),
    (9, "U64", DataType::UINT64),
    (10, "F16", DataType::FLOAT16),
    (11, "F32", DataType::FLOAT32),
    (12, "F64", DataType::FLOAT64),
    (13, "BF16", DataType::BFLOAT16),
    (14, "C64", DataType::COMPLEX64),
    (15, "C128", DataType::COMPLEX128),
    (16, "F8E5M2", DataType::FLOAT8_E5M2),
    (17, "F8E4M3FN", DataType::FLOAT8_E4M3FN),
    (18, "F8E4M3B11FNUZ", DataType::FLOAT8_E4M3B11FNUZ),
    (19, "F8E5M2FNUZ", DataType::FLOAT8_E5M2FNUZ),
    (20, "F8E4M3FNUZ", DataType::FLOAT8_E4M3FNUZ),
    (21, "S4", DataType::new(TypeCode::INT, 4, 1)),
    (22, "U4", DataType::new(TypeCode::UINT, 4, 1)),
    (24, "S2", DataType::new(TypeCode::INT, 2, 1)),
    (25, "U2", DataType::new(TypeCode::UINT, 2, 1)),
    (26, "F8E4M3", DataType::FLOAT8_E4M3),
    (27, "F8E3M4", DataType::FLOAT8_E3M4),
    (28, "F8E8M0FNU", DataType::FLOAT8_E8M0FNU),
    (29, "F4E2M1FN", DataType::FLOAT4_E2M1FN),
];

/// The names of PJRT types without a DLPack counterpart (refused by name).
const UNMAPPED: &[(i32, &str)] = &[(0, "INVALID"), (23, "TOKEN")];

/// The DLPack type of a PJRT element type, or the PJRT type's name when DLPack has none.
pub fn to_dlpack(pjrt: i32) -> Result<DataType, String> {
    if let Some(&(_, _, d)) = TYPES.iter().find(|t| t.0 == pjrt) {
        return Ok(d);
    }
    Err(match UNMAPPED.iter().find(|t| t.0 == pjrt) {
        Some((_, name)) => format!("PJRT_Buffer_Type_{name} ({pjrt}) has no DLPack type"),
        None => format!("PJRT_Buffer_Type {pjrt} is not one dlport knows (pjrt_c_api.h 0.81)"),
    })
}

/// Every `(PJRT_Buffer_Type value, its name, the DLPack type)` both sides have, in the
/// header's order (the probe's dtype table).
pub fn table() -> impl Iterator<Item = (i32, &'static str, DataType)> {
    TYPES.iter().copied()
}

/// The DLPack type of a PJRT type named as the header names it (`F32`, `S4`, `PRED`, …).
pub fn by_name(name: &str) -> Option<DataType> {
    TYPES.iter().find(|t| t.1 == name).map(|t| t.2)
}

/// The PJRT element type of a DLPack type, or why it has none.
pub fn to_pjrt(dtype: DataType) -> Result<i32, String> {
    TYPES
        .iter()
        .find(|t| t.2 == dtype)
        .map(|t| t.0)
        .ok_or_else(|| format!("dtype {dtype} has no PJRT_Buffer_Type"))
}

/// `(platform names, the DLPack device type)`: the names PJRT plugins answer in
/// `PJRT_Client_PlatformName` (compared without case), each with the memory its buffers are in.
/// A name stands for one vendor's memory or it is not here: "gpu" (CUDA, ROCm or Metal), "npu"
/// and "amd" (several vendors' accelerators) are left to the caller.
const PLATFORMS: &[(&[&str], DeviceType)] = &[
    // XLA's CPU plugin and its interpreter: host memory.
    (&["cpu", "host", "interpreter"], DeviceType::CPU),
    // XLA's GPU plugin built for CUDA (jax-cuda12-pjrt, jax-cuda13-pjrt).
    (&["cuda"], DeviceType::CUDA),
    // XLA's GPU plugin built for ROCm (jax-rocm7-pjrt).
    (&["rocm", "hip"], DeviceType::ROCM),
    // Intel's plugins (jax-oneapi-pjrt, intel-extension-for-openxla): USM memory.
    (&["xpu", "oneapi", "sycl"], DeviceType::ONEAPI),
    // Apple GPUs: jax-metal ("METAL"), metal-pjrt-plugin ("mtl"), jax-mps ("mps").
    (&["metal", "mtl", "mps"], DeviceType::METAL),
    (&["vulkan"], DeviceType::VULKAN),
    (&["opencl"], DeviceType::OPENCL),
    // libtpu.
    (&["tpu"], DeviceType::TPU),
    // Qualcomm's Hexagon DSP/NPU.
    (&["hexagon", "htp"], DeviceType::HEXAGON),
    (&["maia"], DeviceType::MAIA),
    // AWS Neuron (Trainium, Inferentia).
    (&["neuron", "trn", "trainium"], DeviceType::TRN),
    (&["ascend"], DeviceType::ASCEND),
    // Vendors whose memory DLPack has no device type for: Tenstorrent's tt-xla ("tt"),
    // Qualcomm's Cloud AI plugins ("qaic", "qnn"), Cerebras, Graphcore's IPU, Groq.
    (
        &[
            "tt",
            "tenstorrent",
            "qaic",
            "qnn",
            "cerebras",
            "ipu",
            "groq",
        ],
        DeviceType::EXT_DEV,
    ),
];

/// The DLPack device type a PJRT platform name stands for (compared without case), or `None`
/// for a name dlport does not know (see [`device_type_for`]).
pub fn device_type_of(platform: &str) -> Option<DeviceType> {
    PLATFORMS
        .iter()
        .find(|(names, _)| names.iter().any(|n| n.eq_ignore_ascii_case(platform)))
        .map(|&(_, t)| t)
}

/// The DLPack device type of a client of `platform`: the caller's (`ClientOptions::device_type`)
/// when given, else the platform table's, else kDLExtDev. A name dlport does not know is never
/// labelled as another vendor's memory (kDLCUDA above all): kDLExtDev says "a device DLPack
/// does not name", which a consumer refuses or asks about, never reads as its own.
pub fn device_type_for(platform: &str, caller: Option<DeviceType>) -> DeviceType {
    caller
        .or_else(|| device_type_of(platform))
        .unwrap_or(DeviceType::EXT_DEV)
}

/// The extension types of `pjrt_c_api.h` 0.81 (`PJRT_Extension_Type`), by value.
const EXTENSIONS: &[&str] = &[
    "Gpu_Custom_Call",
    "Profiler",
    "Custom_Partitioner",
    "Stream",
    "Layouts",
    "FFI",
    "MemoryDescriptions",
    "Triton",
    "RawBuffer",
    "PhaseCompile",
    "Example",
    "Unknown",
    "CrossHostTransfers",
    "ExecutableMetadata",
    "Callback",
    "HostAllocator",
];

/// The header's name of a `PJRT_Extension_Type` value (`Layouts`, `Stream`, …), or `None` for
/// a type newer than the header dlport reads.
pub fn extension_name(t: i32) -> Option<&'static str> {
    usize::try_from(t)
        .ok()
        .and_then(|i| EXTENSIONS.get(i))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_and_refusals() {
        for &(p, _, d) in TYPES {
            assert_eq!(to_dlpack(p), Ok(d));
            assert_eq!(to_pjrt(d), Ok(p));
        }
        assert!(to_dlpack(23).unwrap_err().contains("TOKEN"));
        assert!(to_dlpack(99).unwrap_err().contains("99"));
        assert!(to_pjrt(DataType::FLOAT6_E2M3FN).is_err());
        assert_eq!(by_name("BF16"), Some(DataType::BFLOAT16));
        assert_eq!(by_name("TOKEN"), None);
    }

    #[test]
    fn extension_names_follow_the_header() {
        assert_eq!(extension_name(0), Some("Gpu_Custom_Call"));
        assert_eq!(extension_name(3), Some("Stream"));
        assert_eq!(extension_name(4), Some("Layouts"));
        assert_eq!(extension_name(15), Some("HostAllocator"));
        assert_eq!(extension_name(16), None);
        assert_eq!(extension_name(-1), None);
    }

    #[test]
    fn platform_names_of_todays_plugins() {
        for (name, t) in [
            ("cpu", DeviceType::CPU),
            ("CPU", DeviceType::CPU),
            ("interpreter", DeviceType::CPU),
            ("cuda", DeviceType::CUDA),
            ("rocm", DeviceType::ROCM),
            ("xpu", DeviceType::ONEAPI),
            ("XPU", DeviceType::ONEAPI),
            ("oneapi", DeviceType::ONEAPI),
            ("METAL", DeviceType::METAL),
            ("metal", DeviceType::METAL),
            ("mtl", DeviceType::METAL),
            ("mps", DeviceType::METAL),
            ("tpu", DeviceType::TPU),
            ("neuron", DeviceType::TRN),
            ("tt", DeviceType::EXT_DEV),
            ("qaic", DeviceType::EXT_DEV),
            ("hexagon", DeviceType::HEXAGON),
        ] {
            assert_eq!(device_type_of(name), Some(t), "{name}");
            assert_eq!(device_type_for(name, None), t, "{name}");
        }
    }

    #[test]
    fn unknown_names_get_the_callers_code_or_ext_dev_never_cuda() {
        for name in [
            "gpu",
            "GPU",
            "npu",
            "amd",
            "nvidia-ish",
            "",
            "cuda ",
            "cpu:0",
        ] {
            assert_eq!(device_type_of(name), None, "{name:?}");
            assert_eq!(device_type_for(name, None), DeviceType::EXT_DEV, "{name:?}");
            assert_eq!(
                device_type_for(name, Some(DeviceType::OPENCL)),
                DeviceType::OPENCL
            );
        }
        // The caller's code wins over the table's.
        assert_eq!(
            device_type_for("cpu", Some(DeviceType::EXT_DEV)),
            DeviceType::EXT_DEV
        );
        // Only CUDA's own name is labelled kDLCUDA, and the table is lower case.
        for (names, t) in PLATFORMS {
            assert!(
                *t != DeviceType::CUDA || *names == ["cuda"],
                "{names:?} labelled kDLCUDA"
            );
            for n in *names {
                assert_eq!(*n, n.to_ascii_lowercase());
            }
        }
        // Every name appears once.
        let mut all: Vec<&str> = PLATFORMS
            .iter()
            .flat_map(|(n, _)| n.iter().copied())
            .collect();
        let len = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), len);
    }
}
