//! wasm32 built with `+simd128` (without it the portable kernels run). WebAssembly has no
//! streaming stores or prefetch hints; see [`super::simd`] and [`super::reverse`] for the kernels.
//!
//! Transposes take micro-tiles in place ([`Large::in_place`]: each 16-byte block loaded from the
//! source columns and stored into the destination rows, no staging), in strips, never panels,
//! for 1-, 2-, 4- and 8-byte elements: the npm package is built at opt-level "s", where each
//! staged 64-byte line would be a `memory.copy` call, and panels would add wasm for nothing
//! (BENCHMARKS.md, "The npm package's wasm" and "How the copy kernels' constants are chosen").
// The shuffles are safe to call since Rust 1.86 where simd128 is enabled, but not on the MSRV.
#![allow(unused_unsafe)]

use core::arch::wasm32::{
    u8x16_shuffle, u8x16_splat, u16x8_shuffle, u32x4_shuffle, u64x2_shuffle, v128, v128_load,
    v128_store,
};

use super::Axis;
use super::reverse::{self, Reverse};
use super::simd::{self, Large, STREAM_BYTES, Vector};

/// One simd128 value.
#[derive(Clone, Copy)]
struct Simd128(v128);

// SAFETY: compiled only with `target_feature = "simd128"`.
unsafe impl Vector for Simd128 {
    const LANES: usize = 1;
    const STREAMS: bool = false;

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: simd128 is enabled (safe since Rust 1.86; the block is for the MSRV).
        Self(unsafe { u8x16_splat(0) })
    }
    #[inline(always)]
    unsafe fn load(lo: *const u8, _hi: *const u8) -> Self {
        // SAFETY: 16 readable bytes (contract); wasm loads need no alignment.
        Self(unsafe { v128_load(lo.cast()) })
    }
    #[inline(always)]
    unsafe fn load_full(p: *const u8) -> Self {
        // SAFETY: as `load`.
        unsafe { Self::load(p, p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: Self) {
        // SAFETY: 16 writable bytes (contract); wasm stores need no alignment.
        unsafe { v128_store(p.cast(), v.0) }
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: Self) {
        // SAFETY: as `store`.
        unsafe { Self::store(p, v) }
    }
    #[inline(always)]
    unsafe fn fence() {}
    #[inline(always)]
    unsafe fn prefetch(_p: *const u8) {}
    #[inline(always)]
    unsafe fn zip_lo<const W: usize>(a: Self, b: Self) -> Self {
        let (a, b) = (a.0, b.0);
        // SAFETY: simd128 is enabled (safe since Rust 1.86; the block is for the MSRV).
        Self(unsafe {
            match W {
                1 => u8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(a, b),
                2 => u16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(a, b),
                4 => u32x4_shuffle::<0, 4, 1, 5>(a, b),
                _ => u64x2_shuffle::<0, 2>(a, b),
            }
        })
    }
    #[inline(always)]
    unsafe fn zip_hi<const W: usize>(a: Self, b: Self) -> Self {
        let (a, b) = (a.0, b.0);
        // SAFETY: simd128 is enabled (safe since Rust 1.86; the block is for the MSRV).
        Self(unsafe {
            match W {
                1 => u8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(
                    a, b,
                ),
                2 => u16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(a, b),
                4 => u32x4_shuffle::<2, 6, 3, 7>(a, b),
                _ => u64x2_shuffle::<1, 3>(a, b),
            }
        })
    }
}

// SAFETY: as above.
unsafe impl Reverse for Simd128 {
    #[inline(always)]
    unsafe fn reverse<const W: usize>(v: Self) -> Self {
        let v = v.0;
        // SAFETY: simd128 is enabled (safe since Rust 1.86; the block is for the MSRV).
        Self(unsafe {
            match W {
                1 => u8x16_shuffle::<15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>(v, v),
                2 => u16x8_shuffle::<7, 6, 5, 4, 3, 2, 1, 0>(v, v),
                4 => u32x4_shuffle::<3, 2, 1, 0>(v, v),
                _ => u64x2_shuffle::<1, 0>(v, v),
            }
        })
    }
    #[inline(always)]
    unsafe fn prefetch_near(_p: *const u8) {}
}

/// The simd128 transpose of `outer × rows × inner` (the source contiguous along `rows`) for 1-,
/// 2-, 4- and 8-byte elements, micro-tiles in place (see the module's documentation); `false`
/// for other element sizes.
///
/// # Safety
/// As [`crate::copy::kernels::transpose`].
pub(in crate::copy) unsafe fn transpose(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
) -> bool {
    // No streaming stores on this target ([`Vector::STREAMS`]), so no panels either.
    let large = Large {
        stream_from: STREAM_BYTES,
        panels: false,
        in_place: true,
    };
    // SAFETY: forwarded contract; simd128 is enabled.
    unsafe { simd::transpose_any::<Simd128>(outer, rows, inner, elem, src, dst, large) }
}

/// Reversed rows (`inner.stride == −elem`) of every plane of `outer` for 1-, 2-, 4- and 8-byte
/// elements; `false` for other sizes.
///
/// # Safety
/// Every row's source elements are readable; `dst` is writable for `outer × inner × elem`
/// bytes and does not overlap the source.
pub(in crate::copy) unsafe fn reverse_rows(
    outer: &[Axis],
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
) -> bool {
    // SAFETY: forwarded contract; simd128 is enabled.
    unsafe { reverse::reverse_any::<Simd128>(outer, inner, elem, src, dst, STREAM_BYTES) }
}

/// Every kernel this target runs, for the exactness tests.
#[cfg(all(test, feature = "alloc"))]
pub(super) fn kernels()
-> alloc::vec::Vec<(&'static str, simd::TransposeFn, Option<reverse::ReverseFn>)> {
    alloc::vec![(
        "simd128",
        simd::transpose_any::<Simd128>,
        Some(reverse::reverse_any::<Simd128>)
    )]
}
