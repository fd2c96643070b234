//! [`LayoutError`]: the tensor's description itself is invalid (what the producer wrote).

use core::fmt;

use crate::abi::{DLPackVersion, TypeCode};
use crate::dtype::DataType;
use crate::layout::ByteSpan;

/// The raw fields of a tensor break a DLPack rule: the pointer, version, flags, `ndim`, the
/// data type, the extents and strides, or the address range. The producer is at fault; nothing
/// about the tensor can be trusted.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The pointer to the managed tensor itself was NULL.
    NullManagedTensor,
    /// `version.major` is not 1. The tensor was released (its deleter called) and nothing else
    /// was read.
    UnsupportedVersion {
        /// The version the producer wrote.
        version: DLPackVersion,
    },
    /// `flags` has bits that DLPack 1.3 does not define.
    UnknownFlags {
        /// The whole flags word.
        flags: u64,
    },
    /// `ndim` is negative or above [`MAX_NDIM`](crate::layout::MAX_NDIM).
    NdimOutOfRange {
        /// The value found.
        ndim: i64,
    },
    /// `shape` is NULL although `ndim > 0`.
    NullShape {
        /// The number of dimensions.
        ndim: i32,
    },
    /// `strides` is NULL although the DLPack version requires it (1.2 and later, `ndim > 0`).
    NullStrides {
        /// The number of dimensions.
        ndim: i32,
        /// The version the tensor came with.
        version: DLPackVersion,
    },
    /// `data` is NULL although the tensor has elements.
    NullData {
        /// The element count.
        numel: u64,
    },
    /// `shape[axis]` is negative.
    NegativeExtent {
        /// The axis (below [`MAX_NDIM`](crate::layout::MAX_NDIM)).
        axis: u32,
        /// The extent found.
        extent: i64,
    },
    /// The product of the extents overflows 64 bits at `shape[axis]`.
    ElementCountOverflow {
        /// The axis whose extent made the product overflow.
        axis: u32,
        /// Its extent.
        extent: i64,
    },
    /// The byte span overflows 64 bits at `strides[axis]`.
    SpanOverflow {
        /// The axis.
        axis: u32,
        /// Its extent.
        extent: i64,
        /// Its stride.
        stride: i64,
    },
    /// `data + byte_offset` plus the span leaves the address space of this machine.
    AddressOverflow {
        /// `data`, `byte_offset` and the span.
        range: AddressRange,
    },
    /// `dtype.code` is not a DLPack type code.
    UnknownTypeCode {
        /// The code found.
        code: TypeCode,
    },
    /// `dtype.bits` is not allowed for the type code.
    InvalidBits {
        /// The whole data type.
        dtype: DataType,
        /// What the code requires, in words ("4", "a multiple of 8").
        expected: &'static str,
    },
    /// `dtype.lanes` is not allowed (0, or lanes that this code cannot have).
    InvalidLanes {
        /// The whole data type.
        dtype: DataType,
        /// Why, in words.
        reason: &'static str,
    },
    /// An exported tensor's byte span does not fit inside its storage.
    StorageTooSmall {
        /// Bytes the layout needs, from the storage's start.
        needed: u64,
        /// Bytes the storage has.
        available: u64,
    },
    /// A typed vector has fewer elements than its shape (and strides) reach
    /// ([`Tensor::from_vec`](crate::Tensor::from_vec),
    /// [`ExportBuilder::from_vec`](crate::ExportBuilder::from_vec)): counted in elements, as the
    /// caller gave them. [`StorageTooSmall`](Self::StorageTooSmall) is its counterpart in bytes,
    /// for untyped storage.
    DataTooShort {
        /// Elements the layout reaches, from the vector's start.
        needed: u64,
        /// Elements the vector has.
        available: u64,
    },
    /// `strides` has a different length than `shape`.
    StridesLength {
        /// Number of strides given.
        strides: usize,
        /// Number of dimensions.
        ndim: usize,
    },
}

impl LayoutError {
    /// The stable number of this error (see [`Error::code`](super::Error::code)).
    pub const fn code(&self) -> u32 {
        match self {
            Self::NullManagedTensor => 1,
            Self::UnsupportedVersion { .. } => 2,
            Self::UnknownFlags { .. } => 3,
            Self::NdimOutOfRange { .. } => 4,
            Self::NullShape { .. } => 5,
            Self::NullStrides { .. } => 6,
            Self::NullData { .. } => 7,
            Self::NegativeExtent { .. } => 8,
            Self::ElementCountOverflow { .. } => 9,
            Self::SpanOverflow { .. } => 10,
            Self::AddressOverflow { .. } => 11,
            Self::UnknownTypeCode { .. } => 12,
            Self::InvalidBits { .. } => 13,
            Self::InvalidLanes { .. } => 14,
            Self::StorageTooSmall { .. } => 20,
            Self::StridesLength { .. } => 21,
            Self::DataTooShort { .. } => 43,
        }
    }
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NullManagedTensor => f.write_str(
                "the managed tensor pointer is NULL: pass the pointer the producer returned",
            ),
            Self::UnsupportedVersion { version } => write!(
                f,
                "version = {version} is not supported: dlport reads DLPack major version 1; \
                 the tensor was released; ask the producer for max_version (1, 3)"
            ),
            Self::UnknownFlags { flags } => write!(
                f,
                "flags = {flags:#x} has bits DLPack 1.3 does not define ({:#x}); refusing to \
                 guess their meaning",
                flags & !crate::abi::KNOWN_FLAGS
            ),
            Self::NdimOutOfRange { ndim } => write!(
                f,
                "ndim = {ndim} is out of range 0..={}",
                crate::layout::MAX_NDIM
            ),
            Self::NullShape { ndim } => {
                write!(
                    f,
                    "shape is NULL, but ndim = {ndim}: a shape array of ndim extents is required"
                )
            }
            Self::NullStrides { ndim, version } => write!(
                f,
                "strides is NULL, but DLPack {version} requires strides when ndim = {ndim}; \
                 producers of DLPack >= 1.2 must send explicit strides"
            ),
            Self::NullData { numel } => write!(
                f,
                "data is NULL, but the tensor has {numel} elements: only size-0 tensors may have NULL data"
            ),
            Self::NegativeExtent { axis, extent } => {
                write!(f, "shape[{axis}] = {extent} is negative")
            }
            Self::ElementCountOverflow { axis, extent } => write!(
                f,
                "shape[{axis}] = {extent} makes the element count overflow 64 bits"
            ),
            Self::SpanOverflow {
                axis,
                extent,
                stride,
            } => write!(
                f,
                "strides[{axis}] = {stride} with shape[{axis}] = {extent} makes the byte span \
                 overflow 64 bits"
            ),
            Self::AddressOverflow { range } => {
                write!(
                    f,
                    "data = {:#x} with byte_offset = {}",
                    range.data(),
                    range.byte_offset()
                )?;
                if let Some(span) = range.span() {
                    write!(f, " and span [{}, {})", span.lo, span.hi)?;
                }
                f.write_str(
                    " leaves user-space memory (its first byte must be above 0, its last below \
                     USER_ADDRESS_END): fix data or byte_offset",
                )
            }
            Self::UnknownTypeCode { code } => write!(
                f,
                "dtype.code = {} is not a DLPack type code (known: 0..=18)",
                code.0
            ),
            Self::InvalidBits { dtype, expected } => write!(
                f,
                "dtype.bits = {} is invalid for {}: it must be {expected}",
                dtype.bits, dtype.code
            ),
            Self::InvalidLanes { dtype, reason } => write!(
                f,
                "dtype.lanes = {} is invalid for {}: {reason}",
                dtype.lanes, dtype.code
            ),
            Self::StorageTooSmall { needed, available } => write!(
                f,
                "the layout needs {needed} bytes, but the storage has {available}: fix shape, \
                 strides or byte_offset"
            ),
            Self::DataTooShort { needed, available } => write!(
                f,
                "the shape needs {needed} elements, but the data has {available}: give a shape \
                 whose extents multiply to at most {available}, or more data"
            ),
            Self::StridesLength { strides, ndim } => write!(
                f,
                "strides has {strides} entries, but ndim = {ndim}: give one stride per axis"
            ),
        }
    }
}

impl core::error::Error for LayoutError {}

/// Where a host tensor's bytes would lie, `data + byte_offset + [lo, hi)`, for
/// [`LayoutError::AddressOverflow`].
///
/// The four numbers take 32 bytes, more than the whole [`Error`](super::Error) may, so with
/// `alloc` they are boxed (one pointer; the box is made only when the check fails). Without
/// `alloc` the range keeps `data` and `byte_offset`, the two fields to fix, and
/// [`span`](Self::span) is `None` (the span follows from shape, strides and dtype).
#[derive(Clone, PartialEq, Eq)]
pub struct AddressRange {
    #[cfg(feature = "alloc")]
    fields: alloc::boxed::Box<RangeFields>,
    #[cfg(not(feature = "alloc"))]
    fields: RangeFields,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct RangeFields {
    data: usize,
    byte_offset: u64,
    #[cfg(feature = "alloc")]
    span: ByteSpan,
}

impl AddressRange {
    /// The range `data + byte_offset + [span.lo, span.hi)`.
    pub fn new(data: usize, byte_offset: u64, span: ByteSpan) -> Self {
        #[cfg(not(feature = "alloc"))]
        let _ = span;
        let fields = RangeFields {
            data,
            byte_offset,
            #[cfg(feature = "alloc")]
            span,
        };
        Self {
            #[cfg(feature = "alloc")]
            fields: alloc::boxed::Box::new(fields),
            #[cfg(not(feature = "alloc"))]
            fields,
        }
    }

    /// `data`.
    pub fn data(&self) -> usize {
        self.fields.data
    }

    /// `byte_offset`.
    pub fn byte_offset(&self) -> u64 {
        self.fields.byte_offset
    }

    /// The span relative to `data + byte_offset` (`None` without `alloc`).
    #[cfg(feature = "alloc")]
    pub fn span(&self) -> Option<ByteSpan> {
        Some(self.fields.span)
    }

    /// The span relative to `data + byte_offset` (`None` without `alloc`).
    #[cfg(not(feature = "alloc"))]
    pub fn span(&self) -> Option<ByteSpan> {
        None
    }
}

impl fmt::Debug for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("AddressRange");
        s.field("data", &format_args!("{:#x}", self.data()))
            .field("byte_offset", &self.byte_offset());
        if let Some(span) = self.span() {
            s.field("lo", &span.lo).field("hi", &span.hi);
        }
        s.finish()
    }
}
