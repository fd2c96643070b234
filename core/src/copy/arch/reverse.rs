//! Reversed rows (`inner.stride == −elem`, `a[::-1]`) of 1-, 2-, 4- and 8-byte elements:
//! 16-byte loads, an in-register reversal of the elements, and stores, with a scalar tail. From
//! [`STREAM_BYTES`](super::simd::STREAM_BYTES) on, where the target has them, the stores stream,
//! after a scalar head up to the first 16-byte boundary.

use super::Axis;
use super::simd::Vector;
use crate::copy::for_each_plane;

/// A [`Vector`] of one 16-byte lane that can reverse its `W`-byte elements.
///
/// # Safety
/// As [`Vector`].
pub(super) unsafe trait Reverse: Vector {
    /// The `W`-byte elements of `v` in reverse order.
    ///
    /// # Safety
    /// The instruction set is present; `W` is 1, 2, 4 or 8.
    unsafe fn reverse<const W: usize>(v: Self) -> Self;
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
    let per = 16 / W;
    for_each_plane(outer, |r, offset| {
        // The source element i sits at `last − i × W`.
        let last = src.wrapping_offset(offset);
        let out = dst.wrapping_add(r * row_bytes);
        // Elements before the first 16-byte-aligned destination (streaming only).
        let head = if stream {
            ((16 - (out as usize) % 16) % 16 / W).min(n)
        } else {
            0
        };
        let body = head + (n - head) / per * per;
        let scalar = |i: usize| {
            // SAFETY: element i is in bounds on both sides (contract); `[u8; W]` has
            // alignment 1.
            unsafe {
                let v = last.wrapping_sub(i * W).cast::<[u8; W]>().read();
                out.add(i * W).cast::<[u8; W]>().write(v);
            }
        };
        (0..head).for_each(scalar);
        for i in (head..body).step_by(per) {
            // SAFETY: elements i .. i + per sit at last − (i + per − 1) × W .. last − i × W,
            // readable (contract); destination bytes i × W .. (i + per) × W are in the row,
            // and 16-byte aligned when streaming (past the head); the instruction set is
            // present.
            unsafe {
                let p = last.wrapping_sub((i + per - 1) * W);
                let v = V::reverse::<W>(V::load(p, p));
                if stream {
                    V::stream(out.add(i * W), v);
                } else {
                    V::store(out.add(i * W), v);
                }
            }
        }
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
