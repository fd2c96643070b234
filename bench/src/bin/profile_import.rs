//! A loop of imports for profilers (`valgrind --tool=callgrind`).
//!
//! `profile_import [N] [dlport | dlpark | plain | floor] [NDIM]`: N imports (100,000 by
//! default) of a versioned float32 tensor of NDIM (4 by default) dimensions, each validated,
//! read (shape, strides, dtype) and released, by dlport, by dlpark 0.10, by the plain baseline
//! with dlport's checks (`dlport_bench::import_export::plain_import`), or by the floor (read the
//! fields, call the deleter). Each iteration is one call of a function compiled on its own
//! (`#[inline(never)]`), as in a user's program. Instructions per import = the difference of
//! two runs' totals divided by the difference of their N.
use std::hint::black_box;

use dlport_bench::import_export::{Producer, floor_import, plain_import, release};
use dlport_core::ManagedTensor;
use dlport_core::abi::DLManagedTensorVersioned;

#[inline(never)]
fn dlport(ptr: *mut DLManagedTensorVersioned) {
    // SAFETY: the producer outlives the loop; its deleter only counts.
    let t = unsafe { ManagedTensor::from_raw_versioned(black_box(ptr)) }.unwrap();
    let v = t.view();
    black_box((v.shape(), v.raw_strides(), v.dtype()));
}

#[inline(never)]
fn dlpark(ptr: *mut DLManagedTensorVersioned) {
    // SAFETY: identical layout; the producer outlives the loop.
    let t = unsafe { dlpark::versioned::Dlpack::from_raw(black_box(ptr).cast()) }.unwrap();
    let v = t.validate().unwrap();
    black_box((v.shape(), v.strides(), v.dtype()));
}

#[inline(never)]
fn plain(ptr: *mut DLManagedTensorVersioned) {
    let m = black_box(ptr);
    // SAFETY: as above.
    let (_, shape, strides, dtype) = unsafe { plain_import(m) }.unwrap();
    black_box((shape, strides, dtype));
    // SAFETY: imported above, released once.
    unsafe { release(m) };
}

#[inline(never)]
fn floor(ptr: *mut DLManagedTensorVersioned) {
    // SAFETY: as above.
    unsafe { floor_import(black_box(ptr)) };
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let who = args.next().unwrap_or_else(|| "dlport".into());
    let ndim: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let mut p = Producer::new(ndim);
    let ptr = p.ptr();
    let f: fn(*mut DLManagedTensorVersioned) = match who.as_str() {
        "dlport" => dlport,
        "dlpark" => dlpark,
        "plain" => plain,
        "floor" => floor,
        other => panic!("unknown importer {other}: dlport, dlpark, plain or floor"),
    };
    for _ in 0..n {
        f(ptr);
    }
}
