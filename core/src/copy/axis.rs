//! The copy plan's axis and its odometer: the leaf room that the planner (`copy/mod.rs`), the
//! portable kernels and the SIMD kernels share, so that no kernel names the planner back.

use crate::layout::MAX_NDIM;

/// One axis of a copy plan: extent and source stride in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    pub(crate) extent: usize,
    pub(crate) stride: isize,
}

/// Calls `f(plane_index, source_offset)` for every combination of the outer axes, in
/// row-major order. Always inlined, so that a kernel's body (the closure) is compiled with its
/// caller's target features (AVX2).
#[inline(always)]
pub(crate) fn for_each_plane(outer: &[Axis], mut f: impl FnMut(usize, isize)) {
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
