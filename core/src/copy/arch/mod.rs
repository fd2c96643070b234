//! The SIMD kernels, one module per architecture, chosen under `cfg(target_arch)`. Each entry
//! returns `false` when it does not handle a case (element size, size, alignment), and the
//! caller then runs the portable kernel.

use super::Axis;

cfg_if::cfg_if! {
    if #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))] {
        mod x86_64;
        pub(super) use x86_64::{reverse_rows, transpose};
    } else {
        /// No SIMD transpose on this target.
        ///
        /// # Safety
        /// As [`super::kernels::transpose`] (nothing is accessed).
        pub(super) unsafe fn transpose(
            _outer: &[Axis],
            _rows: Axis,
            _inner: Axis,
            _elem: usize,
            _src: *const u8,
            _dst: *mut u8,
        ) -> bool {
            false
        }

        /// No SIMD reversed rows on this target.
        ///
        /// # Safety
        /// Every row of the source is readable; `dst` is writable for all rows (nothing is
        /// accessed here).
        pub(super) unsafe fn reverse_rows(
            _outer: &[Axis],
            _inner: Axis,
            _elem: usize,
            _src: *const u8,
            _dst: *mut u8,
        ) -> bool {
            false
        }
    }
}
