//! Sub-byte elements through the copy: the compact form is packed, whether the source was
//! packed or padded (IS_SUBBYTE_TYPE_PADDED), with any strides (DESIGN.md, "Compact copies and
//! sub-byte elements").

use dlport_core::abi::TypeCode;
use dlport_core::{DataType, ExportBuilder};

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

#[test]
fn packed_sub_byte_compacts_from_any_layout() {
    let fp4 = ExportBuilder::new(vec![0x21u8, 0x43], DataType::FLOAT4_E2M1FN, &[4])
        .build()
        .unwrap();
    let mut out = vec![0u8; 2];
    fp4.view().copy_to_compact(&mut out).unwrap();
    assert_eq!(out, [0x21, 0x43]);
    let strided = ExportBuilder::new(vec![0x21u8, 0x43], DataType::FLOAT4_E2M1FN, &[2])
        .strides(&[2])
        .build()
        .unwrap();
    // Elements 0 and 2 (values 1 and 3), packed into one byte.
    let mut out = vec![0u8; 1];
    strided.view().copy_to_compact(&mut out).unwrap();
    assert_eq!(out, [0x31]);
    let t = ExportBuilder::new(
        vec![0x21u8, 0x43],
        DataType::new(TypeCode::INT, 4, 1),
        &[2, 2],
    )
    .strides(&[1, 2])
    .build()
    .unwrap();
    let mut out = vec![0u8; 2];
    t.view().copy_to_compact(&mut out).unwrap();
    // Source elements [1, 2, 3, 4] as a column-major 2x2: rows are (1, 3) and (2, 4).
    assert_eq!(out, [0x31, 0x42]);
    // Padded int4 (one element per byte, value in the low bits) comes out packed.
    let padded = ExportBuilder::new(
        vec![0x01u8, 0x02, 0x03, 0x04],
        DataType::new(TypeCode::INT, 4, 1),
        &[4],
    )
    .subbyte_padded(true)
    .build()
    .unwrap();
    let mut out = vec![0u8; 2];
    padded.view().copy_to_compact(&mut out).unwrap();
    assert_eq!(out, [0x21, 0x43]);
}

/// Sub-byte elements have ONE compact form, packed (little bit-endian, element i at bit
/// `i × bits`): the same values given packed, or padded (IS_SUBBYTE_TYPE_PADDED: one element per
/// byte, in its low bits, with garbage in the high bits), under the same strides (transposed,
/// reversed, broadcast), compact to the same packed bytes, through `copy_to_compact` and through
/// the CPU backend's copy (whose result carries no padded flag).
#[test]
fn sub_byte_tensors_packed_or_padded_compact_to_the_same_packed_bytes() {
    use dlport_core::Device;
    use dlport_core::backend::{Backend, CpuBackend};
    let mut rng = Lcg(7);
    let mut dtypes: Vec<DataType> = (1..8)
        .flat_map(|b| {
            [
                DataType::new(TypeCode::INT, b, 1),
                DataType::new(TypeCode::UINT, b, 1),
            ]
        })
        .collect();
    dtypes.extend([
        DataType::FLOAT4_E2M1FN,
        DataType::FLOAT6_E2M3FN,
        DataType::FLOAT6_E3M2FN,
    ]);
    // (shape, strides, first physical element): a 3 × 5 transpose of a 5 × 3 buffer, a reversed
    // row, a broadcast row.
    let layouts: [(&[i64], &[i64], u64); 3] = [
        (&[3, 5], &[1, 3], 0),
        (&[15], &[-1], 14),
        (&[4, 5], &[0, 1], 0),
    ];
    for dtype in dtypes {
        let bits = dtype.storage_bits(false) as usize;
        assert!(bits < 8, "{dtype} is sub-byte");
        let mask = (1u8 << bits) - 1;
        let physical: Vec<u8> = (0..15).map(|_| rng.below(256) as u8 & mask).collect();
        let mut packed = vec![0u8; (15 * bits).div_ceil(8)];
        for (k, &v) in physical.iter().enumerate() {
            let bit = k * bits;
            let wide = u16::from(v) << (bit % 8);
            packed[bit / 8] |= wide as u8;
            if bit % 8 + bits > 8 {
                packed[bit / 8 + 1] |= (wide >> 8) as u8;
            }
        }
        // Padded: the value in the low bits, garbage above it (never read).
        let padded: Vec<u8> = physical
            .iter()
            .map(|&v| v | (rng.below(256) as u8 & !mask))
            .collect();
        for &(shape, strides, first) in &layouts {
            let numel: usize = shape.iter().product::<i64>() as usize;
            // The expected packed bytes, element by element in row-major order.
            let mut want = vec![0u8; (numel * bits).div_ceil(8)];
            let mut index = vec![0i64; shape.len()];
            for i in 0..numel {
                let k = first as i64 + index.iter().zip(strides).map(|(a, s)| a * s).sum::<i64>();
                let wide = u16::from(physical[k as usize]) << (i * bits % 8);
                want[i * bits / 8] |= wide as u8;
                if i * bits % 8 + bits > 8 {
                    want[i * bits / 8 + 1] |= (wide >> 8) as u8;
                }
                for axis in (0..shape.len()).rev() {
                    index[axis] += 1;
                    if index[axis] < shape[axis] {
                        break;
                    }
                    index[axis] = 0;
                }
            }
            for is_padded in [false, true] {
                let (bytes, offset_bits) = if is_padded {
                    (padded.clone(), first * 8)
                } else {
                    (packed.clone(), first * bits as u64)
                };
                // byte_offset counts bytes: a packed tensor's first element has to start on
                // one (the reversed row does for 4-bit types).
                if offset_bits % 8 != 0 {
                    continue;
                }
                let t = ExportBuilder::new(bytes, dtype, shape)
                    .strides(strides)
                    .byte_offset(offset_bits / 8)
                    .subbyte_padded(is_padded)
                    .build()
                    .unwrap_or_else(|e| {
                        panic!("{dtype} {shape:?} {strides:?} padded {is_padded}: {e}")
                    });
                let what = format!("{dtype} {shape:?} {strides:?} padded {is_padded}");
                let mut out = vec![0xa5u8; want.len()];
                t.view().copy_to_compact(&mut out).unwrap();
                assert_eq!(out, want, "copy_to_compact: {what}");
                let c = CpuBackend.copy(&t.view(), Device::cpu()).unwrap().unwrap();
                assert!(c.flags() & dlport_core::abi::FLAG_IS_SUBBYTE_TYPE_PADDED == 0);
                let guard = c.view().unwrap();
                assert_eq!(
                    guard.tensor_ref().as_bytes().unwrap(),
                    &want[..],
                    "CpuBackend: {what}"
                );
                // The padded size is refused as a destination: the compact form is packed.
                if is_padded && numel != want.len() {
                    let mut wrong = vec![0u8; numel];
                    assert!(t.view().copy_to_compact(&mut wrong).is_err(), "{what}");
                }
            }
        }
    }
}
