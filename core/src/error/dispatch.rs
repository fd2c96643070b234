//! [`DispatchError`]: finding the backend, device, copy or option an operation needs failed.

use core::fmt;

#[cfg(feature = "alloc")]
use super::ShownValue;
use super::{ByteCount, ShortStr};
use crate::abi::DeviceType;
use crate::device::{Device, DeviceField};

#[cfg(feature = "alloc")]
pub use super::reasons::BackendNames;
pub use super::reasons::{CopyReason, NameKind, OptionRule, StreamReason, ValueRule};

/// Routing failed: a name that does not parse, no backend for a device, devices that
/// contradict each other or an id a backend cannot translate, a copy the policy forbids, a
/// copy above the allocation limit or into a destination of the wrong size, or an option or
/// stream argument out of its range.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DispatchError {
    /// A name (of a data type, device, …) could not be parsed.
    InvalidName {
        /// What was being parsed.
        what: NameKind,
        /// The text, possibly cut ([`ShortStr::CAPACITY`] bytes are kept).
        name: ShortStr,
    },
    /// No backend in the registry serves this device.
    #[cfg(feature = "alloc")]
    NoBackend {
        /// The device type.
        device_type: DeviceType,
        /// The device id.
        device_id: i32,
        /// The names of the registered backends.
        registered: BackendNames,
    },
    /// The capsule's device and the one the producer advertises (`__dlpack_device__`)
    /// contradict each other.
    DeviceMismatch {
        /// The device in the DLTensor.
        capsule: Device,
        /// The device the producer advertised.
        advertised: Device,
    },
    /// The copy policy forbids a copy, but one is needed.
    CopyRequired {
        /// Why a zero-copy view is impossible.
        reason: CopyReason,
    },
    /// A backend with this name is already registered.
    DuplicateBackend {
        /// The name.
        name: &'static str,
    },
    /// A device breaks [the rule of device ids](crate::Device#the-rule-of-device-ids): a
    /// negative id, or a `kDLCPU` id other than 0.
    InvalidDevice {
        /// Where the device came from.
        field: DeviceField,
        /// The device given.
        device: Device,
    },
    /// A backend cannot translate a producer's device id.
    InvalidDeviceId {
        /// The backend's name.
        backend: &'static str,
        /// The id received.
        device_id: i32,
    },
    /// The `stream` argument of `__dlpack__` is not valid for the device type.
    InvalidStream {
        /// The value received (`i64::MIN` stands for None).
        stream: i64,
        /// The device type it was meant for.
        device_type: DeviceType,
        /// Why it is refused.
        reason: StreamReason,
    },
    /// An allocation above the caller's limit, refused before anything was allocated.
    AllocationLimit {
        /// Bytes the operation needs (exact, even past 64 bits).
        bytes: ByteCount,
        /// The limit in force.
        limit: u64,
    },
    /// An option out of its range.
    InvalidOption {
        /// The option and the rule it breaks.
        rule: OptionRule,
        /// Its value.
        value: u64,
    },
    /// A copy's destination does not have the compact size of the source.
    DestinationSize {
        /// Bytes the compact copy needs.
        needed: u64,
        /// Bytes the destination has.
        available: u64,
    },
    /// A value read from outside (a field of a sharing descriptor, a piece of Arrow metadata)
    /// is out of its range.
    InvalidValue {
        /// The field and the rule it breaks.
        rule: &'static ValueRule,
        /// The value found.
        value: u64,
    },
    /// A field read from outside whose value is not one number (a JSON array, a text, a
    /// structure that fails its verifier), shown as it was found.
    #[cfg(feature = "alloc")]
    InvalidInput {
        /// The field and the rule it breaks.
        rule: &'static ValueRule,
        /// The value found, as text.
        value: ShownValue,
    },
    /// Another registry is already the process-wide default, which is installed once.
    #[cfg(feature = "alloc")]
    DefaultInstalled {
        /// The backends of the default in force.
        registered: BackendNames,
    },
}

impl DispatchError {
    /// The stable number of this error (see [`Error::code`](super::Error::code)).
    pub const fn code(&self) -> u32 {
        match self {
            Self::InvalidName { .. } => 22,
            #[cfg(feature = "alloc")]
            Self::NoBackend { .. } => 23,
            Self::DeviceMismatch { .. } => 24,
            Self::CopyRequired { .. } => 25,
            Self::DuplicateBackend { .. } => 30,
            Self::InvalidDeviceId { .. } => 31,
            Self::InvalidStream { .. } => 34,
            Self::AllocationLimit { .. } => 37,
            Self::InvalidOption { .. } => 38,
            Self::DestinationSize { .. } => 39,
            #[cfg(feature = "alloc")]
            Self::DefaultInstalled { .. } => 40,
            Self::InvalidValue { .. } => 41,
            Self::InvalidDevice { .. } => 42,
            #[cfg(feature = "alloc")]
            Self::InvalidInput { .. } => 44,
        }
    }
}

#[cfg(feature = "alloc")]
impl DispatchError {
    /// [`InvalidInput`](Self::InvalidInput): `rule`'s field holds `value` (escaped and cut as
    /// [`ShownValue`] shows it).
    pub fn invalid_input(rule: &'static ValueRule, value: &str) -> Self {
        Self::InvalidInput {
            rule,
            value: ShownValue::new(value),
        }
    }
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidName { what, name } => {
                write!(f, "{what} name \"{name}\" is not recognised: ")?;
                match what {
                    NameKind::DataType => f.write_str(
                        "a data type is bool, a base and its bits (float32, bfloat16, int8, \
                         uint64, complex64; float, int, uint, bfloat, complex, bcomplex, handle), \
                         an fp8/fp6/fp4 name (float8_e4m3fn, float8_e5m2, float6_e2m3fn, \
                         float4_e2m1fn, ...), half, float or double, with lanes as a suffix (float32x4, \
                         float4_e2m1fn_x2), or dtype(code=C, bits=B, lanes=L)",
                    ),
                    NameKind::Device => {
                        f.write_str("a device is a DLPack device type's name (")?;
                        let names = DeviceType::ALL_KNOWN
                            .iter()
                            .filter_map(|t| t.short_name());
                        for (i, n) in names.enumerate() {
                            if i > 0 {
                                f.write_str(", ")?;
                            }
                            f.write_str(n)?;
                        }
                        f.write_str(") or device_type(N), with an optional :id (cuda:1)")
                    }
                }
            }
            #[cfg(feature = "alloc")]
            Self::NoBackend {
                device_type,
                device_id,
                registered,
            } => write!(
                f,
                "no backend for {device_type} device {device_id}; registered: {registered} \
                 (register a backend that serves it, or ask for a device one of these serves)"
            ),
            Self::DeviceMismatch {
                capsule,
                advertised,
            } => write!(
                f,
                "the capsule says device = {capsule} but the producer advertises {advertised}: \
                 they contradict each other; fix the producer's __dlpack_device__"
            ),
            Self::CopyRequired { reason } => write!(
                f,
                "a copy would be needed, but the copy policy is Never: {reason}; allow a copy \
                 (copy=None or True) or move the data first"
            ),
            Self::DuplicateBackend { name } => write!(
                f,
                "a backend named \"{name}\" is already registered: unregister it first"
            ),
            Self::InvalidDevice { field, device } => {
                let (t, id) = (device.device_type.0, device.device_id);
                write!(f, "{field} = ({t}, {id}) is invalid: ")?;
                let fix = if id < 0 {
                    f.write_str(
                        "device ids are non-negative (-1 means \"no synchronisation\" only as \
                         a stream, never a device)",
                    )?;
                    "the device's ordinal"
                } else {
                    f.write_str("kDLCPU has one device, device_id 0")?;
                    "device_id 0"
                };
                match field {
                    DeviceField::Tensor | DeviceField::Advertised => {
                        write!(f, "; the producer must write {fix}")
                    }
                    DeviceField::Requested => {
                        write!(f, "; pass {fix}, or None for the data's own device")
                    }
                    DeviceField::DlDevice => {
                        write!(f, "; pass {fix}, or None for the tensor's own device")
                    }
                }
            }
            Self::InvalidDeviceId { backend, device_id } => write!(
                f,
                "backend \"{backend}\" has no device for producer device_id = {device_id}"
            ),
            Self::InvalidStream {
                stream,
                device_type,
                reason,
            } => {
                write!(
                    f,
                    "stream = {stream} is invalid for {device_type}: {reason}"
                )
            }
            Self::AllocationLimit { bytes, limit } => write!(
                f,
                "the operation needs {bytes} bytes, above the allocation limit of {limit} bytes; \
                 nothing was allocated: the limit is the lowest of the call's max_alloc, the \
                 registry's and the process's (set_alloc_limit, dlport_set_alloc_limit, \
                 dlport.set_alloc_limit); raise the lowest or use a smaller tensor"
            ),
            Self::InvalidOption { rule, value } => write!(
                f,
                "{} = {value} is invalid: it must be {}",
                rule.option(),
                rule.expected()
            ),
            Self::DestinationSize { needed, available } => write!(
                f,
                "the destination has {available} bytes, but the compact copy needs {needed}: \
                 pass a destination of exactly the compact size (compact_bytes)"
            ),
            Self::InvalidValue { rule, value } => write!(
                f,
                "{} = {value} is invalid: it must be {}",
                rule.field, rule.expected
            ),
            #[cfg(feature = "alloc")]
            Self::InvalidInput { rule, value } => write!(
                f,
                "{} = {value} is invalid: it must be {}",
                rule.field, rule.expected
            ),
            #[cfg(feature = "alloc")]
            Self::DefaultInstalled { registered } => write!(
                f,
                "a default registry is already installed (backends: {registered}) and is \
                 never replaced: install yours at the start of main, before the first \
                 from_dlpack / to_dlpack (dlport_native::install()), or call from_dlpack / \
                 to_dlpack on a Registry of your own"
            ),
        }
    }
}

impl core::error::Error for DispatchError {}
