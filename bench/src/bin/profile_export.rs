//! A loop of exports for profilers (`valgrind --tool=callgrind`).
//!
//! `profile_export [N] [dlport | dlpark | floor | legacy | convert | foreign | wrap]`: N exports
//! (100,000 by default) of a `Vec<f32>` of 120 elements, each released: by dlport's
//! `ExportBuilder`, by dlpark 0.10, by the hand-written floor
//! (`dlport_bench::import_export::floor_export`); or, with `legacy`, a legacy export of a `Vec<u8>`
//! of 64 and, with `convert`, the same converted to the versioned form before the release (the
//! conversion costs `convert - legacy`); `foreign` imports a legacy tensor dlport did not make
//! and `wrap` converts it too (`wrap - foreign`). Each iteration is one call of a function
//! compiled on its own (`#[inline(never)]`), as in a user's program. Instructions per export =
//! the difference of two runs' totals divided by the difference of their N.
use std::hint::black_box;

use dlport_bench::import_export::{LegacyProducer, dlpark_export, floor_export, release};
use dlport_core::abi::DLManagedTensor;
use dlport_core::{ExportBuilder, ManagedTensor};

#[inline(never)]
fn dlport() {
    let raw = ExportBuilder::from_vec(vec![1.0f32; 120], &[120])
        .build()
        .unwrap()
        .into_raw();
    // SAFETY: our own export, released once.
    unsafe { black_box(raw).release() };
}

#[inline(never)]
fn dlpark() {
    drop(black_box(dlpark_export(vec![1.0f32; 120])));
}

#[inline(never)]
fn floor() {
    let m = floor_export(vec![1.0f32; 120]);
    // SAFETY: our floor export, released once.
    unsafe { release(black_box(m)) };
}

#[inline(never)]
fn legacy() {
    black_box(
        ExportBuilder::from_vec(vec![0u8; 64], &[64])
            .build_legacy()
            .unwrap(),
    );
}

#[inline(never)]
fn convert() {
    let t = ExportBuilder::from_vec(vec![0u8; 64], &[64])
        .build_legacy()
        .unwrap();
    black_box(t.into_versioned().unwrap());
}

#[inline(never)]
fn foreign(p: *mut DLManagedTensor) {
    // SAFETY: the producer outlives the loop; its deleter only counts.
    black_box(unsafe { ManagedTensor::from_raw_legacy(black_box(p)) }.unwrap());
}

#[inline(never)]
fn wrap(p: *mut DLManagedTensor) {
    // SAFETY: as above.
    let t = unsafe { ManagedTensor::from_raw_legacy(black_box(p)) }.unwrap();
    black_box(t.into_versioned().unwrap());
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let who = args.next().unwrap_or_else(|| "dlport".into());
    let mut producer = LegacyProducer::new();
    let p = producer.ptr();
    let f: &dyn Fn() = match who.as_str() {
        "dlport" => &dlport,
        "dlpark" => &dlpark,
        "floor" => &floor,
        "legacy" => &legacy,
        "convert" => &convert,
        "foreign" => &move || foreign(p),
        "wrap" => &move || wrap(p),
        other => panic!(
            "unknown exporter {other}: dlport, dlpark, floor, legacy, convert, foreign or wrap"
        ),
    };
    for _ in 0..n {
        f();
    }
}
