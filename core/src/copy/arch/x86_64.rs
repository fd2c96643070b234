//! x86-64: SSE2, part of every x86-64 CPU, and AVX2, chosen at run time
//! (`is_x86_feature_detected!`, with the `std` feature; without it, only when the build enables
//! AVX2). Streaming stores for large destinations; see [`super::simd`] and [`super::reverse`] for the kernels.
// Most intrinsics are safe to call since Rust 1.87, but not on the MSRV (1.85).
#![allow(unused_unsafe)]

use core::arch::x86_64::{
    __m128i, __m256i, _MM_HINT_T0, _MM_HINT_T1, _mm_loadu_si128, _mm_or_si128, _mm_prefetch,
    _mm_setzero_si128, _mm_shuffle_epi32, _mm_shufflehi_epi16, _mm_shufflelo_epi16, _mm_slli_epi16,
    _mm_srli_epi16, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpackhi_epi16, _mm_unpackhi_epi32,
    _mm_unpackhi_epi64, _mm_unpacklo_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    _mm_unpacklo_epi64, _mm256_castsi128_si256, _mm256_inserti128_si256, _mm256_permute4x64_epi64,
    _mm256_setr_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_shuffle_epi32,
    _mm256_storeu_si256, _mm256_unpackhi_epi8, _mm256_unpackhi_epi16, _mm256_unpackhi_epi32,
    _mm256_unpackhi_epi64, _mm256_unpacklo_epi8, _mm256_unpacklo_epi16, _mm256_unpacklo_epi32,
    _mm256_unpacklo_epi64,
};

use super::Axis;
use super::reverse::{self, Reverse};
use super::simd::{self, Large, STREAM_BYTES, Vector};

/// Orders earlier streaming stores before later stores: `sfence`, or under Miri (which has no
/// `sfence` and models streaming stores as plain ones) a sequentially consistent fence.
#[inline(always)]
fn sfence() {
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(not(miri))]
    // SAFETY: SSE2 is part of x86-64; a fence has no other effect.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
}

/// One SSE2 register.
#[derive(Clone, Copy)]
struct Sse2(__m128i);

/// One AVX2 register: two 16-byte lanes.
#[derive(Clone, Copy)]
struct Avx2(__m256i);

// SAFETY: SSE2 is part of every x86-64 CPU.
unsafe impl Vector for Sse2 {
    const LANES: usize = 1;
    const STREAMS: bool = true;

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: SSE2 is present.
        Self(unsafe { _mm_setzero_si128() })
    }
    #[inline(always)]
    unsafe fn load(lo: *const u8, _hi: *const u8) -> Self {
        // SAFETY: 16 readable bytes (contract); unaligned load.
        Self(unsafe { _mm_loadu_si128(lo.cast()) })
    }
    #[inline(always)]
    unsafe fn load_full(p: *const u8) -> Self {
        // SAFETY: 16 readable bytes (contract); unaligned load.
        Self(unsafe { _mm_loadu_si128(p.cast()) })
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: Self) {
        // SAFETY: 16 writable bytes (contract); unaligned store.
        unsafe { _mm_storeu_si128(p.cast(), v.0) }
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: Self) {
        // Miri runs no inline assembly (`movntdq`): an aligned plain store there, which also
        // checks the alignment.
        #[cfg(miri)]
        // SAFETY: 16 writable, 16-byte-aligned bytes (contract).
        unsafe {
            p.cast::<__m128i>().write(v.0)
        };
        #[cfg(not(miri))]
        // SAFETY: 16 writable, 16-byte-aligned bytes (contract).
        unsafe {
            core::arch::x86_64::_mm_stream_si128(p.cast(), v.0)
        };
    }
    #[inline(always)]
    unsafe fn fence() {
        sfence();
    }
    #[inline(always)]
    unsafe fn prefetch(p: *const u8) {
        // SAFETY: a hint; it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
    }
    #[inline(always)]
    unsafe fn zip_lo<const W: usize>(a: Self, b: Self) -> Self {
        // SAFETY: SSE2 is present.
        Self(unsafe {
            match W {
                1 => _mm_unpacklo_epi8(a.0, b.0),
                2 => _mm_unpacklo_epi16(a.0, b.0),
                4 => _mm_unpacklo_epi32(a.0, b.0),
                _ => _mm_unpacklo_epi64(a.0, b.0),
            }
        })
    }
    #[inline(always)]
    unsafe fn zip_hi<const W: usize>(a: Self, b: Self) -> Self {
        // SAFETY: SSE2 is present.
        Self(unsafe {
            match W {
                1 => _mm_unpackhi_epi8(a.0, b.0),
                2 => _mm_unpackhi_epi16(a.0, b.0),
                4 => _mm_unpackhi_epi32(a.0, b.0),
                _ => _mm_unpackhi_epi64(a.0, b.0),
            }
        })
    }
}

// SAFETY: as above.
unsafe impl Reverse for Sse2 {
    #[inline(always)]
    unsafe fn reverse<const W: usize>(v: Self) -> Self {
        // SAFETY: SSE2 is present.
        Self(unsafe {
            match W {
                // Quad words swapped, then words within each, then bytes within each word.
                1 | 2 => {
                    let q = _mm_shuffle_epi32::<0b00_01_10_11>(v.0);
                    let w = _mm_shufflehi_epi16::<0b10_11_00_01>(_mm_shufflelo_epi16::<
                        0b10_11_00_01,
                    >(q));
                    if W == 1 {
                        _mm_or_si128(_mm_slli_epi16::<8>(w), _mm_srli_epi16::<8>(w))
                    } else {
                        w
                    }
                }
                4 => _mm_shuffle_epi32::<0b00_01_10_11>(v.0),
                _ => _mm_shuffle_epi32::<0b01_00_11_10>(v.0),
            }
        })
    }
    #[inline(always)]
    unsafe fn prefetch_near(p: *const u8) {
        // SAFETY: a hint; it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
}

// SAFETY: only instantiated inside `#[target_feature(enable = "avx2")]` functions, called
// after `has_avx2()`.
unsafe impl Vector for Avx2 {
    const LANES: usize = 2;
    const STREAMS: bool = true;

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX2 is present (contract).
        Self(unsafe { _mm256_setzero_si256() })
    }
    #[inline(always)]
    unsafe fn load(lo: *const u8, hi: *const u8) -> Self {
        // SAFETY: 16 readable bytes at each (contract); AVX2 is present.
        Self(unsafe {
            _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(lo.cast())),
                _mm_loadu_si128(hi.cast()),
            )
        })
    }
    #[inline(always)]
    unsafe fn load_full(p: *const u8) -> Self {
        // SAFETY: 32 readable bytes (contract); AVX2 is present; unaligned load.
        Self(unsafe { core::arch::x86_64::_mm256_loadu_si256(p.cast()) })
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: Self) {
        // SAFETY: 32 writable bytes (contract); unaligned store.
        unsafe { _mm256_storeu_si256(p.cast(), v.0) }
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: Self) {
        // As for SSE2 under Miri.
        #[cfg(miri)]
        // SAFETY: 32 writable, 32-byte-aligned bytes (contract).
        unsafe {
            p.cast::<__m256i>().write(v.0)
        };
        #[cfg(not(miri))]
        // SAFETY: 32 writable, 32-byte-aligned bytes (contract).
        unsafe {
            core::arch::x86_64::_mm256_stream_si256(p.cast(), v.0)
        };
    }
    #[inline(always)]
    unsafe fn fence() {
        sfence();
    }
    #[inline(always)]
    unsafe fn prefetch(p: *const u8) {
        // SAFETY: a hint; it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
    }
    #[inline(always)]
    unsafe fn zip_lo<const W: usize>(a: Self, b: Self) -> Self {
        // SAFETY: AVX2 is present (contract).
        Self(unsafe {
            match W {
                1 => _mm256_unpacklo_epi8(a.0, b.0),
                2 => _mm256_unpacklo_epi16(a.0, b.0),
                4 => _mm256_unpacklo_epi32(a.0, b.0),
                _ => _mm256_unpacklo_epi64(a.0, b.0),
            }
        })
    }
    #[inline(always)]
    unsafe fn zip_hi<const W: usize>(a: Self, b: Self) -> Self {
        // SAFETY: AVX2 is present (contract).
        Self(unsafe {
            match W {
                1 => _mm256_unpackhi_epi8(a.0, b.0),
                2 => _mm256_unpackhi_epi16(a.0, b.0),
                4 => _mm256_unpackhi_epi32(a.0, b.0),
                _ => _mm256_unpackhi_epi64(a.0, b.0),
            }
        })
    }
}

/// Whether this CPU has AVX2: detected at run time with `std`, decided by the build without.
// SAFETY: as above.
unsafe impl Reverse for Avx2 {
    #[inline(always)]
    unsafe fn reverse<const W: usize>(v: Self) -> Self {
        // SAFETY: AVX2 is present (the trait's contract). Each lane reversed, then the lanes
        // swapped.
        Self(unsafe {
            let lanes = match W {
                1 => _mm256_shuffle_epi8(
                    v.0,
                    _mm256_setr_epi8(
                        15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11,
                        10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
                    ),
                ),
                2 => _mm256_shuffle_epi8(
                    v.0,
                    _mm256_setr_epi8(
                        14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10,
                        11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1,
                    ),
                ),
                4 => _mm256_shuffle_epi32::<0b00_01_10_11>(v.0),
                _ => _mm256_shuffle_epi32::<0b01_00_11_10>(v.0),
            };
            _mm256_permute4x64_epi64::<0b01_00_11_10>(lanes)
        })
    }
    #[inline(always)]
    unsafe fn prefetch_near(p: *const u8) {
        // SAFETY: a hint; it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
}

/// The AVX2 reversal of rows (see [`reverse_rows`]).
///
/// # Safety
/// As [`reverse::reverse_any`]; AVX2 is present.
#[target_feature(enable = "avx2")]
unsafe fn reverse_avx2(
    outer: &[Axis],
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
    stream_from: usize,
) -> bool {
    // SAFETY: forwarded contract; AVX2 is enabled for this function.
    unsafe { reverse::reverse_any::<Avx2>(outer, inner, elem, src, dst, stream_from) }
}

#[inline]
fn has_avx2() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "avx2")
    }
}

/// [`simd::transpose_any`] with AVX2.
///
/// # Safety
/// As [`simd::transpose_any`]; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn transpose_avx2(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
    large: Large,
) -> bool {
    // SAFETY: forwarded contract; AVX2 is present.
    unsafe { simd::transpose_any::<Avx2>(outer, rows, inner, elem, src, dst, large) }
}

/// Whether large streamed transposes of 1- to 4-byte elements go through panels (see
/// [`super::simd`]) on this CPU: on AMD's, not elsewhere. The two orders favour different
/// cache hierarchies (AMD's smaller L2 and large L3 per die favour panels, Intel's larger L2
/// the strips; BENCHMARKS.md, "How the copy kernels' constants are chosen"). Other CPUs take
/// the strips, which need no heap. Asked once (`cpuid` traps to the hypervisor in a virtual
/// machine), then one relaxed load per transpose.
fn panels_pay() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    const UNKNOWN: u8 = 0;
    const NO: u8 = 1;
    const YES: u8 = 2;
    static ANSWER: AtomicU8 = AtomicU8::new(UNKNOWN);
    match ANSWER.load(Ordering::Relaxed) {
        NO => false,
        YES => true,
        _ => {
            let amd = is_amd();
            ANSWER.store(if amd { YES } else { NO }, Ordering::Relaxed);
            amd
        }
    }
}

/// Whether the CPU's vendor string (`cpuid` leaf 0) is "AuthenticAMD"; never under Miri, which
/// has no `cpuid`.
fn is_amd() -> bool {
    #[cfg(miri)]
    {
        false
    }
    #[cfg(not(miri))]
    {
        // SAFETY: `cpuid` is part of every x86-64 CPU, and leaf 0 always exists (safe to call
        // since Rust 1.87, not on the MSRV).
        let r = unsafe { core::arch::x86_64::__cpuid(0) };
        // The vendor string is EBX, EDX, ECX: "Auth" "enti" "cAMD".
        (r.ebx, r.edx, r.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
    }
}

/// The SIMD transpose of `outer × rows × inner` (the source contiguous along `rows`) for 1-,
/// 2-, 4- and 8-byte elements: AVX2 where the CPU has it, SSE2 otherwise. `false` for other
/// element sizes.
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
    let large = Large {
        stream_from: STREAM_BYTES,
        panels: panels_pay(),
        in_place: false,
    };
    if has_avx2() {
        // SAFETY: forwarded contract; AVX2 was detected.
        unsafe { transpose_avx2(outer, rows, inner, elem, src, dst, large) }
    } else {
        // SAFETY: forwarded contract; SSE2 is part of x86-64.
        unsafe { simd::transpose_any::<Sse2>(outer, rows, inner, elem, src, dst, large) }
    }
}

/// Reversed rows (`inner.stride == −elem`) of every plane of `outer` for 1-, 2-, 4- and 8-byte
/// elements (SSE2; the copy is memory-bound, AVX2 would add nothing); `false` for other sizes.
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
    // SAFETY: forwarded contract; SSE2 is part of x86-64.
    if has_avx2() {
        // SAFETY: forwarded contract; AVX2 was detected.
        unsafe { reverse_avx2(outer, inner, elem, src, dst, STREAM_BYTES) }
    } else {
        // SAFETY: forwarded contract; SSE2 is part of x86-64.
        unsafe { reverse::reverse_any::<Sse2>(outer, inner, elem, src, dst, STREAM_BYTES) }
    }
}

/// Every kernel this CPU can run, for the exactness tests.
#[cfg(all(test, feature = "alloc"))]
pub(super) fn kernels()
-> alloc::vec::Vec<(&'static str, simd::TransposeFn, Option<reverse::ReverseFn>)> {
    let mut k: alloc::vec::Vec<(&'static str, simd::TransposeFn, Option<reverse::ReverseFn>)> =
        alloc::vec![(
            "sse2",
            simd::transpose_any::<Sse2>,
            Some(reverse::reverse_any::<Sse2>)
        )];
    if has_avx2() {
        k.push(("avx2", transpose_avx2, Some(reverse_avx2)));
    }
    k
}

/// The vendor check reads the same vendor as the kernel reports.
#[cfg(all(test, feature = "std", target_os = "linux", not(miri)))]
#[test]
fn the_vendor_is_the_kernels() {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
    let vendor = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("vendor_id"))
        .and_then(|l| l.split(':').nth(1))
        .map(str::trim)
        .expect("a vendor_id line");
    assert_eq!(is_amd(), vendor == "AuthenticAMD", "vendor_id {vendor:?}");
    assert_eq!(panels_pay(), is_amd());
    assert_eq!(panels_pay(), is_amd(), "the cached answer");
}
