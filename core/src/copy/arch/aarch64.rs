//! aarch64: NEON, part of every aarch64 CPU that Rust's `aarch64-*` targets with `neon` build
//! for. No streaming stores (stable Rust has no intrinsic for them) and no prefetch hint; see
//! [`super::simd`] for the kernels.
// Most intrinsics are safe to call since Rust 1.87, but not on the MSRV (1.85).
#![allow(unused_unsafe)]

use core::arch::aarch64::{
    uint8x16_t, vdupq_n_u8, vextq_u8, vld1q_u8, vreinterpretq_u8_u16, vreinterpretq_u8_u32,
    vreinterpretq_u8_u64, vreinterpretq_u16_u8, vreinterpretq_u32_u8, vreinterpretq_u64_u8,
    vrev64q_u8, vrev64q_u16, vrev64q_u32, vst1q_u8, vzip1q_u8, vzip1q_u16, vzip1q_u32, vzip1q_u64,
    vzip2q_u8, vzip2q_u16, vzip2q_u32, vzip2q_u64,
};

use super::Axis;
use super::reverse::{self, Reverse};
use super::simd::{self, Large, STREAM_BYTES, Vector};

/// One NEON register.
#[derive(Clone, Copy)]
struct Neon(uint8x16_t);

// SAFETY: compiled only with `target_feature = "neon"`.
unsafe impl Vector for Neon {
    const LANES: usize = 1;
    const STREAMS: bool = false;

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: NEON is present.
        Self(unsafe { vdupq_n_u8(0) })
    }
    #[inline(always)]
    unsafe fn load(lo: *const u8, _hi: *const u8) -> Self {
        // SAFETY: 16 readable bytes (contract); `vld1q_u8` needs no alignment.
        Self(unsafe { vld1q_u8(lo) })
    }
    #[inline(always)]
    unsafe fn load_full(p: *const u8) -> Self {
        // SAFETY: as `load`.
        unsafe { Self::load(p, p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: Self) {
        // SAFETY: 16 writable bytes (contract); no alignment needed.
        unsafe { vst1q_u8(p, v.0) }
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
        // SAFETY: NEON is present; reinterpretations change no bits.
        Self(unsafe {
            match W {
                1 => vzip1q_u8(a, b),
                2 => vreinterpretq_u8_u16(vzip1q_u16(
                    vreinterpretq_u16_u8(a),
                    vreinterpretq_u16_u8(b),
                )),
                4 => vreinterpretq_u8_u32(vzip1q_u32(
                    vreinterpretq_u32_u8(a),
                    vreinterpretq_u32_u8(b),
                )),
                _ => vreinterpretq_u8_u64(vzip1q_u64(
                    vreinterpretq_u64_u8(a),
                    vreinterpretq_u64_u8(b),
                )),
            }
        })
    }
    #[inline(always)]
    unsafe fn zip_hi<const W: usize>(a: Self, b: Self) -> Self {
        let (a, b) = (a.0, b.0);
        // SAFETY: NEON is present; reinterpretations change no bits.
        Self(unsafe {
            match W {
                1 => vzip2q_u8(a, b),
                2 => vreinterpretq_u8_u16(vzip2q_u16(
                    vreinterpretq_u16_u8(a),
                    vreinterpretq_u16_u8(b),
                )),
                4 => vreinterpretq_u8_u32(vzip2q_u32(
                    vreinterpretq_u32_u8(a),
                    vreinterpretq_u32_u8(b),
                )),
                _ => vreinterpretq_u8_u64(vzip2q_u64(
                    vreinterpretq_u64_u8(a),
                    vreinterpretq_u64_u8(b),
                )),
            }
        })
    }
}

// SAFETY: as above.
unsafe impl Reverse for Neon {
    #[inline(always)]
    unsafe fn reverse<const W: usize>(v: Self) -> Self {
        let v = v.0;
        // SAFETY: NEON is present. Each 8-byte half reversed, then the halves swapped.
        Self(unsafe {
            let halves = match W {
                1 => vrev64q_u8(v),
                2 => vreinterpretq_u8_u16(vrev64q_u16(vreinterpretq_u16_u8(v))),
                4 => vreinterpretq_u8_u32(vrev64q_u32(vreinterpretq_u32_u8(v))),
                _ => v,
            };
            vextq_u8::<8>(halves, halves)
        })
    }
    #[inline(always)]
    unsafe fn prefetch_near(_p: *const u8) {}
}

/// The NEON transpose of `outer × rows × inner` (the source contiguous along `rows`) for 1-,
/// 2-, 4- and 8-byte elements; `false` for other element sizes.
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
        in_place: false,
    };
    // SAFETY: forwarded contract; NEON is present.
    unsafe { simd::transpose_any::<Neon>(outer, rows, inner, elem, src, dst, large) }
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
    // SAFETY: forwarded contract; NEON is present.
    unsafe { reverse::reverse_any::<Neon>(outer, inner, elem, src, dst, STREAM_BYTES) }
}

/// Every kernel this CPU can run, for the exactness tests.
#[cfg(all(test, feature = "alloc"))]
pub(super) fn kernels()
-> alloc::vec::Vec<(&'static str, simd::TransposeFn, Option<reverse::ReverseFn>)> {
    alloc::vec![(
        "neon",
        simd::transpose_any::<Neon>,
        Some(reverse::reverse_any::<Neon>)
    )]
}
