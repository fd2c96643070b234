//! A short list of numbers (a shape, strides, axes) on the stack, for the adapters: most
//! tensors have few axes, and a list that only passes through on its way into a builder or a
//! check should not cost an allocation.

use alloc::vec::Vec;

/// Up to this many values live inline.
const INLINE: usize = 8;

/// Up to [`INLINE`] values on the stack, more on the heap.
pub(crate) enum Small<T> {
    Inline(usize, [T; INLINE]),
    Heap(Vec<T>),
}

impl<T: Copy + Default> Small<T> {
    /// The first `n` values of `values` (`n` is at most their count).
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
    pub(crate) fn collect(values: impl ExactSizeIterator<Item = T>) -> Self {
        Self::collect_n(values.len(), values)
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Self::Inline(n, buf) => &buf[..*n],
            Self::Heap(v) => v,
        }
    }

    #[cfg(feature = "ndarray")]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::Inline(n, buf) => &mut buf[..*n],
            Self::Heap(v) => v,
        }
    }
}
