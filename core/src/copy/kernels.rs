//! The portable kernels: plain Rust for every target (the compiler vectorises what it can).
//! The SIMD kernels in `arch` fall back to these for ragged edges and element sizes they do
//! not cover.

use super::{Axis, for_each_plane};

/// Copies `n` elements of `elem` bytes, `stride` bytes apart, into a contiguous row.
///
/// # Safety
/// The `n` source elements are readable and `dst` is writable for `n × elem` bytes, not
/// overlapping them.
#[inline(always)]
pub(crate) unsafe fn copy_row(src: *const u8, stride: isize, n: usize, elem: usize, dst: *mut u8) {
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

/// Side of the square tiles of the portable transposes (in elements): a 32 × 32 tile of up to
/// 8-byte elements (8 KiB) fits in L1 with its destination.
const TILE: usize = 32;

/// The portable transpose: `outer × rows × inner` where the source walks `rows` contiguously
/// (`rows.stride == elem`), tile by tile, so both the reads (along `rows`) and the writes
/// (along `inner`) stay in cache.
///
/// # Safety
/// Every source element of the box is readable; `dst` is writable for the whole box
/// (`outer × rows × inner × elem` bytes) and does not overlap the source.
pub(crate) unsafe fn transpose(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    elem: usize,
    src: *const u8,
    dst: *mut u8,
) {
    let nc = inner.extent;
    let (all_rows, all_cols) = (0..rows.extent, 0..nc);
    macro_rules! typed {
        ($e:literal) => {
            // SAFETY: forwarded contract; the region is the whole box.
            unsafe { transpose_region::<$e>(outer, rows, inner, src, dst, all_rows, all_cols) }
        };
    }
    match elem {
        1 => typed!(1),
        2 => typed!(2),
        4 => typed!(4),
        8 => typed!(8),
        16 => typed!(16),
        _ => {
            // Odd element sizes: a byte copy per element, same tiling.
            let plane = rows.extent * nc * elem;
            for_each_plane(outer, |p, offset| {
                let base = src.wrapping_offset(offset);
                // SAFETY: plane p of the destination holds rows × inner elements (contract).
                let out = unsafe { dst.add(p * plane) };
                for r0 in (0..rows.extent).step_by(TILE) {
                    for c0 in (0..nc).step_by(TILE) {
                        for c in c0..(c0 + TILE).min(nc) {
                            let column = base.wrapping_offset(c as isize * inner.stride);
                            for r in r0..(r0 + TILE).min(rows.extent) {
                                // SAFETY: (r, c) is in bounds on both sides (contract).
                                unsafe {
                                    core::ptr::copy_nonoverlapping(
                                        column.wrapping_add(r * elem),
                                        out.add((r * nc + c) * elem),
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

/// The tiled scalar transpose of the rectangle `rs × cs` of every plane, for `E`-byte
/// elements: the whole box, or the ragged edges a SIMD kernel left.
///
/// # Safety
/// As [`transpose`], with `rs` and `cs` inside `0..rows.extent` and `0..inner.extent`.
#[inline]
pub(crate) unsafe fn transpose_region<const E: usize>(
    outer: &[Axis],
    rows: Axis,
    inner: Axis,
    src: *const u8,
    dst: *mut u8,
    rs: core::ops::Range<usize>,
    cs: core::ops::Range<usize>,
) {
    let (nr, nc) = (rows.extent, inner.extent);
    let cstride = inner.stride;
    for_each_plane(outer, |p, offset| {
        let base = src.wrapping_offset(offset);
        // SAFETY: plane p of the destination holds nr × nc elements (contract).
        let out = unsafe { dst.cast::<[u8; E]>().add(p * nr * nc) };
        for r0 in rs.clone().step_by(TILE) {
            let r1 = (r0 + TILE).min(rs.end);
            for c0 in cs.clone().step_by(TILE) {
                let c1 = (c0 + TILE).min(cs.end);
                for r in r0..r1 {
                    let row_src = base.wrapping_add(r * E);
                    // SAFETY: destination row r, inside the plane (contract).
                    let row_dst = unsafe { out.add(r * nc) };
                    for c in c0..c1 {
                        // SAFETY: (r, c) is in bounds: the source element is readable
                        // (contract) and the destination slot is inside the plane; `[u8; E]`
                        // has alignment 1.
                        unsafe {
                            let v = row_src
                                .wrapping_offset(c as isize * cstride)
                                .cast::<[u8; E]>()
                                .read();
                            row_dst.add(c).write(v);
                        }
                    }
                }
            }
        }
    });
}
