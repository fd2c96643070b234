//! A short list of numbers (a shape, strides, axes) on the stack: most tensors have few axes,
//! and a list that only passes through on its way into a block or a check should not cost an
//! allocation. The export builder keeps its shape and strides in it, and the adapters collect
//! theirs into it.

use alloc::vec::Vec;

/// Up to this many values live inline.
const INLINE: usize = 8;

/// Up to [`INLINE`] values on the stack, more on the heap.
#[derive(Clone, Debug)]
pub(crate) enum Small<T> {
    Inline(usize, [T; INLINE]),
    Heap(Vec<T>),
}

impl<T: Copy + Default> Small<T> {
    /// The first `n` values of `values` (`n` is at most their count).
    #[inline]
    pub(crate) fn collect_n(n: usize, values: impl Iterator<Item = T>) -> Self {
        if n <= INLINE {
            let mut buf = [T::default(); INLINE];
            for (slot, v) in buf.iter_mut().zip(values) {
                *slot = v;
            }
            Self::Inline(n, buf)
        } else {
            Self::Heap(values.take(n).collect())
        }
    }

    /// All of `values`.
    #[inline]
    pub(crate) fn collect(values: impl ExactSizeIterator<Item = T>) -> Self {
        Self::collect_n(values.len(), values)
    }

    /// A copy of `values`.
    #[inline]
    pub(crate) fn from_slice(values: &[T]) -> Self {
        Self::collect(values.iter().copied())
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Self::Inline(n, buf) => &buf[..*n],
            Self::Heap(v) => v,
        }
    }

    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::Inline(n, buf) => &mut buf[..*n],
            Self::Heap(v) => v,
        }
    }
}
