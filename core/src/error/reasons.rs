//! The reasons a [`DispatchError`](super::DispatchError) carries: why a copy was required, which
//! kind of name did not parse, why a stream or an option was refused, a value's rule, and the
//! backend names an error lists.

use core::fmt;

use super::{Address, Flag};
use crate::device::Device;
use crate::layout::Contiguity;

/// Why [`DispatchError::CopyRequired`](super::DispatchError::CopyRequired) was raised (20 bytes at a 4-byte alignment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CopyReason {
    /// The target backend cannot reach the memory, or the memory is not of the target device
    /// and cannot be presented as it ([`Device::presented`]: host memory asked for as pinned
    /// memory it is not).
    Device {
        /// Where the data is.
        from: Device,
        /// Where it was asked for.
        to: Device,
    },
    /// The target needs another layout.
    Layout {
        /// The layout found.
        contiguity: Contiguity,
    },
    /// The consumer's form cannot carry a flag of the tensor (a legacy consumer and
    /// READ_ONLY or IS_SUBBYTE_TYPE_PADDED).
    Flag {
        /// The flag.
        flag: Flag,
    },
    /// The tensor is READ_ONLY, and the target may write the memory it holds (a PJRT buffer:
    /// a program can be given it as a donated input and write its result there).
    Writable,
    /// The tensor's sub-byte elements are padded (IS_SUBBYTE_TYPE_PADDED: one element a
    /// byte), and the target reads them packed (a compact tensor, a PJRT buffer).
    Packed,
    /// The target needs a stronger alignment.
    Alignment {
        /// The first element's address.
        address: Address,
        /// The alignment needed (a valid requirement is at most 2^30; a larger one reads as
        /// `u32::MAX`).
        required: u32,
    },
    /// The target is another process, and the memory is not memory another process can map
    /// (only memory allocated for sharing is lent as it is).
    NotShareable {
        /// Where the data is.
        device: Device,
    },
}

impl fmt::Display for CopyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Device { from, to } => {
                write!(f, "the data is on {from}, which {to} cannot reach")
            }
            Self::Layout { contiguity } => write!(
                f,
                "the layout is {contiguity}, which the target cannot view"
            ),
            Self::Flag { flag } => write!(
                f,
                "the tensor has {flag}, which a legacy DLManagedTensor cannot carry"
            ),
            Self::Writable => f.write_str(
                "the tensor has READ_ONLY, and the target may write the memory it holds",
            ),
            Self::Packed => f.write_str(
                "the tensor has IS_SUBBYTE_TYPE_PADDED (one element a byte), and the target \
                 reads sub-byte elements packed",
            ),
            Self::Alignment { address, required } => write!(
                f,
                "data + byte_offset = {address:#x} is not {required}-byte aligned, as the target requires"
            ),
            Self::NotShareable { device } => write!(
                f,
                "the data on {device} is not in memory another process can map (only memory \
                 allocated for sharing is shared without a copy)"
            ),
        }
    }
}

/// What [`DispatchError::InvalidName`](super::DispatchError::InvalidName) was parsing.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// A [`DataType`](crate::DataType) name (`"float32"`).
    DataType,
    /// A [`Device`] name (`"cuda:0"`).
    Device,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DataType => "data type",
            Self::Device => "device",
        })
    }
}

/// Why [`DispatchError::InvalidStream`](super::DispatchError::InvalidStream) refused a `stream` argument.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamReason {
    /// CUDA stream 0 (legacy or per-thread default?).
    CudaZero,
    /// ROCm streams 1 and 2.
    RocmOneOrTwo,
    /// A negative value other than -1.
    Negative,
    /// A positive value too large for a pointer.
    NotAPointer,
    /// Any stream for host memory.
    HostMemory,
    /// A non-positive handle for a device DLPack gives no stream numbering.
    NotAHandle,
}

impl fmt::Display for StreamReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CudaZero => "0 is ambiguous for CUDA; use 1 (legacy default) or 2 (per-thread)",
            Self::RocmOneOrTwo => "1 and 2 are not valid ROCm streams; use 0 for the default",
            Self::Negative => "negative values other than -1 are not streams",
            Self::NotAPointer => "not a pointer",
            Self::HostMemory => "host memory takes no stream; pass None",
            Self::NotAHandle => "not a stream handle",
        })
    }
}

/// An option and the rule its value breaks, for [`DispatchError::InvalidOption`](super::DispatchError::InvalidOption).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptionRule {
    /// `alignment` must be a power of two from 1 to 2^30 bytes.
    Alignment,
    /// `alignment` must be 1 for a copy to device memory (only host copies are re-aligned).
    DeviceCopyAlignment,
    /// `max_alloc` must be at least 1 byte: 0 means "none of its own" in every door that takes
    /// it as a number (C's `max_alloc_bytes`, `set_alloc_limit(0)`), so it is never a zero-byte
    /// limit.
    MaxAlloc,
}

impl OptionRule {
    /// The option's name.
    pub const fn option(self) -> &'static str {
        match self {
            Self::Alignment | Self::DeviceCopyAlignment => "alignment",
            Self::MaxAlloc => "max_alloc",
        }
    }

    /// What its value must be, in words.
    pub const fn expected(self) -> &'static str {
        match self {
            Self::Alignment => "a power of two from 1 to 2^30 bytes",
            Self::DeviceCopyAlignment => {
                "1 for copies to device memory (only host copies can be re-aligned)"
            }
            Self::MaxAlloc => {
                "a number of bytes from 1 (0 means no limit of the call's own in every door, \
                 so it is refused as a limit; give None, or no max_alloc, for the limit in force)"
            }
        }
    }
}

/// A field read from outside and what its value must be, for [`DispatchError::InvalidValue`](super::DispatchError::InvalidValue):
/// a `static` pair, so the error holds one pointer. Write it in place, where the error is
/// made: `&ValueRule { field: "descriptor.version", expected: "1" }` is promoted to a static.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRule {
    /// The field's name, as the reader knows it (`descriptor.byte_len`).
    pub field: &'static str,
    /// What its value must be, in words.
    pub expected: &'static str,
}

/// The names of the registered backends, for [`DispatchError::NoBackend`](super::DispatchError::NoBackend): boxed, so the error
/// holds one pointer however many backends there are. Displays as `cpu, pinned`, or `none`.
#[cfg(feature = "alloc")]
#[derive(Clone, Default, PartialEq, Eq)]
pub struct BackendNames {
    names: alloc::boxed::Box<NameList>,
}

#[cfg(feature = "alloc")]
#[derive(Clone, Default, PartialEq, Eq)]
struct NameList(alloc::vec::Vec<&'static str>);

#[cfg(feature = "alloc")]
impl BackendNames {
    /// The names, in registration order.
    pub fn new(names: impl IntoIterator<Item = &'static str>) -> Self {
        Self {
            names: alloc::boxed::Box::new(NameList(names.into_iter().collect())),
        }
    }

    /// The names, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.names.0.iter().copied()
    }
}

#[cfg(feature = "alloc")]
impl fmt::Display for BackendNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.names.0.is_empty() {
            return f.write_str("none");
        }
        for (i, name) in self.iter().enumerate() {
            write!(f, "{}{name}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}

#[cfg(feature = "alloc")]
impl fmt::Debug for BackendNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
