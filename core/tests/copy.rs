//! Strided → compact copies, checked element by element against the core's reference reader
//! for every stride pattern (negative, zero, permuted, gaps) and many element sizes.

use dlport_core::abi::TypeCode;
use dlport_core::backend::{Backend, CpuBackend};
use dlport_core::{DataType, Device, ExportBuilder};

/// A small deterministic generator (no dependency needed).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Builds a random strided view over a byte buffer and checks the copy.
fn check(rng: &mut Lcg, elem: usize, ndim: usize) {
    let dtype = match elem {
        1 => DataType::UINT8,
        2 => DataType::UINT16,
        3 => DataType::new(TypeCode::UINT, 8, 3),
        4 => DataType::UINT32,
        8 => DataType::UINT64,
        12 => DataType::new(TypeCode::FLOAT, 32, 3),
        16 => DataType::COMPLEX128,
        _ => unreachable!(),
    };
    let shape: Vec<i64> = (0..ndim)
        .map(|_| rng.below(5) as i64 + if rng.below(4) == 0 { 0 } else { 1 })
        .collect();
    let strides: Vec<i64> = (0..ndim).map(|_| rng.below(13) as i64 - 6).collect();
    // Place the first element so that negative strides stay inside the buffer.
    let lo: i64 = shape
        .iter()
        .zip(&strides)
        .map(|(&e, &s)| if s < 0 && e > 0 { (e - 1) * s } else { 0 })
        .sum();
    let hi: i64 = shape
        .iter()
        .zip(&strides)
        .map(|(&e, &s)| if s > 0 && e > 0 { (e - 1) * s } else { 0 })
        .sum();
    let offset_elems = -lo;
    let total = (offset_elems + hi + 1) as usize * elem + 7;
    let bytes: Vec<u8> = (0..total).map(|i| (i * 31 + 7) as u8).collect();
    let pad = rng.below(4) as usize;
    let byte_offset = offset_elems as u64 * elem as u64 + pad as u64;
    let t = ExportBuilder::new(bytes.clone(), dtype, &shape)
        .strides(&strides)
        .byte_offset(byte_offset)
        .build()
        .unwrap_or_else(|e| panic!("{shape:?} {strides:?}: {e}"));
    let view = t.view();
    let numel = view.numel() as usize;
    let mut out = vec![0u8; numel * elem];
    view.copy_to_compact(&mut out).unwrap();
    // Reference: walk the multi-index in row-major order.
    let mut index = vec![0i64; ndim];
    for k in 0..numel {
        let off: i64 = byte_offset as i64
            + index
                .iter()
                .zip(&strides)
                .map(|(&i, &s)| i * s)
                .sum::<i64>()
                * elem as i64;
        let expected = &bytes[off as usize..off as usize + elem];
        assert_eq!(
            &out[k * elem..(k + 1) * elem],
            expected,
            "elem {elem} shape {shape:?} strides {strides:?} at {index:?}"
        );
        for axis in (0..ndim).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

#[test]
fn random_layouts_match_the_reference() {
    let mut rng = Lcg(42);
    for elem in [1, 2, 3, 4, 8, 12, 16] {
        for ndim in 0..=if cfg!(miri) { 4 } else { 5 } {
            for _ in 0..if cfg!(miri) { 2 } else { 60 } {
                check(&mut rng, elem, ndim);
            }
        }
    }
}

#[test]
fn transposes_take_the_tiled_path_and_stay_exact() {
    let sizes: &[(usize, usize)] = if cfg!(miri) {
        &[(8, 8), (9, 12), (16, 16), (17, 33)]
    } else {
        &[(8, 8), (33, 70), (100, 77), (256, 3), (64, 64), (37, 41)]
    };
    for &(rows, cols) in sizes {
        for elem in [1usize, 2, 4, 8] {
            let n = rows * cols;
            let data: Vec<u64> = (0..n as u64).collect();
            // Source is (cols, rows) row-major; we copy its transpose (rows, cols).
            let (dtype, bytes): (DataType, Vec<u8>) = match elem {
                1 => (DataType::UINT8, data.iter().map(|&x| x as u8).collect()),
                2 => (
                    DataType::BFLOAT16,
                    data.iter()
                        .flat_map(|&x| (x as u16).to_ne_bytes())
                        .collect(),
                ),
                4 => (
                    DataType::UINT32,
                    data.iter()
                        .flat_map(|&x| (x as u32).to_ne_bytes())
                        .collect(),
                ),
                _ => (
                    DataType::UINT64,
                    data.iter().flat_map(|&x| x.to_ne_bytes()).collect(),
                ),
            };
            let t = ExportBuilder::new(bytes.clone(), dtype, &[rows as i64, cols as i64])
                .strides(&[1, rows as i64])
                .build()
                .unwrap();
            let mut out = vec![0u8; n * elem];
            t.view().copy_to_compact(&mut out).unwrap();
            for r in 0..rows {
                for c in 0..cols {
                    let src = (c * rows + r) * elem;
                    let dst = (r * cols + c) * elem;
                    assert_eq!(
                        &out[dst..dst + elem],
                        &bytes[src..src + elem],
                        "{rows}x{cols} e{elem} ({r},{c})"
                    );
                }
            }
        }
    }
}

/// Copies `t` into `n` u32 slots starting `shift` words past the first `align`-byte boundary of
/// a buffer, for each shift, and checks every element against `want`.
fn copy_at_shifts(
    t: &dlport_core::ManagedTensor,
    n: usize,
    align: usize,
    shifts: &[usize],
    want: impl Fn(usize) -> u32,
    what: &str,
) {
    let mut backing = vec![0u32; n + 16];
    let lead = backing.as_ptr().align_offset(align);
    for &shift in shifts {
        let out = &mut backing[lead + shift..lead + shift + n];
        // SAFETY: viewing initialised u32s as bytes.
        let out_bytes =
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), n * 4) };
        t.view().copy_to_compact(out_bytes).unwrap();
        for (i, &v) in out.iter().enumerate() {
            assert_eq!(v, want(i), "{what} +{shift} words: element {i}");
        }
    }
}

/// Transposes of 4-byte elements beyond 8 MiB take the streaming-store path when the
/// destination is 64-byte aligned and rows are whole cache lines; check it, its unaligned twin and
/// ragged edges element by element.
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of MiB of element-by-element checks is too slow under Miri"
)]
fn large_transposes_stay_exact_with_and_without_streaming_stores() {
    for (rows, cols) in [(1100usize, 2000usize), (1101, 2003)] {
        let n = rows * cols;
        let src: Vec<u32> = (0..n as u32)
            .map(|x| x.wrapping_mul(2_654_435_761))
            .collect();
        let bytes: Vec<u8> = src.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let t = ExportBuilder::new(bytes, DataType::UINT32, &[rows as i64, cols as i64])
            .strides(&[1, rows as i64])
            .build()
            .unwrap();
        // Destinations 64-byte aligned (streamed), 16 bytes past a line (streamed from the
        // first aligned column on), and only 4-byte aligned (not streamed).
        let want = |i: usize| src[(i % cols) * rows + i / cols];
        copy_at_shifts(&t, n, 64, &[0, 4, 1], want, &format!("{rows}x{cols}"));
    }
}

/// Transposes of every SIMD element size (u8, bf16, f32, f64) beyond 8 MiB take the streaming
/// path when the destination rows are whole lines; check them byte by byte, with the destination
/// aligned, one element past a line (streaming from the first aligned column) and one byte past
/// one (no streaming), and a smaller ragged transpose.
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of MiB of element-by-element checks is too slow under Miri"
)]
fn large_transposes_of_every_element_size_stay_exact() {
    for (elem, dtype) in [
        (1usize, DataType::UINT8),
        (2, DataType::BFLOAT16),
        (4, DataType::FLOAT32),
        (8, DataType::FLOAT64),
    ] {
        // Rows of whole lines past 8 MiB (streamed), and a ragged, smaller one (not streamed).
        for (rows, cols) in [(1027usize, 8192 / elem + 64), (101, 803)] {
            let n = rows * cols;
            let bytes: Vec<u8> = (0..n * elem)
                .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
                .collect();
            let t = ExportBuilder::new(bytes.clone(), dtype, &[rows as i64, cols as i64])
                .strides(&[1, rows as i64])
                .build()
                .unwrap();
            let mut want = vec![0u8; n * elem];
            for r in 0..rows {
                for c in 0..cols {
                    let (s, d) = ((c * rows + r) * elem, (r * cols + c) * elem);
                    want[d..d + elem].copy_from_slice(&bytes[s..s + elem]);
                }
            }
            let mut backing = vec![0u8; n * elem + 128];
            let lead = backing.as_ptr().align_offset(64);
            for shift in [0, elem, 1] {
                let out = &mut backing[lead + shift..lead + shift + n * elem];
                t.view().copy_to_compact(out).unwrap();
                if let Some(at) = out.iter().zip(&want).position(|(a, b)| a != b) {
                    let (r, c) = (at / elem / cols, at / elem % cols);
                    panic!("elem {elem} {rows}x{cols} +{shift} bytes: ({r}, {c}) differs");
                }
            }
        }
    }
}

/// Large reversed rows of 4-byte elements take the streaming path (16-byte-aligned
/// destination, rows of whole 16-byte multiples); check it and its unaligned and ragged twins.
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of MiB of element-by-element checks is too slow under Miri"
)]
fn large_reversed_rows_stay_exact_with_and_without_streaming_stores() {
    // (rows, cols): a[:, ::-1] with whole-vector rows, and 1-d reversals of even and odd length.
    for (rows, cols) in [(1100usize, 2000usize), (1, 2_200_000), (1, 2_200_001)] {
        let n = rows * cols;
        let src: Vec<u32> = (0..n as u32)
            .map(|x| x.wrapping_mul(2_654_435_761))
            .collect();
        let bytes: Vec<u8> = src.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let t = ExportBuilder::new(bytes, DataType::UINT32, &[rows as i64, cols as i64])
            .strides(&[cols as i64, -1])
            .byte_offset((cols as u64 - 1) * 4)
            .build()
            .unwrap();
        let want = |i: usize| src[(i / cols) * cols + cols - 1 - i % cols];
        copy_at_shifts(&t, n, 16, &[0, 1], want, &format!("{rows}x{cols}"));
    }
}

#[test]
fn broadcast_and_reversed_views() {
    let t = ExportBuilder::from_vec(vec![1.0f32, 2.0, 3.0], &[4, 3])
        .strides(&[0, 1])
        .build()
        .unwrap();
    let mut out = vec![0u8; 48];
    t.view().copy_to_compact(&mut out).unwrap();
    let got: Vec<f32> = out
        .chunks(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [1., 2., 3., 1., 2., 3., 1., 2., 3., 1., 2., 3.]);

    let t = ExportBuilder::from_vec(vec![1i16, 2, 3, 4, 5], &[5])
        .strides(&[-1])
        .byte_offset(8)
        .build()
        .unwrap();
    let mut out = vec![0u8; 10];
    t.view().copy_to_compact(&mut out).unwrap();
    let got: Vec<i16> = out
        .chunks(2)
        .map(|c| i16::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [5, 4, 3, 2, 1]);
}

#[test]
fn wrong_destination_size_is_an_error() {
    let t = ExportBuilder::from_vec(vec![0u32; 6], &[2, 3])
        .build()
        .unwrap();
    let mut out = vec![0u8; 23];
    let err = t.view().copy_to_compact(&mut out).unwrap_err();
    assert_eq!(
        err,
        dlport_core::Error::Dispatch(dlport_core::error::DispatchError::DestinationSize {
            needed: 24,
            available: 23
        })
    );
}

// ---------------------------------------------------------------------------------------------
// FUZZ FINDINGS of `fuzz/fuzz_targets/compact.rs`, fixed: each test asserts the right
// behaviour (they failed before the fix).
// ---------------------------------------------------------------------------------------------

/// FUZZ FINDING compact-1: `CpuBackend::copy` to the CPU (so every registry copy to the CPU) refuses a valid IS_SUBBYTE_TYPE_PADDED sub-byte tensor of more than one element
/// with `StorageTooSmall { needed: 3, available: 2 }`: it allocates the packed size (and returns
/// a tensor without the padded flag), then calls `copy_to_compact`, which wants the padded size.
/// The direct copy is right (padded in, padded out). Per DLPack the backend's result, whose
/// flags say packed, must hold the values packed little bit-endian (element i at bit 4i).
#[test]
fn fuzz_finding_compact_1_padded_sub_byte_tensor_compacts() {
    let int4 = DataType::new(TypeCode::INT, 4, 1);
    let t = ExportBuilder::new(vec![0x01u8, 0x02, 0x03], int4, &[3])
        .subbyte_padded(true)
        .build()
        .unwrap();
    // The compact form is packed: both the direct copy and the backend's.
    let mut out = vec![0u8; 2];
    t.view().copy_to_compact(&mut out).unwrap();
    assert_eq!(out, [0x21, 0x03]);
    let c = CpuBackend
        .copy(&t.view(), Device::cpu())
        .unwrap_or_else(|e| panic!("a valid padded int4 tensor must compact: {e}"))
        .expect("the CPU backend copies host memory");
    let bytes = c.view().unwrap().tensor_ref().as_bytes().unwrap().to_vec();
    assert_eq!((bytes[0], bytes[1] & 0x0f), (0x21, 0x03));
}

/// FUZZ FINDING compact-2: an EMPTY tensor whose extents, zeros counted as 1, multiply past
/// i64::MAX (here `[i64::MAX, 2, 0]`) is valid (the validator and the builder with explicit
/// strides accept it, the copies return at once), but `CpuBackend::copy` and the builder's
/// default strides refuse it with `ElementCountOverflow` ("makes the element count overflow",
/// for a count of 0): `layout::compact_row_major` (and `compact_fast`) also multiply in the
/// outermost extent, a product that no stride uses. Its compact strides `[2, 1, 1]` fit.
#[test]
fn fuzz_finding_compact_2_empty_tensor_with_a_huge_extent_compacts() {
    let shape = [i64::MAX, 2, 0];
    let t = ExportBuilder::new(Vec::<u8>::new(), DataType::FLOAT32, &shape)
        .strides(&[2, 1, 1])
        .build()
        .unwrap();
    t.view().copy_to_compact(&mut []).unwrap();
    CpuBackend
        .copy(&t.view(), Device::cpu())
        .unwrap_or_else(|e| panic!("an empty tensor must compact: {e}"))
        .expect("the CPU backend copies host memory");
    ExportBuilder::new(Vec::<u8>::new(), DataType::FLOAT32, &shape)
        .build()
        .unwrap_or_else(|e| panic!("an empty tensor must export with default strides: {e}"));
}

/// FINDING compact-3 (found reading the code for the fuzz target, which passes exact sizes):
/// the core's portable `TensorRef::copy_to_compact` never checks `dst.len()`. A
/// row-major source with a destination too long panics (slice index out of range); a strided
/// source with a destination too short returns `Ok` having copied only part of the tensor. The
/// native copy returned `DestinationSize` for both (see `wrong_destination_size_is_an_error`);
/// the two are now one implementation (`dlport_core::copy`).
#[test]
fn fuzz_finding_compact_3_core_copy_checks_the_destination_size() {
    let contiguous = ExportBuilder::from_vec(vec![0u32; 6], &[2, 3])
        .build()
        .unwrap();
    let long =
        std::panic::catch_unwind(|| contiguous.view().copy_to_compact(&mut [0u8; 25]).is_err());
    let transposed = ExportBuilder::from_vec(vec![0u32; 6], &[2, 3])
        .strides(&[1, 2])
        .build()
        .unwrap();
    let short = transposed.view().copy_to_compact(&mut [0u8; 23]);
    assert!(
        long.as_ref().is_ok_and(|&refused| refused) && short.is_err(),
        "25 bytes for 24 (contiguous): {}; 23 bytes for 24 (strided): {short:?}",
        if long.is_err() {
            "panicked"
        } else {
            "not refused"
        }
    );
}
