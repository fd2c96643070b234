//! DLPack tensors become ndarray views of the same memory: any layout, read; non-overlapping
//! and exclusive, written.

use alloc::format;
use core::ptr::NonNull;

use ndarray::{ArrayBase, ArrayViewD, ArrayViewMutD, Axis, IxDyn, RawData, ShapeBuilder};

use super::super::absolute::{AbsoluteStrides, host_elements, non_overlapping};
use crate::dtype::Element;
use crate::error::{AccessError, DispatchError, ValueRule};
use crate::{Error, ManagedTensor, TensorRef};

/// Shape and strides as ndarray takes them, from the lowest element: extents, the absolute
/// strides, and the axes to invert afterwards (those whose stride is negative).
struct Plan {
    dims: AbsoluteStrides,
    /// Element offset from the first (logical) element down to the lowest one touched.
    below_first: usize,
}

fn plan<T: Element>(view: &TensorRef<'_>) -> Result<(Plan, *mut T), Error> {
    let first = host_elements::<T>(view)?;
    let dims = AbsoluteStrides::of(view);
    let below_first = dims.below_first();
    Ok((Plan { dims, below_first }, first))
}

impl Plan {
    /// The plan taken apart for a view: its shape and absolute strides (moved, not copied), the
    /// pointer to the lowest element, and the axes to flip (bit `i`: axis `i`).
    fn into_parts<T>(self, first: *mut T) -> (ndarray::StrideShape<IxDyn>, *mut T, u64) {
        let empty = self.dims.is_empty();
        let negative = self.dims.negative();
        let (extents, strides) = self.dims.into_ix();
        if empty {
            // No element is reached: ndarray's own compact strides are as good as any.
            (extents.into(), NonNull::dangling().as_ptr(), negative)
        } else {
            let low = first.wrapping_sub(self.below_first);
            (extents.strides(strides), low, negative)
        }
    }
}

/// Flips the axes whose DLPack stride is negative (bit `i`: axis `i`).
fn flip<S: RawData>(array: &mut ArrayBase<S, IxDyn>, mut negative: u64) {
    while negative != 0 {
        array.invert_axis(Axis(negative.trailing_zeros() as usize));
        negative &= negative - 1;
    }
}

impl<'a> TensorRef<'a> {
    /// The tensor as an ndarray view of the same memory, with its shape and strides: any
    /// layout DLPack can express, negative and zero (broadcast) strides included.
    ///
    /// Errors: [`AccessError::NotHostAccessible`], [`AccessError::DtypeMismatch`],
    /// [`AccessError::Misaligned`].
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    ///
    /// // One row broadcast to three (stride 0), as NumPy's broadcast_to exports it.
    /// let t = ExportBuilder::from_vec(vec![1u8, 2, 3], &[3, 3]).strides(&[0, 1]).build()?;
    /// let v = t.view().as_ndarray::<u8>()?;
    /// assert_eq!(v, ndarray::array![[1u8, 2, 3], [1, 2, 3], [1, 2, 3]].into_dyn());
    /// assert_eq!(v.strides(), &[0, 1]);
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn as_ndarray<T: Element>(&self) -> Result<ArrayViewD<'a, T>, Error> {
        let (plan, first) = plan::<T>(self)?;
        let (shape, low, negative) = plan.into_parts(first);
        // SAFETY: `host_elements` checked the memory is host-readable, of type T and aligned;
        // validation proved every element the shape and strides reach lies in
        // `[data + byte_offset + span.lo, + span.hi)`, inside the address space, so from the
        // lowest element (`low`, from `into_parts`) the absolute strides reach only those elements, and the span
        // fits in isize; strides are non-negative; the TensorRef's contract keeps the bytes
        // alive and readable for 'a. An empty tensor starts from an aligned dangling pointer.
        let mut array = unsafe { ArrayViewD::from_shape_ptr(shape, low) };
        flip(&mut array, negative);
        Ok(array)
    }
}

impl ManagedTensor {
    /// [`TensorRef::as_ndarray`] of this tensor: a read-only ndarray view of its memory, any
    /// layout.
    ///
    /// ```
    /// use dlport_core::ManagedTensor;
    /// use half::f16;
    ///
    /// let a = ndarray::Array::from_elem((2, 2), f16::from_f32(1.5));
    /// let t = ManagedTensor::try_from(a)?;
    /// assert_eq!(t.as_ndarray::<f16>()?[[1, 1]], f16::from_f32(1.5));
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn as_ndarray<T: Element>(&self) -> Result<ArrayViewD<'_, T>, Error> {
        self.view().as_ndarray()
    }

    /// A mutable ndarray view, only with proof that nobody else touches the memory (dlport's
    /// aliasing model, [`Access`](crate::backend::Access)): the tensor is exclusive (dlport's
    /// export of an owned array or vector, a producer's IS_COPIED, or `unsafe
    /// assume_exclusive`) and no two indices reach the same element.
    ///
    /// Errors: [`AccessError::ReadOnly`], [`AccessError::NotExclusive`], the errors of
    /// [`as_ndarray`](Self::as_ndarray), and [`DispatchError::InvalidInput`] naming the shape
    /// and strides when two indices share an element (zero or overlapping strides).
    ///
    /// ```
    /// use dlport_core::ManagedTensor;
    /// use ndarray::array;
    ///
    /// let mut t = ManagedTensor::try_from(array![[1i64, 2], [3, 4]].reversed_axes())?;
    /// t.as_ndarray_mut::<i64>()?[[0, 1]] = 30;
    /// assert_eq!(t.as_ndarray::<i64>()?, array![[1i64, 30], [2, 4]].into_dyn());
    ///
    /// // A legacy tensor carries no flags, so nothing proves it exclusive: refused …
    /// let raw = dlport_core::ExportBuilder::from_vec(vec![0u8; 4], &[4]).build_legacy()?;
    /// let mut shared = unsafe { ManagedTensor::from_raw(raw.into_raw()) }?;
    /// assert!(shared.as_ndarray_mut::<u8>().is_err());
    /// // … until its holder vouches for it (we made it: nobody else has it).
    /// unsafe { shared.assume_exclusive()? };
    /// shared.as_ndarray_mut::<u8>()?.fill(7);
    /// assert_eq!(shared.as_slice::<u8>()?, [7; 4]);
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn as_ndarray_mut<T: Element>(&mut self) -> Result<ArrayViewMutD<'_, T>, Error> {
        if self.is_read_only() {
            return Err(Error::Access(AccessError::ReadOnly));
        }
        if !self.is_exclusive() {
            return Err(Error::Access(AccessError::NotExclusive {
                access: self.access(),
            }));
        }
        let view = self.view();
        let (plan, first) = plan::<T>(&view)?;
        if !non_overlapping(&plan.dims) {
            return Err(Error::Dispatch(DispatchError::invalid_input(
                &ValueRule {
                    field: "strides",
                    expected: "non-overlapping (no two indices at one element) for a mutable \
                               ndarray view: copy the tensor, or take a read-only view",
                },
                &format!("{:?} (shape {:?})", view.raw_strides(), view.shape()),
            )));
        }
        let (shape, low, negative) = plan.into_parts(first);
        // SAFETY: as in `as_ndarray` for the reach of the pointer; in addition the tensor is
        // exclusive (checked above: nobody else reads or writes its bytes while `self` lives,
        // and `&mut self` makes this the only borrow through it), not read-only, and no two
        // indices reach one element (`non_overlapping`), so the view aliases nothing. The
        // pointer is derived from the producer's `data`, keeping its provenance for writes.
        let mut array = unsafe { ArrayViewMutD::from_shape_ptr(shape, low) };
        flip(&mut array, negative);
        Ok(array)
    }
}
