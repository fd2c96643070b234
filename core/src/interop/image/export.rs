//! An `ImageBuffer` over a `Vec` becomes a compact HWC tensor without a copy.

use alloc::vec::Vec;

use image::{ImageBuffer, Pixel};

use crate::dtype::Element;
use crate::{Error, ExportBuilder, ManagedTensor};

impl<T: Element> ExportBuilder<Vec<T>> {
    /// Exports an image as a compact `(height, width, channels)` tensor, moving its pixel
    /// vector into the export (no copy; the deleter drops it).
    ///
    /// ```
    /// use dlport_core::{DataType, ExportBuilder};
    /// use image::{ImageBuffer, Luma};
    ///
    /// let img = ImageBuffer::<Luma<u16>, _>::from_pixel(3, 2, Luma([500]));
    /// let t = ExportBuilder::from_image(img).read_only(true).build()?;
    /// assert_eq!((t.view().shape(), t.view().dtype()), (&[2i64, 3, 1][..], DataType::UINT16));
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    #[inline]
    pub fn from_image<P>(image: ImageBuffer<P, Vec<T>>) -> Self
    where
        P: Pixel<Subpixel = T>,
    {
        let shape = [
            i64::from(image.height()),
            i64::from(image.width()),
            i64::from(P::CHANNEL_COUNT),
        ];
        // The vector may be longer than the image: the builder checks it holds the shape.
        ExportBuilder::from_vec(image.into_raw(), &shape)
    }
}

/// For image 0.25 (`image = "0.25.8"`: >= 0.25.8, < 0.26). An `ImageBuffer` of another image
/// version is another type to the compiler, which then says the trait bound `ManagedTensor:
/// TryFrom<ImageBuffer<…>>` is not satisfied (expected `image::…::ImageBuffer`, found
/// `ImageBuffer`): `cargo tree -i image` shows the two versions; take the range above (the adapter
/// table of the crate's README names every adapter's range).
impl<P> TryFrom<ImageBuffer<P, Vec<P::Subpixel>>> for ManagedTensor
where
    P: Pixel,
    P::Subpixel: Element,
{
    type Error = Error;

    /// [`ExportBuilder::from_image`], built as DLPack 1.3.
    #[inline]
    fn try_from(image: ImageBuffer<P, Vec<P::Subpixel>>) -> Result<Self, Error> {
        ExportBuilder::from_image(image).build()
    }
}
