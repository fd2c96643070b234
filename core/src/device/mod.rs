//! Devices and the memory classes they hold.
//!
//! [`Device`] is `DLDevice` with names: it displays as `cpu`, `cuda:0`, `cuda_host:0`,
//! `webgpu:0`, or `device_type(99):0` for a type DLPack does not name, and parses back.
//! [`MemoryClass`] says whether the host can read a device's memory without a copy. Plain
//! data: dispatch (registry, backends, buffers) lives elsewhere.

mod check;
mod stream;

pub use check::reconcile_device;
pub use stream::StreamRequest;

use core::fmt;

use crate::abi::DeviceType;

/// `DLDevice`: a device type and an id. Same layout as the C struct.
///
/// # The rule of device ids
/// One rule, [`Device::check`], applied at every door: a capsule's `dl_tensor.device` on import
/// (and every export's, by the same validation), the device a producer advertises
/// (`__dlpack_device__`), the device an import asks for (`from_dlpack(device=)`) and the one an
/// export asks for (`__dlpack__(dl_device=)`), in Rust, the C ABI and the Python package alike.
/// - A device id is a non-negative `i32`. A negative id is never a device: there is no "current
///   device" in a DLPack device (−1 means "no synchronisation" only as a `stream` argument).
/// - `kDLCPU` has exactly one device, id 0 (dlpack.h: "For vanilla CPU memory […] this is set to
///   0"; NumPy, PyTorch and JAX write and expect `(1, 0)`).
/// - Pinned and managed memory (`kDLCUDAHost`, `kDLROCMHost`, `kDLTPUHost`, `kDLCUDAManaged`)
///   take any non-negative id. dlport writes 0 for its own, as dlpack.h asks, but JAX writes the
///   GPU's ordinal for pinned memory and CuPy for managed memory (the accelerator the memory is
///   registered with), and NumPy reads both: refusing those ids would refuse real producers.
/// - Other types take any non-negative id; whether that device exists is the backend's
///   question
///   ([`DispatchError::InvalidDeviceId`](crate::error::DispatchError::InvalidDeviceId)).
///
/// Everything else is [`DispatchError::InvalidDevice`](crate::error::DispatchError::InvalidDevice),
/// naming the field and the device given.
///
/// # Examples
///
/// ```
/// use dlport_core::Device;
/// use dlport_core::abi::DeviceType;
///
/// let gpu = Device::cuda(1);
/// assert_eq!((gpu.device_type, gpu.device_id), (DeviceType::CUDA, 1));
/// assert_eq!(gpu.to_string(), "cuda:1");
/// assert_eq!("cuda_host:0".parse::<Device>()?, Device::cuda_host());
/// assert!(Device::cuda_host().is_host_accessible() && !gpu.is_host_accessible());
/// assert_eq!(Device::new(DeviceType(99), 0).to_string(), "device_type(99):0");
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, bytemuck::Zeroable, bytemuck::Pod)]
pub struct Device {
    /// The device type (any 32-bit value may arrive from foreign code).
    pub device_type: DeviceType,
    /// The device ordinal: non-negative, and 0 for `kDLCPU` ([the rule](Device#the-rule-of-device-ids),
    /// checked by [`Device::check`]).
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

    /// Whether the id obeys [the rule of device ids](Device#the-rule-of-device-ids): non-negative,
    /// and 0 for `kDLCPU`.
    #[inline(always)]
    pub const fn has_valid_id(self) -> bool {
        // One comparison for the common case (id 0), two for any other.
        self.device_id == 0 || (self.device_id > 0 && self.device_type.0 != DeviceType::CPU.0)
    }

    /// The memory class of this device's type.
    pub const fn memory_class(self) -> MemoryClass {
        MemoryClass::of(self.device_type)
    }

    /// Whether the host can read this memory through an ordinary pointer, without a copy.
    pub const fn is_host_accessible(self) -> bool {
        self.memory_class().is_host_accessible()
    }

    /// The device that memory on this device presents to consumers, given the device a caller
    /// asked for (`requested`: an import's or an export's own device argument, `None` for
    /// none).
    ///
    /// Host-accessible memory (pinned, managed) presents as `cpu` unless the caller names
    /// another device: every consumer takes `kDLCPU`, while JAX, torch and TensorFlow refuse
    /// `kDLCUDAHost` and `kDLCUDAManaged`. Asked for `cpu`, it presents as `cpu` too. Device
    /// memory, and host-accessible memory asked for any device but `cpu` (its own device by
    /// name, such as `cuda_host:0`), present as themselves.
    ///
    /// An export reaches a consumer without a copy exactly when the device it asks for is the
    /// device presented: `memory.presented(Some(wanted)) == wanted`; an import is a view only
    /// under the same rule for the device it asks for. So memory is never presented as a class
    /// it is not: plain `cpu` memory asked for as `cuda_host` needs a copy into pinned memory
    /// whatever the copy policy (and without a backend that makes pinned memory, such as a CUDA
    /// driver's, every policy refuses it).
    ///
    /// ```
    /// use dlport_core::Device;
    /// let pinned = Device::cuda_host();
    /// assert_eq!(pinned.presented(None), Device::cpu());
    /// assert_eq!(pinned.presented(Some(Device::cpu())), Device::cpu());
    /// assert_eq!(pinned.presented(Some(pinned)), pinned);
    /// // Plain host memory stays itself: never presented as pinned.
    /// assert_eq!(Device::cpu().presented(Some(pinned)), Device::cpu());
    /// assert_eq!(Device::cuda(0).presented(None), Device::cuda(0));
    /// assert_eq!(Device::cuda(0).presented(Some(Device::cpu())), Device::cuda(0));
    /// ```
    #[inline]
    pub const fn presented(self, requested: Option<Device>) -> Device {
        let asks_cpu = match requested {
            None => true,
            Some(d) => d.device_type.0 == DeviceType::CPU.0 && d.device_id == 0,
        };
        if asks_cpu && self.is_host_accessible() {
            Device::cpu()
        } else {
            self
        }
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

/// Which device a [`DispatchError::InvalidDevice`](crate::error::DispatchError::InvalidDevice)
/// refuses: where the device came from.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceField {
    /// A tensor's own `dl_tensor.device` (an imported capsule's, or an export's).
    Tensor,
    /// What the producer's `__dlpack_device__()` advertised (`ImportOptions::advertised`).
    Advertised,
    /// The device an import asks for (`from_dlpack(device=)`, `ImportOptions::device`, the C
    /// ABI's `DlportImportOptions.device_*`).
    Requested,
    /// The device an export asks for (`__dlpack__(dl_device=)`, `ExportOptions::dl_device`, the
    /// C ABI's `dlport_export` device arguments).
    DlDevice,
}

impl DeviceField {
    /// The field's name, as a caller wrote it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tensor => "dl_tensor.device",
            Self::Advertised => "__dlpack_device__()",
            Self::Requested => "device",
            Self::DlDevice => "dl_device",
        }
    }
}

impl fmt::Display for DeviceField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
