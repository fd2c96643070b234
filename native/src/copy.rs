//! Fast strided → compact copies of host memory.
//!
//! The plan, once per copy: drop extent-1 axes, merge axes that are contiguous with each other,
//! then pick a kernel: one `memcpy` for dense data, a `memcpy` per row when the innermost axis is
//! contiguous, a 2-D tiled transpose when the source is contiguous along the destination's
//! second-innermost axis, and otherwise a strided gather specialised for 1, 2, 4, 8 and 16-byte
//! elements. Outer axes are walked with an odometer that updates one offset incrementally.

use dlport_core::layout::MAX_NDIM;
use dlport_core::{Error, TensorRef};

/// One axis of a copy plan: extent and source stride in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Axis {
    extent: usize,
    stride: isize,
}

/// A copy reduced to its essential axes (outermost first).
#[derive(Clone, Debug)]
struct Plan {
    axes: [Axis; MAX_NDIM],
    n: usize,
    elem: usize,
}

impl Plan {
    fn new(shape: &[i64], strides: impl Iterator<Item = i64>, elem: usize) -> Self {
        let mut axes = [Axis {
            extent: 1,
            stride: 0,
        }; MAX_NDIM];
        let mut n = 0;
        for (&extent, stride) in shape.iter().zip(strides) {
            if extent == 1 {
                continue;
            }
            // Validated: |stride × (extent − 1) × elem| fits in the span, hence in isize.
            let axis = Axis {
                extent: extent as usize,
                stride: (stride as isize).wrapping_mul(elem as isize),
            };
            if n > 0 {
                let prev = axes[n - 1];
                if prev.stride == axis.stride.wrapping_mul(axis.extent as isize) {
                    axes[n - 1] = Axis {
                        extent: prev.extent * axis.extent,
                        stride: axis.stride,
                    };
                    continue;
                }
            }
            axes[n] = axis;
            n += 1;
        }
        Self { axes, n, elem }
    }

    fn axes(&self) -> &[Axis] {
        &self.axes[..self.n]
    }
}

/// Copies every element of a host-accessible tensor, in row-major order, into `dst`, which must
/// hold exactly the tensor's compact size (`compact_bytes`). Any strides (negative, zero,
/// permuted) and any element size; sub-byte elements (packed or padded) come out packed.
pub fn copy_to_compact(src: &TensorRef<'_>, dst: &mut [u8]) -> Result<(), Error> {
    if !src.device().is_host_accessible() {
        return Err(Error::NotHostAccessible {
            device: src.device(),
        });
    }
    if src.dtype().is_sub_byte() {
        // Packed or padded sub-byte elements: the core's bit gather, which packs them (the
        // one definition of a compact sub-byte tensor).
        return dlport_core::backend::copy_to_compact(src, dst);
    }
    let needed = u128::from(src.numel()) * u128::from(src.dtype().storage_bits(false) / 8);
    if needed != dst.len() as u128 {
        return Err(Error::DestinationSize {
            needed: u64::try_from(needed).unwrap_or(u64::MAX),
            available: dst.len() as u64,
        });
    }
    if src.numel() == 0 {
        return Ok(());
    }
    if src.contiguity().is_row_major() {
        dst.copy_from_slice(src.as_bytes()?);
        return Ok(());
    }
    let bits = src.layout().element_bits;
    let plan = Plan::new(src.shape(), src.strides(), (bits / 8) as usize);
    let base = (src.data() as *const u8).wrapping_add(src.byte_offset() as usize);
    // SAFETY: `base` plus every offset the plan produces for in-bounds indices stays inside the
    // span that validation checked and the view keeps readable; `dst` holds numel × elem bytes,
    // exactly what the plan writes, and cannot overlap memory we only read through `src`.
    unsafe { run(&plan, base, dst.as_mut_ptr()) };
    Ok(())
}

/// Executes a plan.
///
/// # Safety
/// Every source offset reachable by the plan's indices is readable from `src`; `dst` is valid
/// for `product(extents) × elem` bytes of writes and does not overlap the source.
unsafe fn run(plan: &Plan, src: *const u8, dst: *mut u8) {
    let axes = plan.axes();
    let elem = plan.elem;
    let Some((&inner, outer)) = axes.split_last() else {
        // Every extent is 1: one element.
        // SAFETY: one element is readable and writable (contract).
        unsafe { core::ptr::copy_nonoverlapping(src, dst, elem) };
        return;
    };
    // Transpose-like: the source is contiguous along the destination's second-innermost axis.
    if let Some(&rows) = outer.last() {
        if rows.stride == elem as isize
            && inner.stride != elem as isize
            && rows.extent >= 8
            && inner.extent >= 8
        {
            // SAFETY: forwarded contract; the tiles cover exactly the outer × rows × inner box.
            unsafe { run_tiled(&outer[..outer.len() - 1], rows, inner, elem, src, dst) };
            return;
        }
    }
    let row_bytes = inner.extent * elem;
    #[cfg(target_arch = "x86_64")]
    let rows: usize = outer.iter().map(|a| a.extent).product();
    // Large reversed rows of 4-byte elements go through SSE with streaming stores when every
    // row starts 16-byte aligned.
    #[cfg(target_arch = "x86_64")]
    let reverse_stream = elem == 4
        && inner.stride == -4
        && rows * row_bytes >= sse::STREAM_BYTES
        && (dst as usize) % 16 == 0
        && row_bytes % 16 == 0;
    #[cfg(not(target_arch = "x86_64"))]
    let reverse_stream = false;
    for_each_plane(outer, |r, offset| {
        let row = src.wrapping_offset(offset);
        // SAFETY: row r of the destination starts r × row_bytes in, inside `dst` (contract).
        let out = unsafe { dst.add(r * row_bytes) };
        if reverse_stream {
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: as below; `out` is 16-byte aligned because `dst` is and rows are
                // whole multiples of 16 bytes.
                unsafe { sse::reverse_4byte_stream(row, inner.extent, out) };
            }
        } else {
            // SAFETY: `offset` is the source offset of an in-bounds row; `out` is row r of the
            // destination.
            unsafe { copy_row(row, inner.stride, inner.extent, elem, out) };
        }
    });
    #[cfg(target_arch = "x86_64")]
    if reverse_stream {
        sse::fence();
    }
}

/// Copies `n` elements of `elem` bytes, `stride` bytes apart, into a contiguous row.
///
/// # Safety
/// The `n` source elements are readable and `dst` is writable for `n × elem` bytes.
#[inline(always)]
unsafe fn copy_row(src: *const u8, stride: isize, n: usize, elem: usize, dst: *mut u8) {
    if stride == elem as isize {
        // SAFETY: a contiguous row (contract).
        unsafe { core::ptr::copy_nonoverlapping(src, dst, n * elem) };
        return;
    }
    macro_rules! gather {
        ($t:ty) => {{
            let d = dst.cast::<$t>();
            if stride == -(elem as isize) {
                // Reversed contiguous row: a constant step lets the compiler vectorise.
                let s = src.cast::<$t>();
                for i in 0..n {
                    // SAFETY: element i sits at src − i × elem (contract); unaligned accesses.
                    unsafe {
                        let v = core::ptr::read_unaligned(s.wrapping_sub(i));
                        core::ptr::write_unaligned(d.add(i), v);
                    }
                }
                return;
            }
            for i in 0..n {
                // SAFETY: element i is readable at src + i × stride and writable at d + i
                // (contract); unaligned accesses make no alignment assumption.
                unsafe {
                    let v = core::ptr::read_unaligned(
                        src.wrapping_offset(i as isize * stride).cast::<$t>(),
                    );
                    core::ptr::write_unaligned(d.add(i), v);
                }
            }
        }};
    }
    match elem {
        1 => gather!(u8),
        2 => gather!(u16),
        4 => gather!(u32),
        8 => gather!(u64),
        16 => gather!(u128),
        _ => {
            for i in 0..n {
                // SAFETY: as above, byte-wise for odd element sizes.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        src.wrapping_offset(i as isize * stride),
                        dst.add(i * elem),
                        elem,
                    )
                }
            }
        }
    }
}

/// Side of the square tiles used for transposes (in elements): 32 measured best here (see
/// BENCHMARKS.md); 8 and 64 were slower at 64 MiB.
const TILE: usize = 32;

/// Copies `outer × rows × inner` where the source walks `rows` contiguously: tile by tile, so
/// both the reads (along `rows`) and the writes (along `inner`) stay in cache.
///
/// # Safety
/// As [`run`].
unsafe fn run_tiled(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
) {
    macro_rules! typed {
        ($t:ty) => {
            // SAFETY: forwarded contract; `$t` is exactly `elem` bytes wide.
            unsafe { tiled::<$t>(outer, rows, inner, src, dst) }
        };
    }
    #[cfg(target_arch = "x86_64")]
    if elem == 4 {
        // SAFETY: forwarded contract; 4-byte elements.
        unsafe { sse::tiled_4byte(outer, rows, inner, src, dst) };
        return;
    }
    match elem {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        8 => typed!(u64),
        16 => typed!(u128),
        _ => {
            // Odd element sizes: a generic byte copy per element, same tiling.
            let plane = rows.extent * inner.extent * elem;
            for_each_plane(outer, |p, offset| {
                let base = src.wrapping_offset(offset);
                // SAFETY: plane p of the destination holds rows × inner elements.
                let out = unsafe { dst.add(p * plane) };
                for r0 in (0..rows.extent).step_by(TILE) {
                    for c0 in (0..inner.extent).step_by(TILE) {
                        for c in c0..(c0 + TILE).min(inner.extent) {
                            let column = base.wrapping_offset(c as isize * inner.stride);
                            for r in r0..(r0 + TILE).min(rows.extent) {
                                // SAFETY: (r, c) is in bounds on both sides.
                                unsafe {
                                    core::ptr::copy_nonoverlapping(
                                        column.wrapping_add(r * elem),
                                        out.add((r * inner.extent + c) * elem),
                                        elem,
                                    )
                                };
                            }
                        }
                    }
                }
            });
        }
    }
}

/// Calls `f(plane_index, source_offset)` for every combination of the outer axes.
fn for_each_plane(outer: &[Axis], mut f: impl FnMut(usize, isize)) {
    let planes: usize = outer.iter().map(|a| a.extent).product();
    let mut index = [0usize; MAX_NDIM];
    let mut offset: isize = 0;
    for p in 0..planes {
        f(p, offset);
        for k in (0..outer.len()).rev() {
            index[k] += 1;
            offset += outer[k].stride;
            if index[k] < outer[k].extent {
                break;
            }
            offset -= outer[k].stride * outer[k].extent as isize;
            index[k] = 0;
        }
    }
}

/// The tiled transpose for one element type.
///
/// # Safety
/// As [`run`], with `size_of::<T>()` equal to the element size.
unsafe fn tiled<T: Copy>(outer: &[Axis], rows: Axis, inner: Axis, src: *const u8, dst: *mut u8) {
    let (nr, nc) = (rows.extent, inner.extent);
    let cstride = inner.stride;
    for_each_plane(outer, |p, offset| {
        let base = src.wrapping_offset(offset);
        // SAFETY: plane p of the destination holds nr × nc elements of T.
        let out = unsafe { dst.cast::<T>().add(p * nr * nc) };
        for r0 in (0..nr).step_by(TILE) {
            let r1 = (r0 + TILE).min(nr);
            for c0 in (0..nc).step_by(TILE) {
                let c1 = (c0 + TILE).min(nc);
                for r in r0..r1 {
                    let row_src = base.wrapping_add(r * core::mem::size_of::<T>());
                    // SAFETY: destination row r, columns c0..c1, inside the plane.
                    let row_dst = unsafe { out.add(r * nc) };
                    for c in c0..c1 {
                        // SAFETY: (r, c) is in bounds: the source element is readable (contract)
                        // and the destination slot is inside the plane; unaligned accesses.
                        unsafe {
                            let v = core::ptr::read_unaligned(
                                row_src.wrapping_offset(c as isize * cstride).cast::<T>(),
                            );
                            core::ptr::write_unaligned(row_dst.add(c), v);
                        }
                    }
                }
            }
        }
    });
}

/// Transposes of 4-byte elements with SSE2 (part of every x86-64 CPU, so no run-time
/// detection). The unit of work is a 16 × 16 micro-tile: its 16 source columns are read whole
/// (one 64-byte line each, four 16-byte loads back to back) into a 1 KiB buffer, then written
/// out as 16 destination rows of 64 bytes through in-register 4 × 4 transposes. Reading each
/// source line whole matters for power-of-two strides, where all 16 columns fall into the same
/// cache set; micro-tiles are grouped in 256 × 256 blocks so that the pages a block touches
/// stay in the TLB. Ragged edges use the scalar tiles.
#[cfg(target_arch = "x86_64")]
mod sse {
    use super::{Axis, for_each_plane};
    use core::arch::x86_64::{
        __m128, _mm_loadu_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_setzero_ps, _mm_sfence,
        _mm_shuffle_ps, _mm_storeu_ps, _mm_stream_ps, _mm_unpackhi_ps, _mm_unpacklo_ps,
    };

    /// Side of a micro-tile, in elements.
    const MICRO: usize = 16;
    /// Side of a block of micro-tiles, in elements.
    const BLOCK: usize = 64;
    /// Destinations at least this large are written with non-temporal stores (they would only
    /// evict the source from the caches); transposes stream only whole cache lines.
    pub(super) const STREAM_BYTES: usize = 8 << 20;

    /// Orders streaming stores before whatever the caller does next.
    pub(super) fn fence() {
        // SAFETY: SSE is part of x86-64; a fence has no other effect.
        unsafe { _mm_sfence() };
    }

    /// Copies the `n` elements at `src`, `src − 4`, … (a reversed row of 4-byte elements) to
    /// `dst` with streaming stores; the caller calls [`fence`] afterwards.
    ///
    /// # Safety
    /// The `n` source elements are readable, `dst` is writable for `4n` bytes and 16-byte
    /// aligned.
    pub(super) unsafe fn reverse_4byte_stream(src: *const u8, n: usize, dst: *mut u8) {
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
    /// As [`super::run`], with 4-byte elements.
    pub(super) unsafe fn tiled_4byte(
        outer: &[Axis],
        rows: Axis,
        inner: Axis,
        src: *const u8,
        dst: *mut u8,
    ) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_merge_contiguous_axes_and_drop_unit_axes() {
        let p = Plan::new(&[2, 1, 3, 4], [12, 99, 4, 1].into_iter(), 4);
        assert_eq!(
            p.axes(),
            &[Axis {
                extent: 24,
                stride: 4
            }]
        );
        let p = Plan::new(&[3, 4], [1, 3].into_iter(), 2);
        assert_eq!(
            p.axes(),
            &[
                Axis {
                    extent: 3,
                    stride: 2
                },
                Axis {
                    extent: 4,
                    stride: 6
                }
            ]
        );
        let p = Plan::new(&[5, 2], [-2, 1].into_iter(), 8);
        assert_eq!(
            p.axes(),
            &[
                Axis {
                    extent: 5,
                    stride: -16
                },
                Axis {
                    extent: 2,
                    stride: 8
                }
            ]
        );
    }
}
