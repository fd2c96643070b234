//! A host tensor's extents and absolute strides as ndarray's `usize` dimensions, for its views,
//! which take absolute strides from the lowest element and flip the axes whose DLPack stride is
//! negative; and the checks they share. Not the crate's `Dims` (a tensor's own signed shape and
//! strides): this is what ndarray is given for them.

use ndarray::{Dimension, IxDyn};

use crate::dtype::Element;
use crate::error::AccessError;
use crate::layout::MAX_NDIM;
use crate::{Error, TensorRef};

/// Extents and absolute strides (in elements), as ndarray's dimensions (so a view takes them
/// without another copy), and which strides are negative.
pub(crate) struct AbsoluteStrides {
    extents: IxDyn,
    strides: IxDyn,
    /// Bit `i`: axis `i`'s stride is negative (DLPack allows at most 64 axes).
    negative: u64,
    empty: bool,
}

impl AbsoluteStrides {
    /// The extents and absolute strides of a validated tensor. Validation bounds every extent by the element count and
    /// every reach `(extent - 1) × |stride|` by the span, both inside the address space, so the
    /// casts are exact for non-empty tensors; an empty one reaches nothing and its strides are
    /// never used.
    pub(crate) fn of(view: &TensorRef<'_>) -> Self {
        let shape = view.shape();
        let empty = view.numel() == 0;
        let mut negative = 0u64;
        let mut extents = IxDyn::zeros(shape.len());
        let mut strides = IxDyn::zeros(shape.len());
        let slots = extents.slice_mut().iter_mut().zip(strides.slice_mut());
        for (axis, ((extent, stride), s)) in slots.zip(view.strides()).enumerate() {
            let e = shape[axis];
            *extent = e as usize;
            if s < 0 && e > 1 {
                negative |= 1 << axis;
            }
            // An axis of extent 1 reaches nothing, whatever its stride says.
            if e > 1 && !empty {
                *stride = s.unsigned_abs() as usize;
            }
        }
        Self {
            extents,
            strides,
            negative,
            empty,
        }
    }

    pub(crate) fn extents(&self) -> &[usize] {
        self.extents.slice()
    }

    pub(crate) fn abs_strides(&self) -> &[usize] {
        self.strides.slice()
    }

    /// Extents and absolute strides as ndarray's own dimensions, moved out.
    pub(crate) fn into_ix(self) -> (IxDyn, IxDyn) {
        (self.extents, self.strides)
    }

    /// Bit `i`: axis `i`'s stride is negative.
    pub(crate) fn negative(&self) -> u64 {
        self.negative
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
pub(crate) fn non_overlapping(dims: &AbsoluteStrides) -> bool {
    if dims.is_empty() {
        return true;
    }
    // A validated tensor has at most MAX_NDIM axes (as `negative`'s bits count them).
    let mut axes = [0usize; MAX_NDIM];
    let mut n = 0;
    for a in (0..dims.extents().len()).filter(|&a| dims.extents()[a] > 1) {
        axes[n] = a;
        n += 1;
    }
    let axes = &mut axes[..n];
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
