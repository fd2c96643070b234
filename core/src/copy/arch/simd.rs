//! The SIMD kernels, written once over a [`Vector`] of one or two 16-byte lanes and
//! instantiated per architecture (SSE2 and AVX2 on x86_64, NEON on aarch64, simd128 on wasm32).
//!
//! **Transposes** (1-, 2-, 4- and 8-byte elements). The unit of work is a micro-tile of E × E
//! elements, E = 64 / elem: E source lines of 64 bytes (one per column, read whole and back to
//! back into an aligned buffer, since power-of-two strides put them all in one cache set), out
//! as E destination lines of 64 bytes. Inside, 16-byte blocks of n × n elements (n = 16 / elem)
//! are transposed in registers by log2(n) rounds of interleaves ("zip": `unpacklo/hi`, `zip1/2`,
//! shuffles), each at twice the width of the one before (see [`network`]).
//! With two lanes (AVX2) the second lane carries the block to the right, so each output vector is
//! 32 contiguous destination bytes. Micro-tiles walk strips of [`STRIP_BYTES`] per destination
//! row, in bands of [`BAND_TILES`] tiles down (tile column by tile column, so each source column
//! is read 256 bytes at a time), prefetching the source lines [`PREFETCH_TILES`] tiles ahead.
//! Destinations of [`STREAM_BYTES`] or more whose rows are whole lines are written with
//! streaming stores where the target has them, and only whole lines. With the heap (`alloc`),
//! on CPUs where they pay (the architecture module's choice, [`Large::panels`]: AMD's), such
//! large transposes go through panels instead ([`panels`]): a panel of source columns is
//! first copied into a buffer of about 2 MiB, column after column (long sequential reads
//! that the hardware prefetchers follow, where the strips read 16 to 128 columns side by side,
//! more streams than they track), then its micro-tiles are transposed out of the buffer, each
//! destination row receiving its run of the panel in order. 8-byte elements stay in strips
//! (a micro-tile reads only 8 columns). The two phases of a panel run one after the other, not
//! interleaved. Ragged edges run the portable tiles. BENCHMARKS.md ("How the copy kernels'
//! constants are chosen") holds the measurements behind these choices and the constants below.
//!
//! Reversed rows are in [`super::reverse`].

use super::Axis;
use crate::copy::for_each_plane;
use crate::copy::kernels::transpose_region;

/// Destinations at least this large are written with non-temporal stores where the target has
/// them (they would only evict the source from the caches).
pub(super) const STREAM_BYTES: usize = 8 << 20;

/// Bytes of each destination row a strip of micro-tiles covers (the strip's width): narrow
/// enough that few source rows are in flight at once (a strip reads `strip` source rows).
const STRIP_BYTES: usize = 128;

/// Micro-tiles per band: a strip is walked in bands of this many micro-tiles down, column of
/// micro-tiles by column, so that each source column is read 4 lines (256 bytes) at a time.
const BAND_TILES: usize = 4;

/// How many micro-tiles ahead (down the band) the source lines are prefetched, into L2:
/// their lines are a power of two apart, so L1 would evict them from its one set at once.
const PREFETCH_TILES: usize = 2;

/// Bytes of source staged per panel (see [`panels`]): about two L2 caches, the rest staying in
/// L3.
#[cfg(feature = "alloc")]
const PANEL_BYTES: usize = 2 << 20;

/// Bytes of each source column a panel stages at most (longer columns are staged in pieces):
/// 32 KiB keeps the columns of the 64 MiB cases whole (at most 16 KiB for 4-byte elements),
/// since a column staged in pieces is read as several shorter streams.
#[cfg(feature = "alloc")]
const PANEL_RUN: usize = 32 << 10;

/// One or two 16-byte SIMD lanes.
///
/// # Safety
/// Implementors' functions use one instruction set; the caller guarantees that the CPU has it
/// (by `cfg(target_feature)` or by run-time detection) and the kernels below are only
/// instantiated under that guarantee.
pub(super) unsafe trait Vector: Copy {
    /// 16-byte lanes per vector (1 or 2).
    const LANES: usize;
    /// Whether [`stream`](Self::stream) is a non-temporal store.
    const STREAMS: bool;

    /// All zeroes.
    ///
    /// # Safety
    /// The instruction set is present (see the trait).
    unsafe fn zero() -> Self;

    /// Lane 0 from the 16 bytes at `lo`; lane 1 (if any) from the 16 bytes at `hi`. Unaligned.
    ///
    /// # Safety
    /// The bytes are readable; the instruction set is present.
    unsafe fn load(lo: *const u8, hi: *const u8) -> Self;

    /// The `16 × LANES` bytes at `p`, unaligned (lane 0 first).
    ///
    /// # Safety
    /// The bytes are readable; the instruction set is present.
    unsafe fn load_full(p: *const u8) -> Self;

    /// Stores `16 × LANES` bytes at `p`, unaligned.
    ///
    /// # Safety
    /// The bytes are writable; the instruction set is present.
    unsafe fn store(p: *mut u8, v: Self);

    /// Stores `16 × LANES` bytes at `p`, which is `16 × LANES`-byte aligned, bypassing the caches
    /// where the target can ([`STREAMS`](Self::STREAMS)); [`fence`](Self::fence) orders them.
    ///
    /// # Safety
    /// As [`store`](Self::store), and `p` is aligned.
    unsafe fn stream(p: *mut u8, v: Self);

    /// Orders earlier streaming stores before later stores.
    ///
    /// # Safety
    /// The instruction set is present.
    unsafe fn fence();

    /// A hint that the line at `p` will be read soon (no access is made).
    ///
    /// # Safety
    /// The instruction set is present (`p` need not be valid).
    unsafe fn prefetch(p: *const u8);

    /// Per lane: the `W`-byte elements of the low halves of `a` and `b`, interleaved
    /// (`a0 b0 a1 b1 …`).
    ///
    /// # Safety
    /// The instruction set is present; `W` is 1, 2, 4 or 8.
    unsafe fn zip_lo<const W: usize>(a: Self, b: Self) -> Self;

    /// Per lane: the same for the high halves.
    ///
    /// # Safety
    /// As [`zip_lo`](Self::zip_lo).
    unsafe fn zip_hi<const W: usize>(a: Self, b: Self) -> Self;
}

/// Runs `$body` with `$i` bound to each of `0 .. $n` in turn (`$n` a constant of at most 16),
/// written out rather than looped, so that the arrays of vectors it indexes by `$i` stay in
/// registers also where the compiler does not unroll loops (opt-level "s", as the npm package
/// is built: there a looped block of vectors lives in memory).
macro_rules! each {
    ($n:expr, |$i:ident| $body:block) => {
        each!(@ $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $n:expr, $i:ident, $body:block, $($k:literal)*) => {
        $(
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    };
}

/// 64 bytes on a line of their own.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// `zip_lo` (`high` false) or `zip_hi` of `width`-byte elements (a constant after inlining).
///
/// # Safety
/// The instruction set of `V` is present; `width` is 1, 2, 4 or 8.
#[inline(always)]
unsafe fn zip<V: Vector>(width: usize, high: bool, a: V, b: V) -> V {
    // SAFETY: forwarded contract.
    unsafe {
        match (width, high) {
            (1, false) => V::zip_lo::<1>(a, b),
            (1, true) => V::zip_hi::<1>(a, b),
            (2, false) => V::zip_lo::<2>(a, b),
            (2, true) => V::zip_hi::<2>(a, b),
            (4, false) => V::zip_lo::<4>(a, b),
            (4, true) => V::zip_hi::<4>(a, b),
            (_, false) => V::zip_lo::<8>(a, b),
            (_, true) => V::zip_hi::<8>(a, b),
        }
    }
}

/// Transposes the n × n block of `W`-byte elements in each lane of `v[..N]` (N = 16 / W), in
/// place: round s zips rows `d = 2^s` apart at a width of `W·2^s` bytes (the low half stays,
/// the high half goes d rows down). Its first rounds touch neighbouring rows only, so the
/// register allocator can work through the block in parts.
///
/// # Safety
/// The instruction set of `V` is present.
#[inline(always)]
unsafe fn network<V: Vector, const W: usize, const N: usize>(v: &mut [V; N]) {
    // Written out with constant indices, so that the block stays in registers.
    macro_rules! round {
        ($d:literal: $($i:literal)*) => {
            $(
                let (x, y) = (v[$i], v[$i + $d]);
                // SAFETY: forwarded contract; W·d is at most 8 (N = 16 / W).
                unsafe {
                    v[$i] = zip::<V>(W * $d, false, x, y);
                    v[$i + $d] = zip::<V>(W * $d, true, x, y);
                }
            )*
        };
    }
    // Then row i is in v[rev(i)], rev reversing the log2(N) bits: swapped into place (free,
    // with constant indices).
    match N {
        2 => {
            round!(1: 0);
        }
        4 => {
            round!(1: 0 2);
            round!(2: 0 1);
            v.swap(1, 2);
        }
        8 => {
            round!(1: 0 2 4 6);
            round!(2: 0 1 4 5);
            round!(4: 0 1 2 3);
            v.swap(1, 4);
            v.swap(3, 6);
        }
        _ => {
            round!(1: 0 2 4 6 8 10 12 14);
            round!(2: 0 1 4 5 8 9 12 13);
            round!(4: 0 1 2 3 8 9 10 11);
            round!(8: 0 1 2 3 4 5 6 7);
            v.swap(1, 8);
            v.swap(2, 4);
            v.swap(3, 12);
            v.swap(5, 10);
            v.swap(7, 14);
            v.swap(11, 13);
        }
    }
}

/// One micro-tile: `a[j]` holds source column j (64 bytes: E consecutive rows); destination row
/// i (E elements, 64 bytes) goes to `out + i × out_stride`. With 4- and 8-byte elements each
/// row's line is written whole, back to back (streamed with `stream`): lines of rows a power of
/// two apart share a cache set, and interleaved partial writes would evict each other, or leave
/// write-combining buffers half full. With 1- and 2-byte elements `out` is the L1 staging
/// buffer (`stream` is false).
///
/// # Safety
/// The instruction set of `V` is present; the E rows at `out` are writable for 64 bytes each,
/// and 64-byte aligned with `stream`.
#[inline(always)]
unsafe fn micro<V: Vector, const W: usize, const N: usize>(
    a: &[Line; 64],
    out: *mut u8,
    out_stride: usize,
    stream: bool,
) {
    if N > 4 {
        // 1- and 2-byte elements (into `Stage::b`, never streamed): 16 or 32 registers per row
        // group would spill, so each block is stored as soon as it is transposed.
        for k in 0..4 {
            for q in (0..4).step_by(V::LANES) {
                // SAFETY: forwarded contract.
                let mut v = [unsafe { V::zero() }; N];
                for (j, vj) in v.iter_mut().enumerate() {
                    let lo = a[q * N + j].0[16 * k..].as_ptr();
                    let hi = a[((q + 1) * N + j) % 64].0[16 * k..].as_ptr();
                    // SAFETY: both point at 16 bytes inside `a`.
                    *vj = unsafe { V::load(lo, hi) };
                }
                // SAFETY: forwarded contract.
                unsafe { network::<V, W, N>(&mut v) };
                for (i, vi) in v.into_iter().enumerate() {
                    // SAFETY: row k·N + i of the tile, bytes 16q .. 16(q + LANES) ≤ 64
                    // (contract).
                    unsafe { V::store(out.add((k * N + i) * out_stride + 16 * q), vi) };
                }
            }
        }
        return;
    }
    for k in 0..4 {
        // The 4 / LANES blocks of rows k·N .. (k + 1)·N, left to right.
        // SAFETY: forwarded contract.
        let mut rows = [[unsafe { V::zero() }; N]; 4];
        for (qi, q) in (0..4).step_by(V::LANES).enumerate() {
            let v = &mut rows[qi];
            for (j, vj) in v.iter_mut().enumerate() {
                let lo = a[q * N + j].0[16 * k..].as_ptr();
                // Lane 1 (AVX2) takes the next column group; 1-lane vectors ignore it.
                let hi = a[((q + 1) * N + j) % 64].0[16 * k..].as_ptr();
                // SAFETY: both point at 16 bytes inside `a`.
                *vj = unsafe { V::load(lo, hi) };
            }
            // SAFETY: forwarded contract.
            unsafe { network::<V, W, N>(v) };
        }
        let mut line = out.wrapping_add(k * N * out_stride);
        for i in 0..N {
            for (q, block) in (0..4).step_by(V::LANES).zip(&rows) {
                // SAFETY: row k·N + i of the tile, bytes 16q .. 16(q + LANES) ≤ 64, aligned to
                // 16 × LANES when streaming (contract).
                unsafe {
                    if stream {
                        V::stream(line.add(16 * q), block[i]);
                    } else {
                        V::store(line.add(16 * q), block[i]);
                    }
                }
            }
            line = line.wrapping_add(out_stride);
        }
    }
}

/// The staging buffers of one micro-tile: its source lines, and (1- and 2-byte elements) its
/// destination lines.
struct Stage {
    a: [Line; 64],
    b: [Line; 64],
}

/// One micro-tile from memory to memory: the E source lines (columns `cs` bytes apart from
/// `from`) are copied whole into `stage.a`, then transposed into the destination lines (rows
/// `row` bytes apart from `to`), directly or through `stage.b`. With `ahead`, the source lines [`PREFETCH_TILES`] tiles further
/// down are prefetched.
///
/// # Safety
/// The 64 bytes from each source line are readable and the 64 bytes at each destination line
/// writable; with `stream`, every destination line is 64-byte aligned; the instruction set of
/// `V` is present.
#[inline(always)]
unsafe fn tile<V: Vector, const W: usize, const N: usize>(
    stage: &mut Stage,
    from: *const u8,
    cs: isize,
    to: *mut u8,
    row: usize,
    stream: bool,
    ahead: bool,
) {
    let e = 64 / W;
    for (j, line) in stage.a[..e].iter_mut().enumerate() {
        let col = from.wrapping_offset(j as isize * cs);
        // SAFETY: 64 readable bytes (contract); `line` is a distinct local.
        unsafe { core::ptr::copy_nonoverlapping(col, line.0.as_mut_ptr(), 64) };
        if ahead {
            // SAFETY: a hint only.
            unsafe { V::prefetch(col.wrapping_add(64 * PREFETCH_TILES)) };
        }
    }
    // SAFETY: forwarded contract.
    unsafe { tile_out::<V, W, N>(&stage.a, &mut stage.b, to, row, stream) };
}

/// One micro-tile in place ([`Large::in_place`]): each n × n block loaded from its n source
/// columns (16 bytes of each, `cs` bytes apart from `from`), transposed, and stored into its n
/// destination rows (`row` bytes apart from `to`), with neither staging buffer, and its loops
/// over a block's vectors written out ([`each`]).
///
/// # Safety
/// The 64 bytes from each of the E source lines are readable and the 64 bytes at each of the E
/// destination lines writable; the instruction set of `V` is present.
#[inline(always)]
unsafe fn tile_in_place<V: Vector, const W: usize, const N: usize>(
    from: *const u8,
    cs: isize,
    to: *mut u8,
    row: usize,
) {
    // The tile's E = 4·N columns are read in groups of N; a second lane (AVX2) takes the group
    // to the right, inside the tile since q + 1 < 4 when there are two.
    let column = |j: usize, k: usize| from.wrapping_offset(j as isize * cs).wrapping_add(16 * k);
    for k in 0..4 {
        // A counted loop: at opt-level "s" a `step_by` stays an iterator.
        for q in 0..4 / V::LANES {
            let q = q * V::LANES;
            // SAFETY: the instruction set is present (contract).
            let mut v = [unsafe { V::zero() }; N];
            each!(N, |j| {
                let lo = column(q * N + j, k);
                let hi = if V::LANES == 2 {
                    column((q + 1) * N + j, k)
                } else {
                    lo
                };
                // SAFETY: bytes 16k .. 16k + 16 of source lines q·N + j and (q + 1)·N + j,
                // both < E (contract).
                v[j] = unsafe { V::load(lo, hi) };
            });
            // SAFETY: forwarded contract.
            unsafe { network::<V, W, N>(&mut v) };
            each!(N, |i| {
                // SAFETY: row k·N + i < E of the tile, bytes 16q .. 16(q + LANES) ≤ 64
                // (contract).
                unsafe { V::store(to.wrapping_add((k * N + i) * row + 16 * q), v[i]) };
            });
        }
    }
}

/// The second half of [`tile`]: the micro-tile whose E source lines are `a[..E]`, out to the
/// destination lines (rows `row` bytes apart from `to`), directly or through `b`.
///
/// # Safety
/// The 64 bytes at each destination line are writable, and 64-byte aligned with `stream`; the
/// instruction set of `V` is present.
#[inline(always)]
unsafe fn tile_out<V: Vector, const W: usize, const N: usize>(
    a: &[Line; 64],
    b: &mut [Line; 64],
    to: *mut u8,
    row: usize,
    stream: bool,
) {
    let e = 64 / W;
    if N <= 4 {
        // 4- and 8-byte elements: the blocks of one row group fit in registers, so each
        // destination line is written straight from them.
        // SAFETY: the destination lines are writable, and aligned with `stream`; the
        // instruction set is present (contract).
        unsafe { micro::<V, W, N>(a, to, row, stream) };
        return;
    }
    // 1- and 2-byte elements: 16 or 32 vectors per row group would spill, so the tile is
    // transposed into `b` (L1) and copied out line by line.
    // SAFETY: `b` holds 64 lines of 64 writable bytes; the instruction set is present
    // (contract).
    unsafe { micro::<V, W, N>(a, b.as_mut_ptr().cast(), 64, false) };
    for (i, line) in b[..e].iter().enumerate() {
        let out = to.wrapping_add(i * row);
        for h in (0..64).step_by(16 * V::LANES) {
            // SAFETY: destination line i is writable (and aligned when streaming; contract);
            // bytes h .. h + 16 × LANES ≤ 64 of `line` are read.
            unsafe {
                let v = V::load_full(line.0.as_ptr().add(h));
                if stream {
                    V::stream(out.add(h), v);
                } else {
                    V::store(out.add(h), v);
                }
            }
        }
    }
}

/// The SIMD transpose of `outer × rows × inner` (the source contiguous along `rows`) for
/// `W`-byte elements (N = 16 / W), large destinations written as `large` says.
///
/// # Safety
/// As [`crate::copy::kernels::transpose`], with `W`-byte elements; the instruction set of `V`
/// is present.
#[inline(always)]
unsafe fn transpose<V: Vector, const W: usize, const N: usize>(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    src: *const u8,
    dst: *mut u8,
    large: Large,
) {
    let e = 64 / W;
    let (nr, nc, cs) = (rows.extent, inner.extent, inner.stride);
    let planes: usize = outer.iter().map(|a| a.extent).product();
    // Stream whole lines only: every row starts at the same offset in a line (rows are whole
    // lines), and the destination is element-aligned so that some column starts a line.
    let stream = V::STREAMS
        && planes * nr * nc * W >= large.stream_from
        && (nc * W) % 64 == 0
        && (dst as usize) % W == 0;
    // The first column whose destination is line-aligned (streaming only); whole micro-tiles
    // from there.
    let lead = if stream {
        ((64 - (dst as usize) % 64) % 64 / W).min(nc)
    } else {
        0
    };
    let (r_hi, c_lo) = (nr / e * e, lead);
    let c_hi = c_lo + (nc - c_lo) / e * e;
    let (strip, band) = ((STRIP_BYTES / W).max(e), BAND_TILES * e);
    let mut stage = Stage {
        a: [Line([0; 64]); 64],
        b: [Line([0; 64]); 64],
    };
    // 8-byte elements stay in strips: a micro-tile reads only 8 columns, few enough streams for
    // the prefetchers, so staging them only adds a pass.
    #[cfg(feature = "alloc")]
    if stream && large.panels && W <= 4 {
        let blocks = Blocks {
            rows: r_hi,
            cols: c_lo..c_hi,
            cs,
            nc,
        };
        // SAFETY: forwarded contract: the full micro-tiles of rows 0 .. r_hi and columns
        // c_lo .. c_hi are in bounds, and their destination lines aligned (streaming).
        if unsafe { panels::<V, W, N>(&mut stage, outer, &blocks, src, dst, nr) } {
            // SAFETY: the instruction set is present (contract).
            unsafe { V::fence() };
            // SAFETY: forwarded contract; the regions are inside the box.
            unsafe { ragged::<W>(outer, rows, inner, src, dst, (r_hi, c_lo, c_hi)) };
            return;
        }
    }
    for_each_plane(outer, |p, offset| {
        let base = src.wrapping_offset(offset);
        let plane = dst.wrapping_add(p * nr * nc * W);
        for s0 in (c_lo..c_hi).step_by(strip) {
            for b0 in (0..r_hi).step_by(band) {
                for c0 in (s0..(s0 + strip).min(c_hi)).step_by(e) {
                    for r0 in (b0..(b0 + band).min(r_hi)).step_by(e) {
                        let from = base.wrapping_add(r0 * W).wrapping_offset(c0 as isize * cs);
                        let to = plane.wrapping_add((r0 * nc + c0) * W);
                        let ahead = r0 + (PREFETCH_TILES + 1) * e <= nr;
                        // SAFETY: rows r0 .. r0 + e and columns c0 .. c0 + e are in bounds on
                        // both sides (r0 + e ≤ nr, c0 + e ≤ nc; contract); when streaming, the
                        // destination rows are line-aligned: c0 − lead is a multiple of e and
                        // rows are whole lines.
                        unsafe {
                            if large.in_place && !stream {
                                tile_in_place::<V, W, N>(from, cs, to, nc * W);
                            } else {
                                tile::<V, W, N>(&mut stage, from, cs, to, nc * W, stream, ahead);
                            }
                        };
                    }
                }
            }
        }
    });
    if stream {
        // SAFETY: the instruction set is present (contract).
        unsafe { V::fence() };
    }
    // SAFETY: forwarded contract; the regions are inside the box.
    unsafe { ragged::<W>(outer, rows, inner, src, dst, (r_hi, c_lo, c_hi)) };
}

/// The ragged edges the micro-tiles leave, by the portable kernel: the first (`0 .. c_lo`) and
/// last (`c_hi .. nc`) columns of the full rows (`0 .. r_hi`), then the last rows.
///
/// # Safety
/// As [`crate::copy::kernels::transpose`], with `W`-byte elements; `r_hi ≤ rows.extent` and
/// `c_lo ≤ c_hi ≤ inner.extent`.
#[inline(always)]
unsafe fn ragged<const W: usize>(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    src: *const u8,
    dst: *mut u8,
    (r_hi, c_lo, c_hi): (usize, usize, usize),
) {
    let (nr, nc) = (rows.extent, inner.extent);
    // SAFETY: forwarded contract; the regions are inside the box.
    unsafe {
        transpose_region::<W>(outer, rows, inner, src, dst, 0..r_hi, 0..c_lo);
        transpose_region::<W>(outer, rows, inner, src, dst, 0..r_hi, c_hi..nc);
        transpose_region::<W>(outer, rows, inner, src, dst, r_hi..nr, 0..nc);
    }
}

/// The full micro-tiles of a transpose: rows `0 .. rows`, columns `cols` (both in whole
/// micro-tiles), source columns `cs` bytes apart, destination rows of `nc` elements.
#[cfg(feature = "alloc")]
struct Blocks {
    rows: usize,
    cols: core::ops::Range<usize>,
    cs: isize,
    nc: usize,
}

/// The full micro-tiles through panels, for large destinations (streamed): a panel of source
/// columns (up to [`PANEL_RUN`] bytes of each, about [`PANEL_BYTES`] in all) is first copied
/// whole into a heap buffer, column after column (long sequential reads, which the hardware
/// prefetchers follow; in the source's own order the tiles read 16 to 64 columns side by side,
/// more streams than they track), its columns one line more than a multiple of 64 bytes apart
/// (power-of-two strides would put them all in one cache set). Then the panel's micro-tiles are
/// transposed out of it row group by row group, so that each destination row receives the
/// panel's bytes in one run, in order. Returns `false` (nothing done) when the buffer cannot be
/// allocated.
///
/// # Safety
/// As [`transpose`]'s body: every micro-tile of `blocks` is in bounds on both sides (rows
/// `0 .. blocks.rows` of every source column read, the destination written), and its destination
/// lines are 64-byte aligned; the instruction set of `V` is present.
#[cfg(feature = "alloc")]
#[inline(always)]
unsafe fn panels<V: Vector, const W: usize, const N: usize>(
    stage: &mut Stage,
    outer: &[Axis],
    blocks: &Blocks,
    src: *const u8,
    dst: *mut u8,
    nr: usize,
) -> bool {
    let e = 64 / W;
    let Blocks {
        rows,
        ref cols,
        cs,
        nc,
    } = *blocks;
    if rows == 0 || cols.is_empty() {
        return false;
    }
    // Rows per piece and columns per panel, in whole micro-tiles; the kernels' tests take two
    // micro-tiles of each (Miri one), so that their shapes span several pieces and panels.
    let (run, width) = if cfg!(miri) {
        (e, e)
    } else if cfg!(test) {
        (2 * e, 2 * e)
    } else {
        let run = (PANEL_RUN / W / e * e).min(rows);
        (run, PANEL_BYTES / (run * W) / e * e)
    };
    let (run, width) = (run.clamp(e, rows), width.clamp(e, cols.len()));
    // Where a staged line goes: line k of column j at `j × col_step + k × line_step`. With
    // 1-byte elements a micro-tile reads 64 columns: staged line-major, its 64 lines are one
    // contiguous 4 KiB (one page: with a page per column, its 64 pages and its 64 destination
    // rows' pages overflow the first-level TLB; wider elements, whose columns are long runs,
    // keep the column-major staging). Otherwise column by
    // column, a column's lines one line more than whole lines apart from the next column's, so
    // that the lines a micro-tile reads fall in different cache sets. `run × W` is whole lines.
    let lines = run * W / 64;
    let (col_step, line_step, total) = if W == 1 {
        (64, (width + 1) * 64, lines * (width + 1))
    } else {
        let pitch = (lines + 1) * 64;
        (pitch, 64, width * (lines + 1))
    };
    // The buffer's capacity, not zeroed first (2 MiB of zeroes would cost about a tenth of an
    // 8 MiB transpose): every staged line is written by the copy below before a micro-tile
    // reads it, and nothing else is read.
    let mut buffer = alloc::vec::Vec::<Line>::new();
    if buffer.try_reserve_exact(total).is_err() {
        return false;
    }
    let panel = buffer.as_mut_ptr().cast::<u8>();
    for_each_plane(outer, |p, offset| {
        let base = src.wrapping_offset(offset);
        let plane = dst.wrapping_add(p * nr * nc * W);
        for r_lo in (0..rows).step_by(run) {
            let r_n = run.min(rows - r_lo);
            for c_lo in cols.clone().step_by(width) {
                let c_n = width.min(cols.end - c_lo);
                for j in 0..c_n {
                    let from = base
                        .wrapping_add(r_lo * W)
                        .wrapping_offset((c_lo + j) as isize * cs);
                    let to = panel.wrapping_add(j * col_step);
                    // Line by line, also where the staged column is contiguous: the loop of
                    // 64-byte lines is inlined, where a `memcpy` call per column is not.
                    for k in 0..r_n * W / 64 {
                        // SAFETY: line k of rows r_lo .. r_lo + r_n of source column c_lo + j
                        // is readable (contract: k < r_n × W / 64); staged line k of column j
                        // (j < width, k < lines) is inside the buffer's capacity.
                        unsafe {
                            core::ptr::copy_nonoverlapping(
                                from.add(k * 64),
                                to.add(k * line_step),
                                64,
                            )
                        };
                    }
                }
                for r0 in (r_lo..r_lo + r_n).step_by(e) {
                    for c0 in (c_lo..c_lo + c_n).step_by(e) {
                        let from = panel.wrapping_add(
                            (r0 - r_lo) * W / 64 * line_step + (c0 - c_lo) * col_step,
                        );
                        let to = plane.wrapping_add((r0 * nc + c0) * W);
                        if col_step == 64 {
                            // Line-major: the micro-tile's 64 staged lines are contiguous at
                            // `from` (a whole number of lines into the buffer, so aligned),
                            // read in place.
                            // SAFETY: 64 lines of the buffer's capacity, all written by this
                            // panel's copy above, which nothing writes while this borrow lives; the destination lines are in bounds and
                            // aligned (contract).
                            unsafe {
                                let a = &*from.cast::<[Line; 64]>();
                                tile_out::<V, W, N>(a, &mut stage.b, to, nc * W, true)
                            };
                            continue;
                        }
                        // SAFETY: the micro-tile's e staged columns, `col_step` apart, hold
                        // their line (r0 − r_lo) × W / 64 at `from` (r0 − r_lo + e ≤ r_n); its
                        // destination lines are in bounds and aligned (contract).
                        unsafe {
                            tile::<V, W, N>(stage, from, col_step as isize, to, nc * W, true, false)
                        };
                    }
                }
            }
        }
    });
    true
}

/// The signature of [`transpose_any`] (tests call every instantiation through it).
#[cfg(test)]
pub(super) type TransposeFn =
    unsafe fn(&[Axis], Axis, Axis, usize, *const u8, *mut u8, Large) -> bool;

/// How a transpose writes large destinations: the architecture module's choice.
#[derive(Clone, Copy, Debug)]
pub(super) struct Large {
    /// Destinations of this many bytes or more are written with streaming stores, where the
    /// target has them ([`Vector::STREAMS`]).
    pub stream_from: usize,
    /// Streamed transposes of 1- to 4-byte elements go through [`panels`] (else through
    /// strips): the better order depends on the CPU's caches (see `x86_64::panels_pay`).
    pub panels: bool,
    /// Micro-tiles that are not streamed are read from the source and written to the
    /// destination in place ([`tile_in_place`]) rather than through the staging buffers (the
    /// architecture module's choice: see `wasm32`).
    pub in_place: bool,
}

/// [`transpose`] for an element size known at run time: `false` (nothing done) unless it is 1,
/// 2, 4 or 8 bytes.
///
/// # Safety
/// As [`crate::copy::kernels::transpose`]; the instruction set of `V` is present.
#[inline(always)]
pub(super) unsafe fn transpose_any<V: Vector>(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
    large: Large,
) -> bool {
    macro_rules! go {
        ($w:literal, $n:literal) => {
            // SAFETY: forwarded contract, with `$w`-byte elements.
            unsafe { transpose::<V, $w, $n>(outer, rows, inner, src, dst, large) }
        };
    }
    match elem {
        1 => go!(1, 16),
        2 => go!(2, 8),
        4 => go!(4, 4),
        8 => go!(8, 2),
        _ => return false,
    }
    true
}
