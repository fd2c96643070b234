//! The SIMD kernels, chosen under `cfg(target_arch)` in the style of `half`'s `binary16/arch`:
//! `simd` (transposes) and `reverse` (reversed rows) write each kernel once over a small vector
//! trait, and each architecture module implements the trait and picks the instantiation (SSE2
//! or AVX2 on x86_64, NEON on aarch64, simd128 on wasm32 built with `+simd128`). Every entry returns `false` when it does not take a
//! case (an element size other than 1, 2, 4 or 8 bytes), and the caller then runs the
//! portable kernel; a target without SIMD kernels always does.

use super::Axis;

cfg_if::cfg_if! {
    if #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))] {
        mod reverse;
        mod simd;
        mod x86_64;
        pub(super) use x86_64::{reverse_rows, transpose};
        #[cfg(all(test, feature = "alloc"))]
        use x86_64::kernels;
    } else if #[cfg(all(target_arch = "aarch64", target_feature = "neon"))] {
        mod reverse;
        mod simd;
        mod aarch64;
        pub(super) use aarch64::{reverse_rows, transpose};
        #[cfg(all(test, feature = "alloc"))]
        use aarch64::kernels;
    } else if #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))] {
        mod reverse;
        mod simd;
        mod wasm32;
        pub(super) use wasm32::{reverse_rows, transpose};
        #[cfg(all(test, feature = "alloc"))]
        use wasm32::kernels;
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

#[cfg(all(
    test,
    feature = "alloc",
    any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "aarch64", target_feature = "neon"),
        all(target_arch = "wasm32", target_feature = "simd128"),
    )
))]
mod tests;
