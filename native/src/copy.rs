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
/// hold exactly the tensor's compact size. Any strides (negative, zero, permuted) and any
/// whole-byte element size; packed sub-byte tensors must be row-major contiguous.
pub fn copy_to_compact(src: &TensorRef<'_>, dst: &mut [u8]) -> Result<(), Error> {
    if !src.device().is_host_accessible() {
        return Err(Error::NotHostAccessible {
            device: src.device(),
        });
    }
    let needed = src
        .dtype()
        .bytes_for(src.numel(), src.is_subbyte_padded())
        .unwrap_or(u64::MAX);
    if needed != dst.len() as u64 {
        return Err(Error::StorageTooSmall {
            needed,
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
    if bits % 8 != 0 {
        return Err(Error::NotContiguous {
            contiguity: src.contiguity(),
        });
    }
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
    let rows: usize = outer.iter().map(|a| a.extent).product();
    let mut index = [0usize; MAX_NDIM];
    let mut offset: isize = 0;
    let mut out = dst;
    for _ in 0..rows {
        // SAFETY: `offset` is the source offset of an in-bounds row; `out` advances by exactly
        // one row per iteration within `dst`.
        unsafe {
            copy_row(
                src.wrapping_offset(offset),
                inner.stride,
                inner.extent,
                elem,
                out,
            );
            out = out.add(row_bytes);
        }
        // Odometer over the outer axes, innermost first.
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
