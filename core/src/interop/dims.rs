//! Shape and strides of a host tensor as `usize`s, for adapters whose views take absolute
//! strides from the lowest element, and the checks they share.

use super::small::Small;
use crate::dtype::Element;
use crate::error::AccessError;
use crate::{Error, TensorRef};

/// Extents and absolute strides (in elements), and which strides are negative.
pub(crate) struct Dims {
    extents: Small<usize>,
    strides: Small<usize>,
    /// Bit `i`: axis `i`'s stride is negative (DLPack allows at most 64 axes).
    negative: u64,
    empty: bool,
}

impl Dims {
    /// The dims of a validated tensor. Validation bounds every extent by the element count and
    /// every reach `(extent - 1) × |stride|` by the span, both inside the address space, so the
    /// casts are exact for non-empty tensors; an empty one reaches nothing and its strides are
    /// never used.
    pub(crate) fn of(view: &TensorRef<'_>) -> Self {
        let shape = view.shape();
        let empty = view.numel() == 0;
        let mut negative = 0u64;
        let strides = Small::collect_n(
            shape.len(),
            view.strides().enumerate().map(|(axis, s)| {
                if s < 0 && shape[axis] > 1 {
                    negative |= 1 << axis;
                }
                // An axis of extent 1 reaches nothing, whatever its stride says.
                if shape[axis] > 1 && !empty {
                    s.unsigned_abs() as usize
                } else {
                    0
                }
            }),
        );
        Self {
            extents: Small::collect_n(shape.len(), shape.iter().map(|&e| e as usize)),
            strides,
            negative,
            empty,
        }
    }

    pub(crate) fn extents(&self) -> &[usize] {
        self.extents.as_slice()
    }

    pub(crate) fn abs_strides(&self) -> &[usize] {
        self.strides.as_slice()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.empty
    }

    /// The axes whose stride is negative.
    pub(crate) fn negative_axes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.extents().len()).filter(|&axis| self.negative & (1 << axis) != 0)
    }

    /// Elements from the first (logical) element down to the lowest one the tensor reaches.
    pub(crate) fn below_first(&self) -> usize {
        self.negative_axes()
            .map(|axis| (self.extents()[axis] - 1) * self.abs_strides()[axis])
            .sum()
    }
}

/// Checks typed host access to a tensor of any layout (host memory, dtype `T`, the first
/// element aligned, so every element is) and returns its first element.
pub(crate) fn host_elements<T: Element>(view: &TensorRef<'_>) -> Result<*mut T, Error> {
    if !view.device().is_host_accessible() {
        return Err(Error::Access(AccessError::NotHostAccessible {
            device: view.device(),
        }));
    }
    if view.dtype() != T::DTYPE {
        return Err(Error::Access(AccessError::DtypeMismatch {
            requested: T::DTYPE,
            actual: view.dtype(),
        }));
    }
    // `data + byte_offset` with `data`'s provenance.
    let first = view
        .data()
        .cast::<u8>()
        .wrapping_add(view.byte_offset() as usize);
    if view.numel() != 0 && (first as usize) % align_of::<T>() != 0 {
        return Err(Error::Access(AccessError::Misaligned {
            address: first as usize,
            required: align_of::<T>(),
        }));
    }
    Ok(first.cast())
}

/// Whether no two indices reach the same element: axes of extent > 1 sorted by stride, each
/// stride clears everything the smaller ones reach. Sufficient, and exactly what every dense,
/// sliced, transposed or flipped layout satisfies; zero strides and interleaved overlaps fail.
pub(crate) fn non_overlapping(dims: &Dims) -> bool {
    if dims.is_empty() {
        return true;
    }
    let n = dims.extents().iter().filter(|&&e| e > 1).count();
    let mut axes = Small::collect_n(
        n,
        (0..dims.extents().len()).filter(|&a| dims.extents()[a] > 1),
    );
    let axes = axes.as_mut_slice();
    axes.sort_unstable_by_key(|&a| dims.abs_strides()[a]);
    let mut reach = 1usize;
    for &a in axes.iter() {
        let stride = dims.abs_strides()[a];
        if stride < reach {
            return false;
        }
        reach = stride.saturating_mul(dims.extents()[a]);
    }
    true
}
