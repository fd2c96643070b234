//! The rule of which device types a plugin may take, written once: [`refusal`] is asked for
//! every type a plugin lists, at registration, whichever door registers it (a Rust `Registry`,
//! `dlport_register_backend`, `dlport_load_plugin`, Python's `load_plugin`).
//!
//! A plugin serves device memory behind opaque handles (`DLTensor.data` is a `cl_mem`, say), and
//! dlport presents memory of a type as host memory exactly when the type's memory class is
//! host-accessible ([`MemoryClass`]). So a plugin never takes:
//! - a host-class type (`kDLCPU`, `kDLCUDAHost`, `kDLROCMHost`, `kDLTPUHost`, `kDLCUDAManaged`):
//!   its handle would be read by CPU consumers as the data;
//! - a type dlport's built-in backends serve (`kDLCUDA`, `kDLCUDAHost`, `kDLCUDAManaged`), in
//!   every build and on every machine: what a plugin may take never depends on whether the
//!   `cuda` feature is on or a driver is present.
//!
//! Every other positive code is a plugin's to take (`kDLOpenCL`, `kDLROCM`, `kDLOneAPI`,
//! `kDLExtDev`, codes DLPack does not name).

use dlport_core::abi::DeviceType;
use dlport_core::backend::MemoryClass;

/// The device types dlport's built-in backends serve in some build (`cpu`, `pinned`, `cuda`):
/// reserved for them whether or not they are registered in this process.
pub const BUILT_IN_TYPES: [DeviceType; 4] = [
    DeviceType::CPU,
    DeviceType::CUDA,
    DeviceType::CUDA_HOST,
    DeviceType::CUDA_MANAGED,
];

/// Why a plugin may not take device type `t`, or `None` when it may: the one rule of the
/// module's documentation.
pub fn refusal(t: i32) -> Option<String> {
    if t <= 0 {
        return Some(format!(
            "device_types has {t}: DLPack device types are positive codes"
        ));
    }
    let ty = DeviceType(t);
    let name = ty.c_name().unwrap_or("a code DLPack does not name");
    let class = MemoryClass::of(ty);
    if class.is_host_accessible() {
        return Some(format!(
            "device_types has {t} ({name}): a plugin cannot take a host-class device type \
             (memory class {class}; a plugin's handles would be read as host memory); serve a \
             device type such as kDLOpenCL (4), kDLOneAPI (14) or kDLExtDev (12)"
        ));
    }
    if BUILT_IN_TYPES.contains(&ty) {
        return Some(format!(
            "device_types has {t} ({name}): dlport's built-in backends serve it in every build \
             (whether or not a driver is present here); serve a device type no built-in \
             backend serves, such as kDLOpenCL (4), kDLOneAPI (14) or kDLExtDev (12)"
        ));
    }
    None
}
