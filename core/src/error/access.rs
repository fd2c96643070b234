//! [`AccessError`]: a valid tensor cannot be read or written the way the caller asked.

use core::fmt;

use crate::device::Device;
use crate::dtype::DataType;
use crate::layout::Contiguity;

/// The tensor is valid, but not for this access: another element type, memory the host cannot
/// read, a layout or alignment a slice cannot have, writes to memory that is read-only or
/// shared, a buffer that was released or is in use, or a flag the consumer's form cannot carry.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessError {
    /// Typed access with a Rust type whose DLPack type differs from the tensor's.
    DtypeMismatch {
        /// The Rust element type's DLPack type.
        requested: DataType,
        /// The tensor's type.
        actual: DataType,
    },
    /// Typed access to memory the host cannot read without a copy.
    NotHostAccessible {
        /// The tensor's device.
        device: Device,
    },
    /// Slice access needs a compact row-major layout.
    NotContiguous {
        /// The layout found.
        contiguity: Contiguity,
    },
    /// The first element is not aligned for the requested element type.
    Misaligned {
        /// The address of the first element.
        address: usize,
        /// The alignment the element type needs.
        required: usize,
    },
    /// Mutable access to a tensor flagged READ_ONLY.
    ReadOnly,
    /// The buffer was handed to a DLPack consumer by `release_ownership`; this handle can no
    /// longer reach it.
    BufferReleased,
    /// The buffer cannot be released while views or external references use it.
    BufferInUse {
        /// Active users (views and DLPack references).
        users: usize,
    },
    /// Mutable access to a tensor whose memory others may also read or write (a no-copy export
    /// of a backend tensor, or a foreign tensor without IS_COPIED).
    NotExclusive {
        /// Who else may touch the memory.
        access: crate::access::Access,
    },
    /// A flag that the legacy `DLManagedTensor` cannot carry (it has no flags field), so a
    /// legacy consumer would misread the tensor.
    FlagNotRepresentable {
        /// The flag.
        flag: Flag,
    },
}

impl AccessError {
    /// The stable number of this error (see [`Error::code`](super::Error::code)).
    pub const fn code(&self) -> u32 {
        match self {
            Self::DtypeMismatch { .. } => 15,
            Self::NotHostAccessible { .. } => 16,
            Self::NotContiguous { .. } => 17,
            Self::Misaligned { .. } => 18,
            Self::ReadOnly => 19,
            Self::BufferReleased => 26,
            Self::BufferInUse { .. } => 27,
            Self::NotExclusive { .. } => 35,
            Self::FlagNotRepresentable { .. } => 36,
        }
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DtypeMismatch { requested, actual } => write!(
                f,
                "dtype is {actual}, but {requested} was requested: use the matching element type"
            ),
            Self::NotHostAccessible { device } => write!(
                f,
                "device = {device} is not host-accessible: copy the tensor to the CPU first"
            ),
            Self::NotContiguous { contiguity } => write!(
                f,
                "layout is {contiguity}, but slice access needs row-major contiguous data: \
                 compact it first or use a strided accessor"
            ),
            Self::Misaligned { address, required } => write!(
                f,
                "data + byte_offset = {address:#x} is not aligned to {required} bytes for this \
                 element type: copy it into aligned storage"
            ),
            Self::ReadOnly => f.write_str(
                "flags has READ_ONLY set: the producer forbids writes; copy the tensor to modify it",
            ),
            Self::BufferReleased => f.write_str(
                "the buffer was released to a DLPack consumer (release_ownership): this handle \
                 is no longer valid; keep a reference with acquire_external instead",
            ),
            Self::BufferInUse { users } => write!(
                f,
                "the buffer has {users} active view(s) or DLPack reference(s): drop them before \
                 releasing ownership"
            ),
            Self::NotExclusive { access } => write!(
                f,
                "the tensor's memory is {access}: a `&mut` slice would alias other handles; copy \
                 it (CopyPolicy::Always), take the memory with release_ownership, or, if you can \
                 prove nobody else touches it, call `unsafe assume_exclusive`"
            ),
            Self::FlagNotRepresentable { flag } => write!(
                f,
                "flags has {flag} set, which a legacy DLManagedTensor cannot carry (a legacy \
                 consumer would misread or overwrite the data): ask for a versioned tensor \
                 (max_version >= (1, 0)) or allow a copy"
            ),
        }
    }
}

impl core::error::Error for AccessError {}

/// A bit of `DLManagedTensorVersioned.flags`, by name (one byte in an error).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flag {
    /// `DLPACK_FLAG_BITMASK_READ_ONLY`.
    ReadOnly,
    /// `DLPACK_FLAG_BITMASK_IS_COPIED`.
    IsCopied,
    /// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`.
    IsSubbyteTypePadded,
}

impl Flag {
    /// The name DLPack gives the flag (`READ_ONLY`, `IS_COPIED`, `IS_SUBBYTE_TYPE_PADDED`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::ReadOnly => "READ_ONLY",
            Self::IsCopied => "IS_COPIED",
            Self::IsSubbyteTypePadded => "IS_SUBBYTE_TYPE_PADDED",
        }
    }

    /// The flag's bit.
    pub const fn bit(self) -> u64 {
        match self {
            Self::ReadOnly => crate::abi::FLAG_READ_ONLY,
            Self::IsCopied => crate::abi::FLAG_IS_COPIED,
            Self::IsSubbyteTypePadded => crate::abi::FLAG_IS_SUBBYTE_TYPE_PADDED,
        }
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
