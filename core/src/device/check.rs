//! The fallible half of [`Device`]: the rule of device ids, parsing a name, and reconciling
//! the device a capsule says with the one its producer advertised. The type itself, below
//! dlport's errors, names none.

use core::str::FromStr;

use super::{Device, DeviceField, MemoryClass};
use crate::abi::DeviceType;
use crate::error::{DispatchError, Error, NameKind, ShortStr};

impl Device {
    /// Applies [the rule of device ids](Device#the-rule-of-device-ids) to the device given as
    /// `field`: the device itself, or [`DispatchError::InvalidDevice`] naming the field and the
    /// device.
    ///
    /// ```
    /// use dlport_core::abi::DeviceType;
    /// use dlport_core::backend::DeviceField;
    /// use dlport_core::{Device, Error};
    ///
    /// assert!(Device::cuda(3).check(DeviceField::Requested).is_ok());
    /// let err = Device::new(DeviceType::CPU, 5).check(DeviceField::DlDevice).unwrap_err();
    /// assert!(err.to_string().starts_with("dl_device = (1, 5) is invalid"), "{err}");
    /// assert!(Device::cuda(-1).check(DeviceField::Tensor).is_err());
    /// ```
    #[inline]
    pub const fn check(self, field: DeviceField) -> Result<Self, Error> {
        if self.has_valid_id() {
            Ok(self)
        } else {
            Err(Error::Dispatch(DispatchError::InvalidDevice {
                field,
                device: self,
            }))
        }
    }

    /// [`check`](Self::check) for an optional device (`None` is always valid).
    #[inline]
    pub const fn check_option(device: Option<Self>, field: DeviceField) -> Result<(), Error> {
        match device {
            Some(d) if !d.has_valid_id() => Err(Error::Dispatch(DispatchError::InvalidDevice {
                field,
                device: d,
            })),
            _ => Ok(()),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parses what [`Display`](core::fmt::Display) writes: `cpu`, `cuda:1`, `device_type(99):0`.
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

/// Reconciles the device written in the DLTensor (the capsule's) with the one the producer
/// advertises through `__dlpack_device__`.
///
/// Both devices obey [the rule of device ids](crate::Device#the-rule-of-device-ids) first (the
/// capsule's is checked by validation, the advertised one here): `(1, 3)` advertised is
/// [`DispatchError::InvalidDevice`] naming `__dlpack_device__()`, whatever the capsule says.
///
/// - Nothing advertised, or both equal: that device.
/// - One says plain `cpu` and the other a host-accessible class (pinned, managed): the more
///   specific one. PyTorch's pinned tensors advertise `kDLCUDAHost` while their capsule says
///   `kDLCPU`; that is pinned host memory.
/// - Anything else (a `cuda` capsule advertised as `cpu`, two GPU ids):
///   [`DispatchError::DeviceMismatch`].
pub fn reconcile_device(capsule: Device, advertised: Option<Device>) -> Result<Device, Error> {
    let Some(advertised) = advertised else {
        return Ok(capsule);
    };
    let advertised = advertised.check(DeviceField::Advertised)?;
    if capsule == advertised {
        return Ok(capsule);
    }
    let is_plain_cpu = |d: Device| d.memory_class() == MemoryClass::Host;
    match (is_plain_cpu(capsule), is_plain_cpu(advertised)) {
        (true, false) if advertised.is_host_accessible() => Ok(advertised),
        (false, true) if capsule.is_host_accessible() => Ok(capsule),
        _ => Err(Error::Dispatch(DispatchError::DeviceMismatch {
            capsule,
            advertised,
        })),
    }
}
