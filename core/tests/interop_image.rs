//! The image adapter against the real crate: HWC both ways, borrowed, owned and copied.
#![cfg(feature = "image")]

use dlport_core::backend::Access;
use dlport_core::{DataType, ExportBuilder, ManagedTensor};
use image::{ImageBuffer, Luma, LumaA, Rgb, Rgba};

#[test]
fn images_export_as_compact_hwc_without_a_copy() {
    let img = ImageBuffer::<Rgba<u8>, _>::from_fn(5, 3, |x, y| Rgba([x as u8, y as u8, 1, 255]));
    let ptr = img.as_raw().as_ptr() as usize;
    let expected = img.clone();
    let t = ManagedTensor::try_from(img).unwrap();
    let v = t.view();
    assert_eq!(v.shape(), &[3, 5, 4]);
    assert_eq!(v.raw_strides(), Some(&[20i64, 4, 1][..]));
    assert_eq!(v.dtype(), DataType::UINT8);
    assert_eq!(v.first_element_address(), Some(ptr), "no copy");
    assert_eq!(t.access(), Access::Exclusive);
    assert_eq!(
        t.as_image::<Rgba<u8>>().unwrap(),
        ImageBuffer::from_raw(5, 3, &expected.as_raw()[..]).unwrap()
    );

    let f = ImageBuffer::<Rgb<f32>, _>::from_pixel(2, 2, Rgb([0.5, 0.25, 1.0]));
    let t = ExportBuilder::from_image(f).build_legacy().unwrap();
    assert_eq!(t.view().dtype(), DataType::FLOAT32);
    assert_eq!(
        t.as_image::<Rgb<f32>>().unwrap().get_pixel(1, 1).0,
        [0.5, 0.25, 1.0]
    );

    let l = ImageBuffer::<LumaA<u16>, _>::from_pixel(1, 4, LumaA([1, 2]));
    let t = ManagedTensor::try_from(l).unwrap();
    assert_eq!(t.view().shape(), &[4, 1, 2]);
}

#[test]
fn imports_borrow_own_or_copy() {
    // Borrowed: same memory.
    let t = ExportBuilder::from_vec((0..24u8).collect::<Vec<_>>(), &[2, 4, 3])
        .build()
        .unwrap();
    let img = t.as_image::<Rgb<u8>>().unwrap();
    assert_eq!(
        img.as_raw().as_ptr() as usize,
        t.view().first_element_address().unwrap()
    );
    assert_eq!(img.get_pixel(1, 1).0, [15, 16, 17]);

    // Owned: the image holds the tensor, released with it.
    let addr = t.view().first_element_address();
    let owned = t.into_image::<Rgb<u8>>().unwrap();
    assert_eq!(owned.as_raw().as_ptr() as usize, addr.unwrap());
    assert_eq!(owned.get_pixel(3, 1).0, [21, 22, 23]);
    let back = owned.into_raw().into_tensor();
    assert_eq!(back.view().shape(), &[2, 4, 3]);

    // One-channel pixels take (height, width) too.
    let t = ExportBuilder::from_vec(vec![1u16, 2, 3, 4, 5, 6], &[2, 3])
        .build()
        .unwrap();
    assert_eq!(t.as_image::<Luma<u16>>().unwrap().get_pixel(2, 1).0, [6]);

    // Copied once: a vertically flipped image (negative row stride).
    let t = ExportBuilder::from_vec((0..12u8).collect::<Vec<_>>(), &[2, 2, 3])
        .strides(&[-6, 3, 1])
        .byte_offset(6)
        .build()
        .unwrap();
    assert_eq!(
        t.as_image::<Rgb<u8>>().unwrap_err().code(),
        17,
        "strided: no borrow"
    );
    let img = t.view().to_image::<Rgb<u8>>().unwrap();
    assert_eq!(img.get_pixel(0, 0).0, [6, 7, 8]);
    assert_eq!(img.get_pixel(1, 1).0, [3, 4, 5]);
}

#[test]
fn wrong_shapes_and_types_are_named() {
    let t = ExportBuilder::from_vec(vec![0u8; 24], &[2, 3, 4])
        .build()
        .unwrap();
    let e = t.as_image::<Rgb<u8>>().unwrap_err();
    assert_eq!(e.code(), 44, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("shape") && msg.contains("[2, 3, 4]") && msg.contains("3 channels"),
        "{msg}"
    );
    let e = t.as_image::<Rgba<u16>>().unwrap_err();
    assert_eq!(e.code(), 15, "{e}");
    let e = t.as_image::<Luma<u8>>().unwrap_err();
    assert_eq!(e.code(), 44, "{e}");
    let t = ExportBuilder::from_vec(vec![0u8; 4], &[4]).build().unwrap();
    assert_eq!(t.into_image::<Luma<u8>>().unwrap_err().code(), 44);
    let t = ExportBuilder::from_vec(vec![0u8; 3], &[1, 1, 1, 3])
        .build()
        .unwrap();
    assert_eq!(t.view().to_image::<Rgb<u8>>().unwrap_err().code(), 44);
}
