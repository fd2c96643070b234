//! Strided → compact copies of host memory: the one implementation every backend and every
//! target uses (no OS needed, so the browser and bare-metal builds run the same planner).
//!
//! The plan, once per copy: drop extent-1 axes, merge axes that are contiguous with each other,
//! then pick a kernel: one `memcpy` for dense data, a `memcpy` per row when the innermost axis is
//! contiguous, a tiled transpose when the source is contiguous along the destination's
//! second-innermost axis, a reversed row when the innermost stride is minus one element, and
//! otherwise a strided gather specialised for 1, 2, 4, 8 and 16-byte elements. Outer axes are
//! walked with an odometer that updates one offset incrementally.
//!
//! Kernels: `kernels` holds the portable ones (plain Rust, every target); `arch` holds the
//! SIMD ones, chosen under `cfg(target_arch)`; a target without them runs the portable ones.
//! Sub-byte elements (packed or padded) go through a bit gather and always come out packed.

mod arch;
mod axis;
mod host;
mod kernels;
mod subbyte;

pub(crate) use axis::{Axis, for_each_plane};
pub use host::{AlignedBuffer, CPU_ALIGN, allocation_bytes, compact_bytes};
pub(crate) use host::{compact_copy, compact_copy_aligned, reserved_bytes};

use crate::error::{AccessError, DispatchError, Error};
use crate::layout::MAX_NDIM;
use crate::view::TensorRef;

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

impl TensorRef<'_> {
    /// Copies every element, in row-major order, into `dst`: the compact form of the tensor,
    /// whatever its strides (negative, zero, permuted) and its element size. The one
    /// compaction of dlport: imports, exports and every backend's host copies go through it.
    ///
    /// `dst` holds exactly the compact size,
    /// `self.dtype().bytes_for(self.numel(), false)` bytes
    /// ([`DispatchError::DestinationSize`] otherwise); the memory must be host-accessible
    /// ([`AccessError::NotHostAccessible`] otherwise). Sub-byte elements, packed or padded
    /// (IS_SUBBYTE_TYPE_PADDED), come out **packed** (little bit-endian, element i at bit
    /// `i × bits × lanes`): the compact form every consumer reads, legacy ones included. An
    /// owned, typed copy is [`to_vec`](Self::to_vec).
    ///
    /// # Examples
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    ///
    /// // A 2×3 matrix stored column-major: strides (1, 2).
    /// let t = ExportBuilder::from_vec(vec![1u8, 4, 2, 5, 3, 6], &[2, 3])
    ///     .strides(&[1, 2])
    ///     .build()?;
    /// let view = t.view();
    /// let len = view.dtype().bytes_for(view.numel(), false).expect("fits") as usize;
    /// let mut row_major = vec![0u8; len];
    /// view.copy_to_compact(&mut row_major)?;
    /// assert_eq!(row_major, [1, 2, 3, 4, 5, 6]);
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn copy_to_compact(&self, dst: &mut [u8]) -> Result<(), Error> {
        if !self.device().is_host_accessible() {
            return Err(Error::Access(AccessError::NotHostAccessible {
                device: self.device(),
            }));
        }
        let needed =
            (u128::from(self.numel()) * u128::from(self.dtype().storage_bits(false))).div_ceil(8);
        if needed != dst.len() as u128 {
            return Err(Error::Dispatch(DispatchError::DestinationSize {
                needed: u64::try_from(needed).unwrap_or(u64::MAX),
                available: dst.len() as u64,
            }));
        }
        if self.numel() == 0 {
            return Ok(());
        }
        if self.dtype().is_sub_byte() {
            subbyte::gather(self, dst);
            return Ok(());
        }
        if self.contiguity().is_row_major() {
            dst.copy_from_slice(self.as_bytes()?);
            return Ok(());
        }
        let elem = (self.layout().element_bits / 8) as usize;
        let plan = Plan::new(self.shape(), self.strides(), elem);
        // SAFETY: the first element plus every offset the plan produces for in-bounds indices
        // stays inside the span that validation checked and the view keeps readable; `dst`
        // holds numel × elem bytes, exactly what the plan writes, and cannot overlap memory we
        // only read through `self` (it is a `&mut`).
        unsafe {
            run(
                &plan,
                self.first_element_ptr().cast_const(),
                dst.as_mut_ptr(),
            )
        };
        Ok(())
    }
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
            let outer = &outer[..outer.len() - 1];
            // SAFETY: forwarded contract; the kernels cover exactly the outer × rows × inner
            // box.
            if !unsafe { arch::transpose(outer, rows, inner, elem, src, dst) } {
                // SAFETY: as above.
                unsafe { kernels::transpose(outer, rows, inner, elem, src, dst) };
            }
            return;
        }
    }
    if inner.stride == -(elem as isize) {
        // SAFETY: forwarded contract: every row's source elements are readable, and the
        // destination holds every row.
        if unsafe { arch::reverse_rows(outer, inner, elem, src, dst) } {
            return;
        }
    }
    let row_bytes = inner.extent * elem;
    for_each_plane(outer, |r, offset| {
        let row = src.wrapping_offset(offset);
        // SAFETY: row r of the destination starts r × row_bytes in, inside `dst` (contract).
        let out = unsafe { dst.add(r * row_bytes) };
        // SAFETY: `offset` is the source offset of an in-bounds row; `out` is row r of the
        // destination.
        unsafe { kernels::copy_row(row, inner.stride, inner.extent, elem, out) };
    });
}

#[cfg(test)]
mod tests;
