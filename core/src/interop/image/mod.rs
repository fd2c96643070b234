//! [`image`] `ImageBuffer`s as HWC tensors, both ways (feature `image`).
//!
//! - **Export**: [`ExportBuilder::from_image`](crate::ExportBuilder::from_image) (or
//!   `ManagedTensor::try_from(image)`) moves the image's `Vec` into the export: a compact
//!   `(height, width, channels)` tensor of the subpixel type, no copy.
//! - **Import, no copy**: [`ManagedTensor::as_image`](crate::ManagedTensor::as_image) borrows a
//!   row-major compact HWC tensor (or `(height, width)` for one-channel pixels) as an
//!   `ImageBuffer<P, &[_]>`; [`ManagedTensor::into_image`](crate::ManagedTensor::into_image)
//!   moves the tensor into an `ImageBuffer<P, TensorPixels<_>>` that owns it (the producer's
//!   deleter runs when the image is dropped).
//! - **Import, one copy**: [`TensorRef::to_image`](crate::TensorRef::to_image) takes any HWC
//!   layout (strided, flipped, a channel-last view of a CHW tensor: what `image` cannot
//!   borrow) into an `ImageBuffer<P, Vec<_>>`, copying once.
//!
//! ```
//! use dlport_core::ManagedTensor;
//! use image::{ImageBuffer, Rgb};
//!
//! let img = ImageBuffer::<Rgb<u8>, _>::from_fn(4, 2, |x, y| Rgb([x as u8, y as u8, 7]));
//! let t = ManagedTensor::try_from(img)?; // no copy
//! assert_eq!(t.view().shape(), &[2, 4, 3]); // height, width, channels
//!
//! let back = t.as_image::<Rgb<u8>>()?; // no copy
//! assert_eq!(back.get_pixel(3, 1).0, [3, 1, 7]);
//! # Ok::<(), dlport_core::Error>(())
//! ```

mod export;
mod import;

pub use import::TensorPixels;
