//! Reversed rows (`inner.stride == −elem`, `a[::-1]`) of 1-, 2-, 4- and 8-byte elements:
//! vector loads (16 bytes, 32 with AVX2), an in-register reversal of the elements, and stores,
//! a whole 64-byte destination line per step, then single vectors and a scalar tail. From
//! [`STREAM_BYTES`](super::simd::STREAM_BYTES) on, where the target has them, the stores stream,
//! after a scalar head up to the first line boundary. The source is read downwards, and
//! prefetched [`PREFETCH_BYTES`] ahead (below) into L1: a falling stream the hardware prefetchers
//! follow less well than a rising one. On an Intel Xeon at 64 MiB, a C model of the loop
//! measured 0.79 × memcpy with 16-byte steps and no prefetch, 0.97 with whole lines and the
//! prefetch; the kernel went from 0.62–0.78 to 0.82–0.95 (4096 × 4096, both axes reversed).

use super::Axis;
use super::simd::Vector;
use crate::copy::for_each_plane;

/// How far ahead (below: the rows are read backwards) the source is prefetched. 2 KiB measured
/// best of 0.5, 1, 2, 3 and 4 KiB.
const PREFETCH_BYTES: usize = 2048;

/// A [`Vector`] that can reverse its `W`-byte elements (all of them: with two lanes, the lanes
/// trade places too).
///
/// # Safety
/// As [`Vector`].
pub(super) unsafe trait Reverse: Vector {
    /// The `W`-byte elements of `v` in reverse order.
    ///
    /// # Safety
    /// The instruction set is present; `W` is 1, 2, 4 or 8.
    unsafe fn reverse<const W: usize>(v: Self) -> Self;

    /// A hint that the line at `p` will be read very soon, into the nearest cache (no access
    /// is made; a no-op where the target has no such hint).
    ///
    /// # Safety
    /// The instruction set is present (`p` need not be valid).
    unsafe fn prefetch_near(p: *const u8);
}

/// Reversed rows: row r of `dst` (`inner.extent` elements of `W` bytes) is the row of the source
/// at `outer`'s offset r, read backwards (`inner.stride == −W`), with streaming stores from
/// `stream_from` bytes on.
///
/// # Safety
/// Every row's source elements are readable; `dst` is writable for `planes × inner × W` bytes
/// and does not overlap the source; the instruction set of `V` is present.
#[inline(always)]
unsafe fn reverse_rows<V: Reverse, const W: usize>(
    outer: &[Axis],
    inner: Axis,
    src: *const u8,
    dst: *mut u8,
    stream_from: usize,
) {
    let n = inner.extent;
    let row_bytes = n * W;
    let planes: usize = outer.iter().map(|a| a.extent).product();
    let stream = V::STREAMS && planes * row_bytes >= stream_from && (dst as usize) % W == 0;
    // Elements per vector, and per destination line.
    let (per, line) = (16 * V::LANES / W, 64 / W);
    for_each_plane(outer, |r, offset| {
        // The source element i sits at `last − i × W`.
        let last = src.wrapping_offset(offset);
        let out = dst.wrapping_add(r * row_bytes);
        // Elements before the first line-aligned destination (streaming only).
        let head = if stream {
            ((64 - (out as usize) % 64) % 64 / W).min(n)
        } else {
            0
        };
        let lines = head + (n - head) / line * line;
        let body = lines + (n - lines) / per * per;
        let scalar = |i: usize| {
            // SAFETY: element i is in bounds on both sides (contract); `[u8; W]` has
            // alignment 1.
            unsafe {
                let v = last.wrapping_sub(i * W).cast::<[u8; W]>().read();
                out.add(i * W).cast::<[u8; W]>().write(v);
            }
        };
        // Elements i .. i + per (called with i in head..body, stepping by `per`).
        let vector = |i: usize| {
            // SAFETY: elements i .. i + per sit at last − (i + per − 1) × W .. last − i × W,
            // readable (contract); destination bytes i × W .. (i + per) × W are in the row,
            // and 16 × LANES-byte aligned when streaming (past the head, from a line start in
            // steps of a vector); the instruction set is present.
            unsafe {
                let p = last.wrapping_sub((i + per - 1) * W);
                let v = V::reverse::<W>(V::load_full(p));
                if stream {
                    V::stream(out.add(i * W), v);
                } else {
                    V::store(out.add(i * W), v);
                }
            }
        };
        (0..head).for_each(scalar);
        for i in (head..lines).step_by(line) {
            // SAFETY: a hint only.
            unsafe { V::prefetch_near(last.wrapping_sub((i + line - 1) * W + PREFETCH_BYTES)) };
            (i..i + line).step_by(per).for_each(vector);
        }
        (lines..body).step_by(per).for_each(vector);
        (body..n).for_each(scalar);
    });
    if stream {
        // SAFETY: the instruction set is present (contract).
        unsafe { V::fence() };
    }
}

/// The signature of [`reverse_any`] (tests call every instantiation through it).
#[cfg(test)]
pub(super) type ReverseFn = unsafe fn(&[Axis], Axis, usize, *const u8, *mut u8, usize) -> bool;

/// [`reverse_rows`] for an element size known at run time: `false` (nothing done) unless it is
/// 1, 2, 4 or 8 bytes.
///
/// # Safety
/// As [`reverse_rows`], with `elem` in place of `W`.
#[inline(always)]
pub(super) unsafe fn reverse_any<V: Reverse>(
    outer: &[Axis],
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
    stream_from: usize,
) -> bool {
    macro_rules! go {
        ($w:literal) => {
            // SAFETY: forwarded contract, with `$w`-byte elements.
            unsafe { reverse_rows::<V, $w>(outer, inner, src, dst, stream_from) }
        };
    }
    match elem {
        1 => go!(1),
        2 => go!(2),
        4 => go!(4),
        8 => go!(8),
        _ => return false,
    }
    true
}
