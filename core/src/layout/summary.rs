//! What validation reads and what it learns: [`RawFields`] in, [`Layout`] (with its
//! [`Contiguity`] and [`ByteSpan`]) out. Plain data, below dlport's errors, which name them.

use core::fmt;

use crate::abi::DLPackVersion;
use crate::device::Device;
use crate::dtype::DataType;

/// The largest `ndim` accepted (NumPy 2 and PyTorch both stop at 64).
pub const MAX_NDIM: usize = 64;

/// How the elements of a tensor sit in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Contiguity {
    /// Both row-major and column-major contiguous (0-d, 1-d compact, size-0, or only one axis of
    /// extent > 1).
    Both,
    /// Row-major (C) contiguous.
    RowMajor,
    /// Column-major (Fortran) contiguous.
    ColumnMajor,
    /// Dense and positive, but in another axis order (a permutation of a compact layout, what
    /// JAX accepts).
    Permuted,
    /// Anything else: gaps, negative or zero (broadcast) strides, overlap.
    Strided,
}

impl Contiguity {
    /// Row-major contiguous (including [`Both`](Self::Both)).
    pub const fn is_row_major(self) -> bool {
        matches!(self, Self::Both | Self::RowMajor)
    }

    /// Column-major contiguous (including [`Both`](Self::Both)).
    pub const fn is_column_major(self) -> bool {
        matches!(self, Self::Both | Self::ColumnMajor)
    }

    /// Dense: the elements tile their span exactly, in some axis order.
    pub const fn is_dense(self) -> bool {
        !matches!(self, Self::Strided)
    }
}

impl fmt::Display for Contiguity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Both => "contiguous (C and F)",
            Self::RowMajor => "row-major (C) contiguous",
            Self::ColumnMajor => "column-major (F) contiguous",
            Self::Permuted => "dense with permuted axes",
            Self::Strided => "strided (not dense)",
        })
    }
}

/// The bytes a tensor touches, `[lo, hi)`, relative to `data + byte_offset`.
///
/// `lo` is ≤ 0 (negative strides reach below the first element); an empty tensor has `[0, 0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ByteSpan {
    /// The lowest byte touched.
    pub lo: i64,
    /// One past the highest byte touched.
    pub hi: i64,
}

impl ByteSpan {
    /// `hi - lo`.
    pub const fn len(self) -> u64 {
        self.hi.abs_diff(self.lo)
    }

    /// Whether no byte is touched.
    pub const fn is_empty(self) -> bool {
        self.hi == self.lo
    }
}

/// What validation learned about a tensor, computed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Number of elements (product of the extents; 1 for a 0-d tensor).
    pub numel: u64,
    /// Bytes touched, relative to `data + byte_offset`.
    pub span: ByteSpan,
    /// C / F / permuted / strided.
    pub contiguity: Contiguity,
    /// Bits one element occupies (`DataType::storage_bits`).
    pub element_bits: u32,
}

/// The raw fields of a tensor, as plain values: the input of `layout::validate`.
#[derive(Clone, Copy, Debug)]
pub struct RawFields<'a> {
    /// `data` as an address or handle value.
    pub data: usize,
    /// `device`.
    pub device: Device,
    /// `dtype`.
    pub dtype: DataType,
    /// The `ndim` extents.
    pub shape: &'a [i64],
    /// The strides, or `None` when `strides` was NULL.
    pub strides: Option<&'a [i64]>,
    /// `byte_offset`.
    pub byte_offset: u64,
    /// The DLPack version, or `None` for a legacy `DLManagedTensor`.
    pub version: Option<DLPackVersion>,
    /// `flags` (0 for legacy tensors).
    pub flags: u64,
}
