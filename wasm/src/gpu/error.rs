//! Errors: [`KernelError`] for the kernels' own arguments, and the one place in this crate that
//! builds core [`Error`] values (every other module calls the functions below), so that a
//! change to the core error type touches this file only.

use dlport_core::error::{AccessError, BackendError, DispatchError, LayoutError};
use dlport_core::{DataType, Device, Error};

use super::{BUFFER_PADDING, MAX_CHANNELS, NAME};

/// A WebGPU call that failed: `operation` names the call, `detail` says why and what to do.
pub(crate) fn backend(operation: &'static str, detail: &'static str) -> Error {
    Error::Backend(BackendError::failed(NAME, operation, 0, detail))
}

/// Something this backend does not do (`operation` says what).
pub(crate) fn unsupported(operation: &'static str) -> Error {
    Error::Backend(BackendError::unsupported(NAME, operation))
}

/// A buffer smaller than the tensor's bytes need.
pub(crate) fn storage_too_small(needed: u64, available: u64) -> Error {
    Error::Layout(LayoutError::StorageTooSmall { needed, available })
}

/// A buffer larger than the device allows.
pub(crate) fn allocation_failed(bytes: u64) -> Error {
    Error::Backend(BackendError::AllocationFailed {
        bytes,
        align: BUFFER_PADDING as usize,
    })
}

/// A device id this backend does not serve.
pub(crate) fn invalid_device_id(device_id: i32) -> Error {
    Error::Dispatch(DispatchError::InvalidDeviceId {
        backend: NAME,
        device_id,
    })
}

/// An upload from memory the host cannot read.
pub(crate) fn not_host_accessible(device: Device) -> Error {
    Error::Access(AccessError::NotHostAccessible { device })
}

/// Why a dlport WebGPU kernel refused its arguments.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum KernelError {
    /// A core error (validation, allocation, a released buffer, …).
    Core(Error),
    /// The kernel does not read this element type.
    InputDtype {
        /// The tensor's dtype.
        dtype: DataType,
    },
    /// `mean` or `std` has neither one value nor one per channel.
    ChannelCount {
        /// "mean" or "std".
        name: &'static str,
        /// How many values were given.
        len: usize,
        /// The extent of the last axis.
        channels: i64,
    },
    /// A standard deviation of 0 or a non-finite one.
    BadStd {
        /// Its channel.
        channel: usize,
        /// The value.
        value: f32,
    },
    /// A non-finite scale.
    BadScale {
        /// The value.
        value: f32,
    },
    /// The first element is not aligned for the kernel's reads.
    Misaligned {
        /// The tensor's byte offset.
        byte_offset: u64,
        /// The alignment needed.
        required: u64,
    },
    /// More elements than one kernel launch indexes (2^32 − 1).
    TooLarge {
        /// The element count.
        elements: u64,
    },
}

impl From<Error> for KernelError {
    fn from(e: Error) -> Self {
        Self::Core(e)
    }
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Core(e) => e.fmt(f),
            Self::InputDtype { dtype } => write!(
                f,
                "normalize reads float32, int32, uint32 or uint8 tensors, not {dtype}; convert it first"
            ),
            Self::ChannelCount {
                name,
                len,
                channels,
            } => write!(
                f,
                "{name} has {len} values, but the last axis has {channels} channels; give 1 value or {channels} (at most {MAX_CHANNELS})"
            ),
            Self::BadStd { channel, value } => write!(
                f,
                "std[{channel}] = {}: a standard deviation must be finite and not 0",
                special(*value)
            ),
            Self::BadScale { value } => write!(f, "scale = {} is not finite", special(*value)),
            Self::Misaligned {
                byte_offset,
                required,
            } => write!(
                f,
                "byte_offset = {byte_offset} is not a multiple of {required}, which the kernel's reads need; compact the tensor first"
            ),
            Self::TooLarge { elements } => write!(
                f,
                "{elements} elements are more than one kernel launch indexes (2^32 - 1); split the tensor"
            ),
        }
    }
}

/// Shows the values these errors carry (0 or non-finite) without pulling float formatting,
/// some 20 KB, into the wasm package.
fn special(v: f32) -> &'static str {
    match v {
        _ if v.is_nan() => "NaN",
        f32::INFINITY => "inf",
        f32::NEG_INFINITY => "-inf",
        _ if v == 0.0 && v.is_sign_negative() => "-0",
        0.0 => "0",
        _ => "a value out of range",
    }
}

impl std::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Core(e) => Some(e),
            _ => None,
        }
    }
}
