//! x86-64: SSE2 (part of every x86-64 CPU, so no run-time detection).
//!
//! Transposes of 4-byte elements with SSE2 (part of every x86-64 CPU, so no run-time
//! detection). The unit of work is a 16 × 16 micro-tile: its 16 source columns are read whole
//! (one 64-byte line each, four 16-byte loads back to back) into a 1 KiB buffer, then written
//! out as 16 destination rows of 64 bytes through in-register 4 × 4 transposes. Reading each
//! source line whole matters for power-of-two strides, where all 16 columns fall into the same
//! cache set; micro-tiles are grouped in 256 × 256 blocks so that the pages a block touches
//! stay in the TLB. Ragged edges use the scalar tiles.

use super::Axis;
use crate::copy::for_each_plane;
use core::arch::x86_64::{
    __m128, _mm_loadu_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_setzero_ps, _mm_sfence, _mm_shuffle_ps,
    _mm_storeu_ps, _mm_stream_ps, _mm_unpackhi_ps, _mm_unpacklo_ps,
};

/// The SIMD transpose of `outer × rows × inner` (the source contiguous along `rows`); `false`
/// when the element size has no SIMD kernel here.
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
    if elem != 4 {
        return false;
    }
    // SAFETY: forwarded contract; 4-byte elements.
    unsafe { tiled_4byte(outer, rows, inner, src, dst) };
    true
}

/// Reversed rows (`inner.stride == −elem`) of every plane of `outer`; `false` when no SIMD
/// kernel applies (today: large rows of 4-byte elements into a 16-byte-aligned destination,
/// written with streaming stores).
///
/// # Safety
/// Every row's source elements are readable; `dst` is writable for
/// `outer × inner × elem` bytes and does not overlap the source.
pub(in crate::copy) unsafe fn reverse_rows(
    outer: &[Axis],
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
) -> bool {
    let row_bytes = inner.extent * elem;
    let rows: usize = outer.iter().map(|a| a.extent).product();
    if elem != 4
        || rows * row_bytes < STREAM_BYTES
        || (dst as usize) % 16 != 0
        || row_bytes % 16 != 0
    {
        return false;
    }
    for_each_plane(outer, |r, offset| {
        // SAFETY: row r of the source is readable and row r of the destination starts
        // r × row_bytes in (contract); it is 16-byte aligned because `dst` is and rows are
        // whole multiples of 16 bytes.
        unsafe {
            reverse_4byte_stream(
                src.wrapping_offset(offset),
                inner.extent,
                dst.add(r * row_bytes),
            )
        };
    });
    fence();
    true
}

/// Side of a micro-tile, in elements.
const MICRO: usize = 16;
/// Side of a block of micro-tiles, in elements.
const BLOCK: usize = 64;
/// Destinations at least this large are written with non-temporal stores (they would only
/// evict the source from the caches); transposes stream only whole cache lines.
const STREAM_BYTES: usize = 8 << 20;

/// Orders streaming stores before whatever the caller does next.
fn fence() {
    // SAFETY: SSE is part of x86-64; a fence has no other effect.
    unsafe { _mm_sfence() };
}

/// Copies the `n` elements at `src`, `src − 4`, … (a reversed row of 4-byte elements) to
/// `dst` with streaming stores; the caller calls [`fence`] afterwards.
///
/// # Safety
/// The `n` source elements are readable, `dst` is writable for `4n` bytes and 16-byte
/// aligned.
unsafe fn reverse_4byte_stream(src: *const u8, n: usize, dst: *mut u8) {
    let (s, d) = (src.cast::<f32>(), dst.cast::<f32>());
    let body = n / 4 * 4;
    let mut i = 0;
    while i < body {
        // SAFETY: elements i..i+4 sit at s − i − 3 ..= s − i (contract); d + i is 16-byte
        // aligned since d is and i is a multiple of 4.
        unsafe {
            let v = _mm_loadu_ps(s.wrapping_sub(i + 3));
            _mm_stream_ps(d.add(i), _mm_shuffle_ps::<0b00_01_10_11>(v, v));
        }
        i += 4;
    }
    for i in body..n {
        // SAFETY: in bounds on both sides (contract).
        unsafe { d.add(i).write(s.wrapping_sub(i).read_unaligned()) };
    }
}

/// One 16 × 16 micro-tile: source columns start at `s`, `cs` bytes apart (16 contiguous
/// elements each); destination rows start at `d`, `row` elements apart.
///
/// # Safety
/// The 256 source elements are readable and the 256 destination slots writable; with
/// `STREAM`, `d` and `row × 4` are multiples of 16.
#[inline(always)]
unsafe fn micro<const STREAM: bool>(s: *const u8, cs: isize, d: *mut f32, row: usize) {
    // SAFETY: SSE2 is part of x86-64; the accesses are the caller's (see above).
    unsafe {
        // buf[4c + k] holds rows 4k..4k+4 of column c.
        let mut buf = [_mm_setzero_ps(); MICRO * MICRO / 4];
        for c in 0..MICRO {
            let col = s.wrapping_offset(c as isize * cs).cast::<f32>();
            for k in 0..MICRO / 4 {
                buf[4 * c + k] = _mm_loadu_ps(col.add(4 * k));
            }
        }
        for rb in 0..MICRO / 4 {
            for cb in 0..MICRO / 4 {
                let a0 = buf[4 * (4 * cb) + rb];
                let a1 = buf[4 * (4 * cb + 1) + rb];
                let a2 = buf[4 * (4 * cb + 2) + rb];
                let a3 = buf[4 * (4 * cb + 3) + rb];
                let t0 = _mm_unpacklo_ps(a0, a1);
                let t1 = _mm_unpacklo_ps(a2, a3);
                let t2 = _mm_unpackhi_ps(a0, a1);
                let t3 = _mm_unpackhi_ps(a2, a3);
                let rows: [__m128; 4] = [
                    _mm_movelh_ps(t0, t1),
                    _mm_movehl_ps(t1, t0),
                    _mm_movelh_ps(t2, t3),
                    _mm_movehl_ps(t3, t2),
                ];
                for (k, v) in rows.into_iter().enumerate() {
                    let at = d.add((4 * rb + k) * row + 4 * cb);
                    if STREAM {
                        _mm_stream_ps(at, v);
                    } else {
                        _mm_storeu_ps(at, v);
                    }
                }
            }
        }
    }
}

/// The tiled transpose of 4-byte elements.
///
/// # Safety
/// As [`transpose`], with 4-byte elements.
unsafe fn tiled_4byte(outer: &[Axis], rows: Axis, inner: Axis, src: *const u8, dst: *mut u8) {
    let (nr, nc) = (rows.extent, inner.extent);
    let total = outer.iter().map(|a| a.extent).product::<usize>() * nr * nc * 4;
    if total >= STREAM_BYTES && (dst as usize) % 16 == 0 && nc % 16 == 0 {
        // SAFETY: forwarded contract; alignment checked above.
        unsafe { blocks::<true>(outer, rows, inner, src, dst) };
        // SAFETY: SSE is part of x86-64; orders the streaming stores before whatever the
        // caller does next.
        unsafe { _mm_sfence() };
    } else {
        // SAFETY: forwarded contract.
        unsafe { blocks::<false>(outer, rows, inner, src, dst) };
    }
}

/// # Safety
/// As [`tiled_4byte`]; with `STREAM`, `dst` is 16-byte aligned and `inner.extent` a
/// multiple of 16.
#[inline(always)]
unsafe fn blocks<const STREAM: bool>(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    src: *const u8,
    dst: *mut u8,
) {
    let (nr, nc) = (rows.extent, inner.extent);
    let cs = inner.stride;
    // With STREAM every row starts at the same offset within a cache line (rows are whole
    // lines long): start the micro-tiles at the first column whose address is line-aligned,
    // so that every streamed 64-byte segment is one whole line.
    let lead = if STREAM {
        ((64 - (dst as usize) % 64) % 64 / 4).min(nc)
    } else {
        0
    };
    let nr16 = nr / MICRO * MICRO;
    let (c_lo, c_hi) = (lead, lead + (nc - lead) / MICRO * MICRO);
    let scalar = |base: *const u8, out: *mut f32, r: usize, c: usize| {
        // SAFETY: (r, c) is in bounds on both sides (callers below); unaligned accesses.
        unsafe {
            let v = core::ptr::read_unaligned(
                base.wrapping_add(r * 4)
                    .wrapping_offset(c as isize * cs)
                    .cast::<f32>(),
            );
            core::ptr::write_unaligned(out.add(r * nc + c), v);
        }
    };
    for_each_plane(outer, |p, offset| {
        let base = src.wrapping_offset(offset);
        // SAFETY: plane p of the destination holds nr × nc elements.
        let out = unsafe { dst.cast::<f32>().add(p * nr * nc) };
        for cb in (c_lo..c_hi).step_by(BLOCK) {
            for rb in (0..nr16).step_by(BLOCK) {
                for c0 in (cb..(cb + BLOCK).min(c_hi)).step_by(MICRO) {
                    for r0 in (rb..(rb + BLOCK).min(nr16)).step_by(MICRO) {
                        let s = base.wrapping_add(r0 * 4).wrapping_offset(c0 as isize * cs);
                        // SAFETY: rows r0..r0+16 and columns c0..c0+16 are in bounds on
                        // both sides; with STREAM, out + r0·nc + c0 is 64-byte aligned
                        // (planes and rows are whole lines, and c0 − lead is a multiple
                        // of 16 elements).
                        unsafe { micro::<STREAM>(s, cs, out.add(r0 * nc + c0), nc) };
                    }
                }
            }
        }
        // Ragged edges: the first and last columns of the full rows, then the last rows.
        for r in 0..nr16 {
            for c in (0..c_lo).chain(c_hi..nc) {
                scalar(base, out, r, c);
            }
        }
        for r in nr16..nr {
            for c in 0..nc {
                scalar(base, out, r, c);
            }
        }
    });
}
