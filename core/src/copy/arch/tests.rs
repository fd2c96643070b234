//! Exactness of every SIMD kernel this machine can run (SSE2 and AVX2, NEON, simd128) against
//! a naive reference: element sizes 1, 2, 4 and 8; sizes that are not multiples of the
//! micro-tile (ragged edges) and smaller than one; positive and negative column strides, padded
//! columns and several planes; reversed rows short and long, alone and side by side; destinations aligned, one element past a line and one byte past
//! one; with and without streaming stores; and no byte written outside the destination.

use alloc::vec::Vec;

use super::kernels;
use super::simd::Large;
use crate::copy::Axis;

/// A small deterministic generator.
struct Lcg(u64);
impl Lcg {
    fn byte(&mut self) -> u8 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 56) as u8
    }
}

const SENTINEL: u8 = 0xa5;

/// A destination of `len` bytes starting `shift` bytes past a 64-byte boundary, with sentinel
/// bytes around it: (backing, start).
fn destination(len: usize, shift: usize) -> (Vec<u8>, usize) {
    let backing = alloc::vec![SENTINEL; len + 192];
    let start = backing.as_ptr().align_offset(64) + 64 + shift;
    (backing, start)
}

/// The first byte where `out` differs from `expected` (the same length), if any. One slice
/// comparison when they agree: under Miri a per-element loop over every mode's output cost
/// more than the kernels it checks.
fn first_difference(out: &[u8], expected: &[u8]) -> Option<usize> {
    if out == expected {
        return None;
    }
    out.iter().zip(expected).position(|(a, b)| a != b)
}

fn untouched_outside(backing: &[u8], start: usize, len: usize, what: &str) {
    let stray = backing[..start]
        .iter()
        .chain(&backing[start + len..])
        .position(|&b| b != SENTINEL);
    assert_eq!(
        stray, None,
        "{what}: a byte outside the destination was written"
    );
}

/// Destination offsets past a 64-byte boundary: aligned, one element past (streaming starts at
/// the next line), one byte past (no streaming). Under Miri, the last two.
fn shifts(elem: usize) -> &'static [usize] {
    match (cfg!(miri), elem) {
        (true, 1) => &[1],
        (true, 2) => &[2, 1],
        (true, 4) => &[4, 1],
        (true, _) => &[8, 1],
        (false, 1) => &[0, 1],
        (false, 2) => &[0, 2, 1],
        (false, 4) => &[0, 4, 1],
        (false, _) => &[0, 8, 1],
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn transposes_match_the_reference() {
    let mut rng = Lcg(1);
    for (name, transpose, _) in kernels() {
        for elem in [1usize, 2, 4, 8] {
            let e = 64 / elem;
            // (planes, rows, columns): whole micro-tiles, ragged edges, fewer than one tile,
            // and rows of whole lines (the streaming shape).
            // Under Miri one shape: whole micro-tiles, a ragged row, two panels of columns, and
            // two planes where the elements are 4 or 8 bytes (one plane of 1- and 2-byte ones,
            // whose tiles are 4 and 2 times larger, is where Miri's time went).
            let shapes: Vec<(usize, usize, usize)> = if cfg!(miri) {
                alloc::vec![(if elem >= 4 { 2 } else { 1 }, e + 1, 2 * e)]
            } else {
                alloc::vec![
                    (1, e, e),
                    (1, e + 1, e + 3),
                    (1, 2 * e + 5, 3 * e - 1),
                    (1, 9, 11),
                    (1, e - 1, 2 * e),
                    (2, e + 7, 2 * e),
                    (3, 3 * e, 4 * e + 1),
                    // Streamed, over several panels and pieces of columns (see `panels`).
                    (2, 3 * e + 1, 5 * e),
                ]
            };
            for (planes, nr, nc) in shapes {
                let layouts: &[(usize, bool)] = if cfg!(miri) {
                    &[(3, true)]
                } else {
                    &[(0, false), (3, true), (1, false)]
                };
                for &(pad, negative) in layouts {
                    let column = (nr + pad) * elem;
                    let plane = nc * column + 5 * elem;
                    let base = if negative { (nc - 1) * column } else { 0 };
                    let src: Vec<u8> = (0..planes * plane).map(|_| rng.byte()).collect();
                    let cs = if negative {
                        -(column as isize)
                    } else {
                        column as isize
                    };
                    let outer = [Axis {
                        extent: planes,
                        stride: plane as isize,
                    }];
                    let rows = Axis {
                        extent: nr,
                        stride: elem as isize,
                    };
                    let inner = Axis {
                        extent: nc,
                        stride: cs,
                    };
                    let len = planes * nr * nc * elem;
                    // The reference, once for every destination and mode: element (p, r, c)
                    // of the box at ((p × nr + r) × nc + c) × elem.
                    let mut expected = Vec::with_capacity(len);
                    for p in 0..planes {
                        for r in 0..nr {
                            for c in 0..nc {
                                let s = ((base + p * plane + r * elem) as isize + c as isize * cs)
                                    as usize;
                                expected.extend_from_slice(&src[s..s + elem]);
                            }
                        }
                    }
                    for &shift in shifts(elem) {
                        // Streamed through panels and through strips, and not streamed, with
                        // staged micro-tiles or in place (where not streamed).
                        for (stream_from, by_panels, in_place) in [
                            (0, true, false),
                            (0, false, false),
                            (0, false, true),
                            (usize::MAX, false, false),
                            (usize::MAX, false, true),
                        ] {
                            let what = alloc::format!(
                                "{name} elem {elem} {planes}x{nr}x{nc} pad {pad} negative \
                                 {negative} shift {shift} stream_from {stream_from} by_panels \
                                 {by_panels} in_place {in_place}"
                            );
                            let (mut backing, start) = destination(len, shift);
                            // SAFETY: the box's source elements lie inside `src` (columns
                            // `column` apart, planes `plane` apart, from `base`); the
                            // destination holds `len` bytes inside `backing`.
                            let done = unsafe {
                                transpose(
                                    &outer,
                                    rows,
                                    inner,
                                    elem,
                                    src.as_ptr().add(base),
                                    backing.as_mut_ptr().add(start),
                                    Large {
                                        stream_from,
                                        panels: by_panels,
                                        in_place,
                                    },
                                )
                            };
                            assert!(done, "{what}: not taken");
                            if let Some(i) =
                                first_difference(&backing[start..start + len], &expected)
                            {
                                let i = i / elem;
                                let (p, r, c) = (i / (nr * nc), i / nc % nr, i % nc);
                                panic!("{what}: ({p}, {r}, {c}) differs from the reference");
                            }
                            untouched_outside(&backing, start, len, &what);
                        }
                    }
                }
            }
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn reversed_rows_match_the_reference() {
    let mut rng = Lcg(2);
    for (name, _, reverse) in kernels() {
        let Some(reverse) = reverse else { continue };
        for elem in [1usize, 2, 4, 8] {
            // Row lengths: ragged, shorter than a vector, rows of whole lines (streamed side by
            // side once there are enough of them), and a row long enough to be read in chunks.
            let whole_lines = if cfg!(miri) { 64 / elem } else { 256 };
            let long = super::reverse::LONG_ROW_BYTES / elem + 37;
            let lengths: Vec<usize> = if cfg!(miri) {
                alloc::vec![1, 16 / elem + 3, 67, whole_lines, long]
            } else {
                alloc::vec![
                    1,
                    2,
                    16 / elem - 1,
                    16 / elem,
                    16 / elem + 3,
                    67,
                    whole_lines,
                    1001,
                    long
                ]
            };
            for n in lengths {
                let counts: &[usize] = if n == whole_lines { &[3, 9] } else { &[1, 3] };
                for &nrows in counts {
                    let row = (n + 2) * elem;
                    let src: Vec<u8> = (0..nrows * row).map(|_| rng.byte()).collect();
                    let outer = [Axis {
                        extent: nrows,
                        stride: row as isize,
                    }];
                    let inner = Axis {
                        extent: n,
                        stride: -(elem as isize),
                    };
                    let len = nrows * n * elem;
                    // The reference, once for every destination and mode: row r reversed.
                    let mut expected = Vec::with_capacity(len);
                    for r in 0..nrows {
                        for i in 0..n {
                            let s = r * row + (n - 1 - i) * elem;
                            expected.extend_from_slice(&src[s..s + elem]);
                        }
                    }
                    for &shift in shifts(elem) {
                        for stream_from in [0, usize::MAX] {
                            let what = alloc::format!(
                                "{name} elem {elem} {nrows}x{n} shift {shift} stream_from \
                                 {stream_from}"
                            );
                            let (mut backing, start) = destination(len, shift);
                            // SAFETY: row r's elements sit at `(n − 1 − i) × elem` past
                            // `r × row` in `src`; the destination holds `len` bytes inside
                            // `backing`.
                            let done = unsafe {
                                reverse(
                                    &outer,
                                    inner,
                                    elem,
                                    src.as_ptr().add((n - 1) * elem),
                                    backing.as_mut_ptr().add(start),
                                    stream_from,
                                )
                            };
                            assert!(done, "{what}: not taken");
                            if let Some(i) =
                                first_difference(&backing[start..start + len], &expected)
                            {
                                let (r, i) = (i / elem / n, i / elem % n);
                                panic!("{what}: ({r}, {i}) differs from the reference");
                            }
                            untouched_outside(&backing, start, len, &what);
                        }
                    }
                }
            }
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn other_element_sizes_are_left_to_the_portable_kernels() {
    for (name, transpose, reverse) in kernels() {
        let axis = Axis {
            extent: 8,
            stride: 3,
        };
        let (src, mut dst) = ([0u8; 1], [0u8; 1]);
        for elem in [3usize, 12, 16] {
            // SAFETY: a kernel that declines touches nothing.
            let taken = unsafe {
                transpose(
                    &[],
                    axis,
                    axis,
                    elem,
                    src.as_ptr(),
                    dst.as_mut_ptr(),
                    Large {
                        stream_from: 0,
                        panels: true,
                        in_place: false,
                    },
                )
            };
            assert!(!taken, "{name}: elem {elem}");
            if let Some(reverse) = reverse {
                // SAFETY: as above.
                let taken = unsafe { reverse(&[], axis, elem, src.as_ptr(), dst.as_mut_ptr(), 0) };
                assert!(!taken, "{name}: elem {elem}");
            }
        }
    }
}
