//! [`Dims`]: a tensor's shape followed by its strides, the one list of dimensions in the crate.
//! A backend's [`Tensor`](crate::Tensor) keeps its dimensions in one, the checks of
//! [`Tensor::builder`](crate::Tensor::builder) fill one in place and hand it to the tensor, the
//! [`ExportBuilder`](crate::ExportBuilder) collects the values it writes into a DLPack block in
//! one, and the adapters hand theirs to the builder in one. Most tensors have few axes: up to
//! [`Dims::INLINE`] of them are kept inline (no allocation, so an import or an export allocates
//! nothing for its dimensions); beyond, the values are shared on the heap, so a tensor's clone
//! stays cheap.

use alloc::sync::Arc;

/// `ndim` extents followed by `ndim` strides (in elements).
#[derive(Clone, Debug)]
pub(crate) enum Dims {
    Inline {
        ndim: u8,
        buf: [i64; 2 * Dims::INLINE],
    },
    Shared(Arc<[i64]>),
}

impl Dims {
    /// Dimensions kept inline: up to 4-d (NCHW) a tensor's dimensions cost no allocation, and a
    /// [`Tensor`](crate::Tensor) stays at 160 bytes, whose moves (into a `Result`, into a
    /// Python object) the compiler writes as register copies rather than `memcpy` calls. A
    /// 5-d or larger tensor shares its dimensions in one heap allocation. BENCHMARKS.md
    /// ("Issue 48's budget") has the import from NumPy at 4 and at 8.
    pub(crate) const INLINE: usize = 4;

    /// `ndim` zeroed extents and strides (one allocation beyond [`INLINE`](Self::INLINE)).
    #[inline]
    pub(crate) fn zeroed(ndim: usize) -> Self {
        if ndim <= Self::INLINE {
            Self::Inline {
                ndim: ndim as u8,
                buf: [0; 2 * Self::INLINE],
            }
        } else {
            Self::Shared((0..2 * ndim).map(|_| 0).collect())
        }
    }

    /// `shape` followed by as many zeroed strides.
    #[inline]
    pub(crate) fn with_shape(shape: &[i64]) -> Self {
        Self::new(shape, core::iter::empty())
    }

    /// `shape` followed by the first `shape.len()` values of `strides` (zeros past its end).
    #[inline]
    pub(crate) fn new(shape: &[i64], strides: impl Iterator<Item = i64>) -> Self {
        let ndim = shape.len();
        if ndim > Self::INLINE {
            return Self::collect(ndim, shape.iter().copied(), Some(strides));
        }
        let mut buf = [0; 2 * Self::INLINE];
        // A fixed number of guarded stores: a copy of a length known only at run time is a
        // call to `memcpy`, dearer than the few stores it makes here.
        for (i, to) in buf[..Self::INLINE].iter_mut().enumerate() {
            if let Some(&extent) = shape.get(i) {
                *to = extent;
            }
        }
        for (to, from) in buf[ndim..2 * ndim].iter_mut().zip(strides) {
            *to = from;
        }
        Self::Inline {
            ndim: ndim as u8,
            buf,
        }
    }

    /// `ndim` extents from `shape`, then `ndim` strides from `strides` when given (zeros past
    /// the end of either, and for strides not given): what an adapter reads off its container.
    #[inline]
    pub(crate) fn collect(
        ndim: usize,
        shape: impl Iterator<Item = i64>,
        strides: Option<impl Iterator<Item = i64>>,
    ) -> Self {
        let mut dims = Self::zeroed(ndim);
        for (to, from) in dims.shape_mut().iter_mut().zip(shape) {
            *to = from;
        }
        if let Some(strides) = strides {
            for (to, from) in dims.strides_mut().iter_mut().zip(strides) {
                *to = from;
            }
        }
        dims
    }

    /// The number of dimensions.
    #[inline]
    pub(crate) fn ndim(&self) -> usize {
        match self {
            Self::Inline { ndim, .. } => usize::from(*ndim),
            Self::Shared(all) => all.len() / 2,
        }
    }

    /// `shape` then `strides` (`2 × ndim` values).
    #[inline]
    pub(crate) fn as_slice(&self) -> &[i64] {
        match self {
            Self::Inline { ndim, buf } => &buf[..2 * usize::from(*ndim)],
            Self::Shared(all) => all,
        }
    }

    /// `shape` then `strides`, to write (a shared list that another clone also holds is copied
    /// first; one being built is held only here, so nothing is).
    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [i64] {
        match self {
            Self::Inline { ndim, buf } => &mut buf[..2 * usize::from(*ndim)],
            Self::Shared(all) => Arc::make_mut(all),
        }
    }

    /// The extents.
    #[inline]
    pub(crate) fn shape(&self) -> &[i64] {
        &self.as_slice()[..self.ndim()]
    }

    /// The strides.
    #[inline]
    pub(crate) fn strides(&self) -> &[i64] {
        &self.as_slice()[self.ndim()..]
    }

    /// The extents and the strides, to write.
    #[inline]
    pub(crate) fn split_mut(&mut self) -> (&mut [i64], &mut [i64]) {
        let ndim = self.ndim();
        self.as_mut_slice().split_at_mut(ndim)
    }

    /// The extents, to write.
    #[inline]
    pub(crate) fn shape_mut(&mut self) -> &mut [i64] {
        self.split_mut().0
    }

    /// The strides, to write.
    #[inline]
    pub(crate) fn strides_mut(&mut self) -> &mut [i64] {
        self.split_mut().1
    }
}

#[cfg(test)]
mod tests {
    use super::Dims;

    #[test]
    fn inline_and_shared_hold_the_same_values() {
        for ndim in [0usize, 1, 4, Dims::INLINE, Dims::INLINE + 1, 64] {
            let shape: alloc::vec::Vec<i64> = (1..=ndim as i64).collect();
            let strides = shape.iter().map(|&e| -e);
            let dims = Dims::new(&shape, strides.clone());
            assert_eq!(dims.ndim(), ndim);
            assert_eq!(dims.shape(), &shape[..]);
            assert!(dims.strides().iter().copied().eq(strides.clone()));
            assert_eq!(
                matches!(dims, Dims::Inline { .. }),
                ndim <= Dims::INLINE,
                "{ndim}"
            );
            let collected = Dims::collect(ndim, shape.iter().copied(), Some(strides));
            assert_eq!(collected.as_slice(), dims.as_slice());
            let zeroed = Dims::with_shape(&shape);
            assert_eq!(zeroed.shape(), &shape[..]);
            assert!(zeroed.strides().iter().all(|&s| s == 0));
        }
    }

    #[test]
    fn a_write_to_a_shared_clone_leaves_the_other_alone() {
        let shape = [2i64; Dims::INLINE + 2];
        let mut a = Dims::with_shape(&shape);
        let b = a.clone();
        a.strides_mut()[0] = 7;
        assert_eq!(a.strides()[0], 7);
        assert_eq!(b.strides()[0], 0);
        assert_eq!(a.shape(), b.shape());
    }
}
