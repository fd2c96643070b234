//! A loop of adapter exports for profilers (`valgrind --tool=callgrind`), each released.
//!
//! `profile_adapters N WHAT`: N exports of a 4×4 `Array2<f32>` (`ndarray-dlport`,
//! `ndarray-dlpark`), of a 64×64 `Rgb<u8>` `ImageBuffer` (`image-dlport`, `image-dlpark`) or of
//! a clone of a 64×64 f32 candle tensor (`candle-dlport`, `candle-dlpark`), by dlport-core's
//! adapter or dlpark 0.10's; `ndarray-none`, `image-none` and `candle-none` make and drop the
//! container alone. Instructions per export = the difference of two runs' totals (N = 20,000
//! and 10,000) divided by 10,000, less the same for `*-none`. Each export is one call of a
//! function compiled on its own (`#[inline(never)]`), as in a user's program.
//!
//! `cargo build --release -p dlport-bench --features adapters --bin profile_adapters`
use std::hint::black_box;

use candle_core::{DType, Device, Tensor};
use dlpark::ffi::DLManagedTensorVersioned as ParkVersioned;
use dlport_core::ManagedTensor;
use image::{ImageBuffer, Rgb};
use ndarray::Array2;

type Image = ImageBuffer<Rgb<u8>, Vec<u8>>;

/// dlport's export of `x`, released.
#[inline(never)]
fn dlport<T>(x: T)
where
    ManagedTensor: TryFrom<T, Error = dlport_core::Error>,
{
    drop(black_box(ManagedTensor::try_from(x).unwrap()));
}

/// dlpark's export of an ndarray array or a candle tensor, released.
#[inline(never)]
fn dlpark<T>(x: T)
where
    dlpark::allocation::dynamic::Initialized<ParkVersioned>: TryFrom<Box<T>>,
    <dlpark::allocation::dynamic::Initialized<ParkVersioned> as TryFrom<Box<T>>>::Error:
        std::fmt::Debug,
{
    let init: dlpark::allocation::dynamic::Initialized<ParkVersioned> =
        Box::new(x).try_into().unwrap();
    // SAFETY: dlpark's builder filled every field from the container it owns.
    drop(black_box(unsafe { init.finish() }))
}

/// dlpark's export of an image (its fixed-dimension builder), released.
#[inline(never)]
fn dlpark_image(x: Image) {
    let init: dlpark::allocation::fixed::Initialized<ParkVersioned, 3> =
        Box::new(x).try_into().unwrap();
    // SAFETY: as above.
    drop(black_box(unsafe { init.finish() }))
}

/// The container alone, dropped.
#[inline(never)]
fn none<T>(x: T) {
    drop(black_box(x));
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let what = args.next().unwrap_or_else(|| "ndarray-dlport".into());
    let x = Tensor::zeros((64, 64), DType::F32, &Device::Cpu).unwrap();
    let array = || Array2::<f32>::zeros((4, 4));
    let image = || Image::new(64, 64);
    for _ in 0..n {
        match what.as_str() {
            "ndarray-dlport" => dlport(array()),
            "ndarray-dlpark" => dlpark(array()),
            "ndarray-none" => none(array()),
            "image-dlport" => dlport(image()),
            "image-dlpark" => dlpark_image(image()),
            "image-none" => none(image()),
            "candle-dlport" => dlport(x.clone()),
            "candle-dlpark" => dlpark(x.clone()),
            "candle-none" => none(x.clone()),
            other => {
                panic!("unknown case {other}: {{ndarray,image,candle}}-{{dlport,dlpark,none}}")
            }
        }
    }
}
