//! Devices and the memory classes they hold.
//!
//! [`Device`] is `DLDevice` with names: it displays as `cpu`, `cuda:0`, `cuda_host:0`,
//! `webgpu:0`, or `device_type(99):0` for a type DLPack does not name, and parses back.
//! [`MemoryClass`] says whether the host can read a device's memory without a copy. Plain
//! data: dispatch (registry, backends, buffers) lives elsewhere.

mod stream;

pub use stream::StreamRequest;

use core::fmt;
use core::str::FromStr;

use crate::abi::DeviceType;
use crate::error::{DispatchError, Error, NameKind, ShortStr};

/// `DLDevice`: a device type and an id. Same layout as the C struct.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, bytemuck::Zeroable, bytemuck::Pod)]
pub struct Device {
    /// The device type (any 32-bit value may arrive from foreign code).
    pub device_type: DeviceType,
    /// The device ordinal; 0 for plain CPU, pinned and managed memory.
    pub device_id: i32,
}

impl Device {
    // One rule for the constructors: a `const fn` named as DLPack's short name for the type,
    // taking an id exactly when the type numbers devices (host memory classes are id 0).

    /// Builds a device of any type (types DLPack does not name included).
    pub const fn new(device_type: DeviceType, device_id: i32) -> Self {
        Self {
            device_type,
            device_id,
        }
    }

    /// Host memory, `cpu` (`kDLCPU`).
    pub const fn cpu() -> Self {
        Self::new(DeviceType::CPU, 0)
    }

    /// CUDA device memory on GPU `id` (`kDLCUDA`).
    pub const fn cuda(id: i32) -> Self {
        Self::new(DeviceType::CUDA, id)
    }

    /// CUDA page-locked host memory (`kDLCUDAHost`).
    pub const fn cuda_host() -> Self {
        Self::new(DeviceType::CUDA_HOST, 0)
    }

    /// CUDA unified memory (`kDLCUDAManaged`).
    pub const fn cuda_managed() -> Self {
        Self::new(DeviceType::CUDA_MANAGED, 0)
    }

    /// ROCm device memory on GPU `id` (`kDLROCM`).
    pub const fn rocm(id: i32) -> Self {
        Self::new(DeviceType::ROCM, id)
    }

    /// ROCm page-locked host memory (`kDLROCMHost`).
    pub const fn rocm_host() -> Self {
        Self::new(DeviceType::ROCM_HOST, 0)
    }

    /// A oneAPI (Intel XPU) device (`kDLOneAPI`).
    pub const fn oneapi(id: i32) -> Self {
        Self::new(DeviceType::ONEAPI, id)
    }

    /// A Metal device (`kDLMetal`).
    pub const fn metal(id: i32) -> Self {
        Self::new(DeviceType::METAL, id)
    }

    /// A WebGPU device (`kDLWebGPU`).
    pub const fn webgpu(id: i32) -> Self {
        Self::new(DeviceType::WEBGPU, id)
    }

    /// The memory class of this device's type.
    pub const fn memory_class(self) -> MemoryClass {
        MemoryClass::of(self.device_type)
    }

    /// Whether the host can read this memory through an ordinary pointer, without a copy.
    pub const fn is_host_accessible(self) -> bool {
        self.memory_class().is_host_accessible()
    }
}

impl Default for Device {
    fn default() -> Self {
        Self::cpu()
    }
}

impl fmt::Display for Device {
    /// `cpu` (`cpu:N` for a non-zero id), `cuda:0`, `cuda_host:0`, `device_type(99):0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.device_type.short_name() {
            Some("cpu") if self.device_id == 0 => f.write_str("cpu"),
            Some(name) => write!(f, "{name}:{}", self.device_id),
            None => write!(f, "device_type({}):{}", self.device_type.0, self.device_id),
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parses what [`Display`](fmt::Display) writes: `cpu`, `cuda:1`, `device_type(99):0`.
    /// A missing `:id` means id 0.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || {
            Error::Dispatch(DispatchError::InvalidName {
                what: NameKind::Device,
                name: ShortStr::new(s),
            })
        };
        let (kind, id) = match s.rsplit_once(':') {
            Some((kind, id)) => (kind, id.parse::<i32>().map_err(|_| bad())?),
            None => (s, 0),
        };
        let device_type = if let Some(num) = kind
            .strip_prefix("device_type(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            DeviceType(num.parse::<i32>().map_err(|_| bad())?)
        } else {
            DeviceType::from_short_name(kind).ok_or_else(bad)?
        };
        Ok(Self::new(device_type, id))
    }
}

/// Where a device's memory lives, as far as the host is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryClass {
    /// Ordinary host memory (`kDLCPU`).
    Host,
    /// Page-locked host memory registered with an accelerator (`kDLCUDAHost`, `kDLROCMHost`,
    /// `kDLTPUHost`): an ordinary host pointer.
    HostPinned,
    /// Unified memory (`kDLCUDAManaged`): host-readable once the device has synchronised.
    Managed,
    /// Device memory or an opaque handle: the host needs a copy. Types DLPack does not name fall
    /// here too, since nothing is known about them.
    Device,
}

impl MemoryClass {
    /// The class of a device type.
    pub const fn of(device_type: DeviceType) -> Self {
        match device_type {
            DeviceType::CPU => Self::Host,
            DeviceType::CUDA_HOST | DeviceType::ROCM_HOST | DeviceType::TPU_HOST => {
                Self::HostPinned
            }
            DeviceType::CUDA_MANAGED => Self::Managed,
            _ => Self::Device,
        }
    }

    /// Whether a host pointer reaches this memory without a copy.
    pub const fn is_host_accessible(self) -> bool {
        !matches!(self, Self::Device)
    }
}

impl fmt::Display for MemoryClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Host => "host",
            Self::HostPinned => "host-pinned",
            Self::Managed => "managed",
            Self::Device => "device",
        })
    }
}
