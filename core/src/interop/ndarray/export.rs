//! Owned and shared ndarray arrays become DLPack tensors without a copy.

use core::ffi::c_void;

use ndarray::{ArrayBase, Dimension, OwnedArcRepr, OwnedRepr};

use crate::access::Access;
use crate::dims::Dims;
use crate::dtype::Element;
use crate::storage::TensorStorage;
use crate::{Error, ExportBuilder, ManagedTensor};

/// The ndarray storages an export can own: [`OwnedRepr`] (an `Array`, exclusive) and
/// [`OwnedArcRepr`] (an `ArcArray`, read-only while other clones share it). Sealed.
pub trait OwnedData: ndarray::Data + Send + 'static + sealed::Sealed
where
    Self::Elem: Element,
{
    /// Who else may touch the elements of `array` once the export owns it.
    fn access<D: Dimension>(array: &ArrayBase<Self, D>) -> Access;
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for ndarray::OwnedRepr<T> {}
    impl<T> Sealed for ndarray::OwnedArcRepr<T> {}
}

impl<T: Element> OwnedData for OwnedRepr<T> {
    fn access<D: Dimension>(_: &ArrayBase<Self, D>) -> Access {
        Access::Exclusive
    }
}

impl<T: Element> OwnedData for OwnedArcRepr<T> {
    fn access<D: Dimension>(array: &ArrayBase<Self, D>) -> Access {
        // ArcArray writes copy on write (`make_mut`), so other clones only ever read these
        // elements: shared means read-only, unique means ours alone.
        if array.is_unique() {
            Access::Exclusive
        } else {
            Access::ReadOnly
        }
    }
}

/// An ndarray array owned by an export: the [`TensorStorage`] behind
/// [`ExportBuilder::from_ndarray`]. `data` is the lowest element the array touches (below the
/// first one when strides are negative), and its size the span the strides reach.
pub struct ArrayStorage<S: ndarray::RawData, D> {
    array: ArrayBase<S, D>,
    /// Elements from the lowest touched one to the first (logical) one.
    below_first: usize,
    /// Elements from the lowest touched one to one past the highest (0 when empty).
    span: usize,
}

impl<S: ndarray::RawData, D> core::fmt::Debug for ArrayStorage<S, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ArrayStorage")
            .field("below_first", &self.below_first)
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

impl<S, D> ArrayStorage<S, D>
where
    S: OwnedData,
    S::Elem: Element,
    D: Dimension,
{
    fn new(array: ArrayBase<S, D>) -> Self {
        let (mut below_first, mut span) = (0usize, 1usize);
        if array.is_empty() {
            span = 0;
        } else {
            for (&extent, &stride) in array.shape().iter().zip(array.strides()) {
                // The array's own invariant: its span fits in isize, so no product overflows.
                let reach = (extent - 1) * stride.unsigned_abs();
                span += reach;
                if stride < 0 {
                    below_first += reach;
                }
            }
        }
        Self {
            array,
            below_first,
            span,
        }
    }

    /// The array back (the storage has not been exported).
    pub fn into_inner(self) -> ArrayBase<S, D> {
        self.array
    }
}

// SAFETY: the elements live in the array's heap allocation (a Vec, or a Vec in an Arc), which
// does not move when the array moves; `data_ptr` returns the lowest element the strides
// reach, and `span` elements from it are inside that allocation (the array's own invariant:
// every index it can reach is in its allocation); `access` is exclusive only for an `Array`,
// owned alone, or an `ArcArray` whose Arc is unique (no clone can read it, and none can be
// made but through the export), read-only otherwise (clones copy on write, so they never
// write these elements).
unsafe impl<S, D> TensorStorage for ArrayStorage<S, D>
where
    S: OwnedData,
    S::Elem: Element,
    D: Dimension + Send + 'static,
{
    fn data_ptr(&mut self) -> *mut c_void {
        // `as_ptr` (not `as_mut_ptr`, which unshares an ArcArray by copying it) keeps the
        // allocation's provenance: the array's pointer is derived from its Vec.
        self.array
            .as_ptr()
            .cast_mut()
            .wrapping_sub(self.below_first)
            .cast()
    }
    fn byte_len(&self) -> usize {
        self.span * size_of::<S::Elem>()
    }
    fn access(&self) -> Access {
        S::access(&self.array)
    }
}

impl<S, D> ExportBuilder<ArrayStorage<S, D>>
where
    S: OwnedData,
    S::Elem: Element,
    D: Dimension + Send + 'static,
{
    /// Exports an owned `Array` or an `ArcArray` without a copy, with its shape and strides
    /// (any strides, negative ones included). The export owns the array and its deleter drops
    /// it. A shared `ArcArray` is READ_ONLY.
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    /// use ndarray::{ArcArray, array};
    ///
    /// let a: ArcArray<i32, _> = array![[1, 2], [3, 4]].into_shared();
    /// let keep = a.clone(); // still shared: the export is read-only
    /// let t = ExportBuilder::from_ndarray(a).build()?;
    /// assert!(t.is_read_only());
    /// assert_eq!(t.as_slice::<i32>()?, keep.as_slice().unwrap());
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    #[inline]
    pub fn from_ndarray(array: ArrayBase<S, D>) -> Self {
        let storage = ArrayStorage::new(array);
        let offset = (storage.below_first * size_of::<S::Elem>()) as u64;
        // Compact row-major arrays leave the strides to the builder, which writes them itself
        // on its fast path.
        let strided = !storage.array.is_standard_layout();
        let dims = Dims::collect(
            storage.array.ndim(),
            storage.array.shape().iter().map(|&e| e as i64),
            strided.then(|| storage.array.strides().iter().map(|&s| s as i64)),
        );
        ExportBuilder::with_dims(storage, <S::Elem as Element>::DTYPE, dims, strided)
            .byte_offset(offset)
    }
}

/// For ndarray 0.17 (`ndarray = "0.17.2"`: >= 0.17.2, < 0.18). An `ArrayBase` of another ndarray
/// version is another type to the compiler, which then says the trait bound `ManagedTensor:
/// TryFrom<ArrayBase<…>>` is not satisfied (expected `ndarray::…::ArrayBase`, found `ArrayBase`):
/// `cargo tree -i ndarray` shows the two versions; take the range above (the adapter table of the
/// crate's README names every adapter's range).
impl<S, D> TryFrom<ArrayBase<S, D>> for ManagedTensor
where
    S: OwnedData,
    S::Elem: Element,
    D: Dimension + Send + 'static,
{
    type Error = Error;

    /// [`ExportBuilder::from_ndarray`], built as DLPack 1.3.
    fn try_from(array: ArrayBase<S, D>) -> Result<Self, Error> {
        ExportBuilder::from_ndarray(array).build()
    }
}
