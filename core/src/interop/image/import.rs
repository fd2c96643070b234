//! HWC tensors become `ImageBuffer`s: borrowed or owned without a copy when compact, copied
//! once otherwise.

use alloc::format;
use alloc::vec::Vec;
use core::marker::PhantomData;

use image::{ImageBuffer, Pixel};

use crate::dtype::Element;
use crate::error::{DispatchError, ValueRule};
use crate::{Error, ManagedTensor, TensorRef};

const HWC: &ValueRule = &ValueRule {
    field: "shape",
    expected: "(height, width, channels) with the pixel type's channel count, or (height, width) \
               for one-channel pixels, height and width at most u32::MAX",
};

/// `(width, height)` of an HWC tensor holding `P` pixels, or the error naming the shape.
fn hwc<P: Pixel>(view: &TensorRef<'_>) -> Result<(u32, u32), Error> {
    let shape = view.shape();
    let channels = i64::from(P::CHANNEL_COUNT);
    let fits = match *shape {
        [_, _, c] => c == channels,
        [_, _] => channels == 1,
        _ => false,
    };
    let dims = fits
        .then(|| Some((u32::try_from(shape[1]).ok()?, u32::try_from(shape[0]).ok()?)))
        .flatten();
    dims.ok_or_else(|| {
        Error::Dispatch(DispatchError::invalid_input(
            HWC,
            &format!("{shape:?} (the pixel type has {channels} channels)"),
        ))
    })
}

/// The pixels of an imported tensor, owned: the [`ManagedTensor`] itself, read as a slice. The
/// container of [`ManagedTensor::into_image`]'s `ImageBuffer`; dropping it releases the tensor.
pub struct TensorPixels<T> {
    tensor: ManagedTensor,
    _elem: PhantomData<T>,
}

impl<T: Element> TensorPixels<T> {
    /// The tensor back.
    pub fn into_tensor(self) -> ManagedTensor {
        self.tensor
    }
}

impl<T> core::fmt::Debug for TensorPixels<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("TensorPixels").field(&self.tensor).finish()
    }
}

impl<T: Element> core::ops::Deref for TensorPixels<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // `into_image` checked that the tensor is a row-major slice of T; nothing about it
        // changes while we own it, so this cannot fail.
        self.tensor.as_slice::<T>().unwrap_or(&[])
    }
}

impl<'a> TensorRef<'a> {
    /// The tensor as an image, copied once into a new pixel vector: any HWC layout (strided,
    /// flipped, permuted, broadcast), what `image` cannot borrow. A compact tensor borrows
    /// without a copy through [`ManagedTensor::as_image`].
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    /// use image::Rgb;
    ///
    /// // A planar (CHW) 1×2 image, seen channel-last: strided, so image needs a copy.
    /// let planar = vec![10u8, 11, 20, 21, 30, 31]; // R plane, G plane, B plane
    /// let t = ExportBuilder::from_vec(planar, &[1, 2, 3]).strides(&[2, 1, 2]).build()?;
    /// let img = t.view().to_image::<Rgb<u8>>()?;
    /// assert_eq!(img.get_pixel(1, 0).0, [11, 21, 31]);
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn to_image<P>(&self) -> Result<ImageBuffer<P, Vec<P::Subpixel>>, Error>
    where
        P: Pixel,
        P::Subpixel: Element,
    {
        let (width, height) = hwc::<P>(self)?;
        let pixels = self.to_vec::<P::Subpixel>()?;
        ImageBuffer::from_raw(width, height, pixels).ok_or_else(|| too_small(self))
    }

    /// A compact HWC tensor as an image borrowing its memory (no copy).
    ///
    /// Errors: the shape is not HWC for `P` ([`DispatchError::InvalidInput`] naming it), and the
    /// errors of [`as_slice`](TensorRef::as_slice) (a strided layout is
    /// [`AccessError::NotContiguous`](crate::error::AccessError::NotContiguous): copy it with
    /// [`to_image`](Self::to_image)).
    pub fn as_image<P>(&self) -> Result<ImageBuffer<P, &'a [P::Subpixel]>, Error>
    where
        P: Pixel,
        P::Subpixel: Element,
    {
        let (width, height) = hwc::<P>(self)?;
        let pixels = self.as_slice::<P::Subpixel>()?;
        ImageBuffer::from_raw(width, height, pixels).ok_or_else(|| too_small(self))
    }
}

impl ManagedTensor {
    /// [`TensorRef::as_image`] of this tensor: an image borrowing its memory, no copy.
    pub fn as_image<P>(&self) -> Result<ImageBuffer<P, &[P::Subpixel]>, Error>
    where
        P: Pixel,
        P::Subpixel: Element,
    {
        self.view().as_image()
    }

    /// The tensor moved into an image that owns it (no copy): a compact HWC tensor of `P`'s
    /// subpixels. On error the tensor is released.
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    /// use image::Luma;
    ///
    /// let t = ExportBuilder::from_vec(vec![0.5f32; 6], &[2, 3]).build()?;
    /// let img = t.into_image::<Luma<f32>>()?; // owns the tensor
    /// assert_eq!((img.width(), img.height()), (3, 2));
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn into_image<P>(self) -> Result<ImageBuffer<P, TensorPixels<P::Subpixel>>, Error>
    where
        P: Pixel,
        P::Subpixel: Element,
    {
        let (width, height) = hwc::<P>(&self.view())?;
        self.as_slice::<P::Subpixel>()?;
        let shape = [height.into(), width.into(), i64::from(P::CHANNEL_COUNT)];
        let pixels = TensorPixels {
            tensor: self,
            _elem: PhantomData,
        };
        ImageBuffer::from_raw(width, height, pixels).ok_or_else(|| too_small_shape(&shape))
    }
}

/// An HWC shape whose element count overflows what `image` indexes (it counts in `usize`
/// from `u32` extents): unreachable for a validated tensor, reported rather than assumed.
#[cold]
fn too_small(view: &TensorRef<'_>) -> Error {
    too_small_shape(view.shape())
}

#[cold]
fn too_small_shape(shape: &[i64]) -> Error {
    Error::Dispatch(DispatchError::invalid_input(
        HWC,
        &format!("{shape:?} (more pixels than image can index)"),
    ))
}
