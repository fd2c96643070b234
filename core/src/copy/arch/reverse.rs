//! Reversed rows (`inner.stride == −elem`, `a[::-1]`) of 1-, 2-, 4- and 8-byte elements:
//! vector loads (16 bytes, 32 with AVX2), an in-register reversal of the elements, and stores,
//! a whole 64-byte destination line per step, then single vectors and a scalar tail. From
//! [`STREAM_BYTES`](super::simd::STREAM_BYTES) on, where the target has them, the stores stream,
//! after a scalar head up to the first line boundary. Each row's destination is written from
//! its end, so the source is read upwards, and prefetched [`PREFETCH_BYTES`] ahead into L1.

use super::Axis;
use super::simd::Vector;
use crate::copy::for_each_plane;

/// How far ahead (above: each row is read upwards) the source is prefetched.
const PREFETCH_BYTES: usize = 2048;

/// Source streams a long row is read in, side by side.
const STREAMS: usize = 4;

/// The shortest chunk, in destination lines, worth a stream of its own: 16 KiB (two lines under
/// Miri, so that its runs of the tests reach every path with small rows).
const MIN_CHUNK_LINES: usize = if cfg!(miri) { 2 } else { 256 };

/// Streamed rows of at least this many bytes are read in [`STREAMS`] chunks; shorter ones whose
/// bytes are whole lines go [`STREAMS`] rows side by side.
pub(super) const LONG_ROW_BYTES: usize = STREAMS * MIN_CHUNK_LINES * 64;

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
    let row =
        |r: usize, offset: isize| (src.wrapping_offset(offset), dst.wrapping_add(r * row_bytes));
    if !(V::STREAMS && planes * row_bytes >= stream_from && (dst as usize) % W == 0) {
        for_each_plane(outer, |r, offset| {
            // SAFETY: row r of the source ends at `offset`, row r of `dst` is in bounds and
            // apart from it (contract); streaming, where `STREAM` is true below, is allowed
            // (checked here); rows side by side are whole lines each, so their destinations
            // are as far from a line boundary as the first. The same holds for every call.
            unsafe { reverse_together::<V, W, false, 1>([row(r, offset)], n) }
        });
        return;
    }
    if row_bytes % 64 == 0 && row_bytes < LONG_ROW_BYTES && planes >= STREAMS {
        // Rows too short to split, all with the same line alignment: STREAMS rows side by side.
        let mut group = [(src, dst); STREAMS];
        let mut filled = 0;
        for_each_plane(outer, |r, offset| {
            group[filled] = row(r, offset);
            filled += 1;
            if filled == STREAMS {
                // SAFETY: as above.
                unsafe { reverse_together::<V, W, true, STREAMS>(group, n) };
                filled = 0;
            }
        });
        for &one in &group[..filled] {
            // SAFETY: as above.
            unsafe { reverse_together::<V, W, true, 1>([one], n) };
        }
    } else {
        for_each_plane(outer, |r, offset| {
            // SAFETY: as above.
            unsafe { reverse_together::<V, W, true, 1>([row(r, offset)], n) }
        });
    }
    // SAFETY: the instruction set is present (contract).
    unsafe { V::fence() };
}

/// `R` reversed rows of `n` elements of `W` bytes: `out[i] = last[−i]` for each
/// `(last, out)`, streamed if `STREAM`.
///
/// Each destination is written from its end, so the source is read upwards: a rising stream
/// the prefetchers follow better than a falling one. Whole destination lines go one per step,
/// their vectors unrolled, the source prefetched [`PREFETCH_BYTES`] above. Reads are spread
/// over [`STREAMS`] places at once, more than one stream's prefetch keeps in flight: `R` rows
/// side by side, or one long row in `STREAMS` chunks.
///
/// # Safety
/// For each row, the `n` source elements ending at `last` are readable, the `n × W` bytes at
/// `out` writable and apart from every source; the instruction set of `V` is present; if
/// `STREAM`, `V::STREAMS`, and every `out` is `W`-aligned and as far from a line boundary
/// as the first.
#[inline(always)]
unsafe fn reverse_together<V: Reverse, const W: usize, const STREAM: bool, const R: usize>(
    rows: [(*const u8, *mut u8); R],
    n: usize,
) {
    // Elements per vector, and per destination line; vectors per line.
    let (per, line, vectors) = (16 * V::LANES / W, 64 / W, 4 / V::LANES);
    // Elements before the first line-aligned destination (streaming only: plain stores need
    // no alignment).
    let head = if STREAM {
        ((64 - (rows[0].1 as usize) % 64) % 64 / W).min(n)
    } else {
        0
    };
    let lines = head + (n - head) / line * line;
    let body = lines + (n - lines) / per * per;
    let scalar = |(last, out): (*const u8, *mut u8), i: usize| {
        // SAFETY: element i is in bounds on both sides (contract); `[u8; W]` has alignment 1.
        unsafe {
            let v = last.wrapping_sub(i * W).cast::<[u8; W]>().read();
            out.add(i * W).cast::<[u8; W]>().write(v);
        }
    };
    // Elements i .. i + per (i in head..body).
    let vector = |(last, out): (*const u8, *mut u8), i: usize| {
        // SAFETY: elements i .. i + per sit at last − (i + per − 1) × W .. last − i × W,
        // readable (contract); destination bytes i × W .. (i + per) × W are in the row, and
        // 16 × LANES-byte aligned when streaming (past the head, from a line start in steps of
        // a vector); the instruction set is present.
        unsafe {
            let v = V::reverse::<W>(V::load_full(last.wrapping_sub((i + per - 1) * W)));
            if STREAM {
                V::stream(out.add(i * W), v);
            } else {
                V::store(out.add(i * W), v);
            }
        }
    };
    let whole_line = |row: (*const u8, *mut u8), i: usize| {
        // SAFETY: a hint only.
        unsafe { V::prefetch_near(row.0.wrapping_sub(i * W).wrapping_add(PREFETCH_BYTES)) };
        for k in 0..vectors {
            vector(row, i + k * per);
        }
    };
    for row in rows {
        (body..n).rev().for_each(|i| scalar(row, i));
        (lines..body)
            .step_by(per)
            .rev()
            .for_each(|i| vector(row, i));
    }
    // One long row, streamed: its lines in STREAMS chunks side by side, the lines left over
    // first.
    let total = (lines - head) / line;
    let chunk = if STREAM && R == 1 && total >= STREAMS * MIN_CHUNK_LINES {
        total / STREAMS
    } else {
        0
    };
    let split = head + STREAMS * chunk * line;
    let mut i = lines;
    while i > split {
        i -= line;
        for row in rows {
            whole_line(row, i);
        }
    }
    for j in (0..chunk).rev() {
        for k in 0..STREAMS {
            whole_line(rows[0], head + (k * chunk + j) * line);
        }
    }
    for row in rows {
        (0..head).rev().for_each(|i| scalar(row, i));
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
