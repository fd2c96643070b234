//! Compact copies: structure-aware random tensors (shapes, strides, offsets, dtypes built from
//! the input, not raw struct bytes) over a real buffer, then EVERY compact-copy path checked
//! byte for byte against a naive odometer reference written here:
//! - `TensorRef::copy_to_compact` (the one copy: memcpy, rows, SIMD/tiled transposes, reversed
//!   rows, gathers, the sub-byte bit gather),
//! - the CPU backend's copy to the host, `CpuBackend::copy` (a backend tensor, read back through
//!   its view).
//!
//! Refusals must match the validator: the builder refuses exactly what `validate_metadata`
//! refuses (same error) plus spans outside the buffer (`StorageTooSmall`); `TensorRef::from_raw`
//! on the same fields computes the same layout. On an accepted tensor every path must succeed
//! and agree with the reference. The compact form of a sub-byte tensor is packed, whether the
//! source was packed or padded (IS_SUBBYTE_TYPE_PADDED), of any strides.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;
use common::Input;
use dlport_core::abi::{
    DLPackVersion, DLTensor, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY, TypeCode,
};
use dlport_core::backend::{Backend, CpuBackend};
use dlport_core::error::{DispatchError, LayoutError};
use dlport_core::{DataType, Device, Error, ExportBuilder, TensorRef, layout};

/// Largest compact copy per input (bytes) and largest element count: a few MiB per input in
/// all (source buffer, three destinations, the reference).
const MAX_OUT: u64 = 1 << 17;
const MAX_NUMEL: u64 = 1 << 15;
const MAX_BUF: i128 = 1 << 18;


fn dtype(inp: &mut Input<'_>) -> DataType {
    let int = |bits: u8| DataType::new(TypeCode::INT, bits, 1);
    let uint = |bits: u8| DataType::new(TypeCode::UINT, bits, 1);
    match inp.u8() % 32 {
        0 => DataType::INT8,
        1 => DataType::UINT8,
        2 => DataType::BOOL,
        3 => DataType::FLOAT8_E4M3FN,
        4 => DataType::FLOAT16,
        5 => DataType::BFLOAT16,
        6 => DataType::INT16,
        7 | 8 => DataType::INT32,
        9 => DataType::FLOAT64,
        10 => DataType::INT64,
        11 => DataType::COMPLEX64,
        12 | 13 => DataType::COMPLEX128,
        // Sub-byte: int1..int7, uint1..uint7 (int3/5/6/7 straddle bytes), fp4 both
        // conventions, fp6.
        14 => int(1 + inp.u8() % 7),
        15 => uint(1 + inp.u8() % 7),
        16 => int(4),
        17 => uint(4),
        18 => [int(1), uint(2), int(2), uint(1)][usize::from(inp.u8() % 4)],
        19 => DataType::FLOAT4_E2M1FN,
        20 => DataType::FLOAT4_E2M1FN_X2,
        21 => [DataType::FLOAT6_E2M3FN, DataType::FLOAT6_E3M2FN][usize::from(inp.u8() % 2)],
        // Vectors: lanes 2..=4 of 1, 2, 4, 8-byte lanes (3, 6, 12, 24-byte elements and more).
        22 | 23 => {
            let base = [DataType::INT8, DataType::FLOAT16, DataType::FLOAT32, DataType::FLOAT64]
                [usize::from(inp.u8() % 4)];
            DataType::new(base.code, base.bits, 2 + u16::from(inp.u8() % 3))
        }
        // Odd widths: int9..int128 (ceil to whole bytes), and byte vectors of up to 40 lanes.
        24 => int(9 + inp.u8() % 120),
        25 => DataType::new(TypeCode::UINT, 8, 1 + u16::from(inp.u8() % 40)),
        // float32 most often: the SSE transpose and the streaming reversal are 4-byte kernels.
        _ => DataType::FLOAT32,
    }
}

/// A random permutation of `0..n` (identity, reversed or shuffled).
fn order(inp: &mut Input<'_>, n: usize) -> Vec<usize> {
    let mut o: Vec<usize> = (0..n).collect();
    match inp.u8() % 4 {
        0 | 1 => {}
        2 => o.reverse(),
        _ => {
            for i in (1..n).rev() {
                o.swap(i, usize::from(inp.u8()) % (i + 1));
            }
        }
    }
    o
}

/// Compact strides (in elements) with the axes laid out in `order` (last = fastest) and an
/// optional gap per axis; wrapping, so that huge extents of an empty tensor cannot panic.
fn dense_strides(inp: &mut Input<'_>, shape: &[i64], order: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for &axis in order.iter().rev() {
        strides[axis] = acc;
        let gap = match inp.u8() % 8 {
            0 => 2,
            1 => 3,
            _ => 1,
        };
        let pad = i64::from(inp.u8() % 8 == 0);
        acc = acc.wrapping_mul(shape[axis].max(1)).wrapping_mul(gap).wrapping_add(pad);
    }
    strides
}

/// Compact row-major strides (wrapping: huge extents of an empty tensor may overflow).
fn compact(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (s, &e) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.wrapping_mul(e.max(1));
    }
    strides
}

/// Shape and strides: a general tensor of 0..=6 (sometimes up to 12) axes, or a shape aimed at
/// the tiled transpose and the reversed-row kernels.
fn geometry(inp: &mut Input<'_>) -> (Vec<i64>, Vec<i64>, bool) {
    match inp.u8() % 8 {
        // 2-D / 3-D transposes: the source walks the destination's rows contiguously.
        0 | 1 => {
            // Mostly a few 16 × 16 micro-tiles and ragged edges; sometimes up to 80 (64 × 70 has
            // whole 64-element blocks), or too small for the tiled path.
            let side = |inp: &mut Input<'_>| match inp.u8() % 8 {
                0 => 1 + i64::from(inp.u8() % 16),
                1 | 2 => 8 + i64::from(inp.u8() % 73),
                _ => 8 + i64::from(inp.u8() % 33),
            };
            let (r, c) = (side(inp), side(inp));
            let ld = r + i64::from(inp.u8() % 4 == 0) * i64::from(inp.u8() % 5);
            let neg = inp.u8() % 6 == 0;
            let col = if neg { -ld } else { ld };
            if inp.u8() % 3 == 0 {
                let b = 1 + i64::from(inp.u8() % 3);
                let (shape, strides) = (vec![b, r, c], vec![ld * c, 1, col]);
                (shape, strides, true)
            } else {
                (vec![r, c], vec![1, col], true)
            }
        }
        // Reversed rows (a[:, ::-1]) and plain rows, long enough for the vectorised loops.
        2 => {
            let (r, c) = (1 + i64::from(inp.u8() % 9), 1 + i64::from(inp.u16() % 600));
            let ld = c + i64::from(inp.u8() % 3);
            let inner = if inp.u8() % 4 == 0 { 1 } else { -1 };
            let outer = if inp.u8() % 4 == 0 { -ld } else { ld };
            (vec![r, c], vec![outer, inner], true)
        }
        // General.
        _ => {
            let ndim = match inp.u8() % 16 {
                0 => 7 + usize::from(inp.u8() % 6),
                n => usize::from(n % 7),
            };
            let mut shape: Vec<i64> = (0..ndim)
                .map(|_| match inp.u8() {
                    0..=11 => 0,
                    b if ndim > 6 => 1 + i64::from(b % 2),
                    b => 1 + i64::from(b % 9),
                })
                .collect();
            // Occasionally a huge extent, made empty by a zero elsewhere.
            if ndim >= 2 && inp.u8() % 24 == 0 {
                let big = usize::from(inp.u8()) % ndim;
                let zero = (big + 1 + usize::from(inp.u8()) % (ndim - 1)) % ndim;
                shape[big] = match inp.u8() % 4 {
                    0 => i64::MAX,
                    1 => 1 << 40,
                    2 => i64::from(inp.u32()),
                    _ => inp.i64().wrapping_abs(), // i64::MIN stays negative: refused
                };
                shape[zero] = 0;
            }
            let o = order(inp, ndim);
            let mut strides = dense_strides(inp, &shape, &o);
            let plain = strides == compact(&shape);
            let mut modified = false;
            for s in strides.iter_mut() {
                match inp.u8() % 16 {
                    0 | 1 => *s = s.wrapping_neg(),                 // reversed axis
                    2 => *s = 0,                                    // broadcast
                    3 => *s = i64::from(inp.u8() % 19) - 9,         // anything small: overlap
                    4 => *s = s.wrapping_add(i64::from(inp.u8() % 3)), // off by a little
                    _ => continue,
                }
                modified = true;
            }
            // Compact row-major may also come from the builder's default strides.
            let explicit = modified || !plain || inp.u8() % 2 == 0;
            (shape, strides, explicit)
        }
    }
}

/// The span `[lo, hi)` in bytes relative to the first element, computed independently of the
/// validator (i128, no overflow): `None` for an empty tensor.
fn span(shape: &[i64], strides: &[i64], bits: u32) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&e, &s) in shape.iter().zip(strides) {
        let reach = i128::from(e - 1) * i128::from(s);
        if reach < 0 { lo += reach } else { hi += reach }
    }
    let bits = i128::from(bits);
    let end = (hi + 1) * bits;
    Some(((lo * bits).div_euclid(8), end.div_euclid(8) + i128::from(end.rem_euclid(8) != 0)))
}

/// The reference: walks the multi-index in row-major order (last axis fastest) and reads each
/// element at `byte_offset + Σ i_k·stride_k` elements. Whole-byte elements are copied; packed
/// sub-byte elements (`bits` < 8) are read at bit `8·byte_offset + offset·bits`, little
/// bit-endian (`(byte >> (bit % 8)) & mask`, spilling into the next byte where needed), and
/// packed into the output the same way.
/// The compact copy by definition: element j read at `byte_offset + offset_j × storage` bits
/// (whole bytes, or packed little bit-endian), its low `value` bits written packed at bit
/// `j × value` (whole-byte elements: `storage == value`).
fn reference(buf: &[u8], byte_offset: u64, shape: &[i64], strides: &[i64], storage: u32, value: u32) -> Vec<u8> {
    let bits = storage;
    let numel: usize = if shape.contains(&0) { 0 } else { shape.iter().map(|&e| e as usize).product() };
    let mut out = vec![0u8; (numel * value as usize).div_ceil(8)];
    let mut index = [0i64; layout::MAX_NDIM];
    let index = &mut index[..shape.len()];
    for j in 0..numel {
        // In i64: the builder accepted the tensor, so every offset lies inside the span.
        let offset = i128::from(index.iter().zip(strides).map(|(&i, &s)| i * s).sum::<i64>());
        if bits % 8 == 0 && value == bits {
            let elem = (bits / 8) as usize;
            let at = (i128::from(byte_offset) + offset * elem as i128) as usize;
            out[j * elem..(j + 1) * elem].copy_from_slice(&buf[at..at + elem]);
        } else {
            let bit = (i128::from(byte_offset) * 8 + offset * i128::from(bits)) as usize;
            let mut word = u16::from(buf[bit / 8]);
            if bit % 8 + value as usize > 8 {
                word |= u16::from(buf[bit / 8 + 1]) << 8;
            }
            let v = (word >> (bit % 8)) & ((1u16 << value) - 1);
            let value_bits = value;
            let value = v;
            let to = j * value_bits as usize;
            let w = (u16::from(out[to / 8]) | out.get(to / 8 + 1).map_or(0, |&b| u16::from(b)) << 8)
                | (value << (to % 8));
            out[to / 8] = w as u8;
            if let Some(b) = out.get_mut(to / 8 + 1) {
                *b = (w >> 8) as u8;
            }
        }
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

/// Packed sub-byte output: the bits past the last element are padding (whatever the source
/// byte held); compare only the element bits.
fn same_elements(got: &[u8], want: &[u8], numel: u64, bits: u32) -> bool {
    if got.len() != want.len() {
        return false;
    }
    let used = numel * u64::from(bits) % 8;
    if bits % 8 == 0 || used == 0 || got.is_empty() {
        return got == want;
    }
    let last = got.len() - 1;
    let mask = (1u8 << used) - 1;
    got[..last] == want[..last] && got[last] & mask == want[last] & mask
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let dtype = dtype(&mut inp);
    let (shape, strides, explicit) = geometry(&mut inp);
    let mut flags = 0;
    if inp.u8() % 3 == 0 {
        flags |= FLAG_IS_SUBBYTE_TYPE_PADDED;
    }
    if inp.u8() % 8 == 0 {
        flags |= FLAG_READ_ONLY;
    }
    let padded = flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0;
    let bits = dtype.storage_bits(padded);
    let numel: u64 = shape.iter().try_fold(1u64, |n, &e| n.checked_mul(e as u64)).unwrap_or(u64::MAX);
    let numel = if shape.contains(&0) { 0 } else { numel };
    if numel > MAX_NUMEL || dtype.bytes_for(numel, padded).is_none_or(|b| b > MAX_OUT) {
        return;
    }
    // The compact copy is packed whatever the source.
    let out_len = dtype.bytes_for(numel, false).unwrap() as usize;
    let value_bits = dtype.storage_bits(false);

    // Place the first element so that the span lies in the buffer, then sometimes break that.
    let my_span = span(&shape, &strides, bits);
    let (lo, hi) = my_span.unwrap_or((0, 0));
    let slack = i128::from(inp.u8() % 4 == 0) * i128::from(inp.u8() % 9);
    let mut byte_offset = -lo + slack;
    let mut len = byte_offset + hi + i128::from(inp.u8() % 3);
    match inp.u8() % 16 {
        0 => byte_offset -= 1 + i128::from(inp.u8() % 8), // starts too low (maybe below 0)
        1 => len -= 1 + i128::from(inp.u8() % 8),         // ends too high
        2 => byte_offset = i128::from(inp.u64()),         // anywhere, up to 2⁶⁴ − 1
        _ => {}
    }
    if len > MAX_BUF {
        return;
    }
    let len = len.max(0) as usize;
    let byte_offset = if byte_offset < 0 { u64::MAX - (-byte_offset) as u64 } else { byte_offset as u64 };
    let seed = inp.u8();
    let buf: Vec<u8> = (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(u32::from(seed)).rotate_right(13) as u8).collect();
    let inside = my_span.is_none_or(|(lo, hi)| {
        let first = i128::from(byte_offset);
        first + lo >= 0 && first + hi <= len as i128
    });

    // The validator, on the metadata alone (what the builder checks before the storage). The
    // builder's default strides come from `compact_row_major`, which refuses a shape whose
    // product of max(1, extent) overflows even when a zero extent makes the tensor empty.
    let meta = layout::validate_metadata(dtype, &shape, Some(&strides), Some(DLPackVersion::CURRENT), flags);
    if let Ok(m) = &meta {
        assert_eq!(m.numel, numel, "{dtype} {shape:?}");
        assert_eq!(m.element_bits, bits);
        if let Some((lo, hi)) = my_span {
            assert_eq!((i128::from(m.span.lo), i128::from(m.span.hi)), (lo, hi), "{dtype} {shape:?} {strides:?}");
        }
    }

    let mut builder = ExportBuilder::new(buf, dtype, &shape).byte_offset(byte_offset).subbyte_padded(padded).read_only(flags & FLAG_READ_ONLY != 0);
    if explicit {
        builder = builder.strides(&strides);
    }
    let built = builder.build();
    let t = match (built, &meta) {
        (Ok(t), Ok(_)) => {
            assert!(inside, "accepted a span outside the buffer: {dtype} {shape:?} {strides:?} +{byte_offset} in {len}");
            t
        }
        (Err(e), Ok(m)) => {
            assert!(!inside, "refused a valid in-buffer tensor: {e} ({dtype} {shape:?} {strides:?} +{byte_offset} in {len})");
            let hi = i128::from(byte_offset) + i128::from(m.span.hi);
            let needed = u64::try_from(hi.max(0)).unwrap_or(u64::MAX);
            assert_eq!(e, Error::Layout(LayoutError::StorageTooSmall { needed, available: len as u64 }));
            return;
        }
        (Err(e), Err(m)) => {
            assert_eq!(&e, m, "builder and validator refuse differently");
            return;
        }
        (Ok(_), Err(m)) => panic!("builder accepted what the validator refuses: {m}"),
    };
    let view = t.view();
    assert_eq!(view.numel(), numel);
    assert_eq!(view.flags() & !dlport_core::abi::FLAG_IS_COPIED, flags);

    // The same fields by hand, through `from_raw` (legacy NULL strides when they are compact).
    let mut sh = shape.clone();
    let mut st = strides.clone();
    let legacy = !explicit && inp.u8() % 2 == 0;
    let raw = DLTensor {
        data: view.data(),
        device: Device::cpu(),
        ndim: shape.len() as i32,
        dtype,
        shape: sh.as_mut_ptr(),
        strides: if legacy { std::ptr::null_mut() } else { st.as_mut_ptr() },
        byte_offset: view.byte_offset(),
    };
    let (version, raw_flags) = if legacy { (None, 0) } else { (Some(DLPackVersion::CURRENT), flags) };
    // SAFETY: shape and strides hold ndim values; the span lies inside the export's buffer,
    // which lives (unmutated) as long as `t`.
    let again = unsafe { TensorRef::from_raw(&raw, version, raw_flags) }.expect("from_raw refuses what the builder accepted");
    if !legacy || !padded {
        assert_eq!(again.layout(), view.layout());
    }
    // Host exports fold whole bytes of the offset into `data` (export::host_address): the Vec's
    // start is `data` less what was folded.
    let folded = byte_offset - view.byte_offset();
    // SAFETY: `data` less the folded bytes is the pointer of the Vec the export owns
    // (TensorStorage for Vec), `len` initialised bytes that nobody mutates while `t` lives.
    let keep = unsafe { std::slice::from_raw_parts(view.data().cast::<u8>().cast_const().sub(folded as usize), len) };
    let want = reference(keep, byte_offset, &shape, &strides, bits, value_bits);
    assert_eq!(want.len(), out_len);

    // 1. The copy.
    let mut copied = vec![0xa5u8; out_len];
    match view.copy_to_compact(&mut copied) {
        Ok(()) => {
            assert!(same_elements(&copied, &want, numel, value_bits), "copy differs from the reference: {dtype} {shape:?} {strides:?} +{byte_offset} padded {padded}\n got {copied:?}\nwant {want:?}");
        }
        Err(e) => panic!("copy refused a valid tensor: {e} ({dtype} {shape:?} {strides:?} +{byte_offset} padded {padded})"),
    }
    if numel == 0 {
        assert!(copied.is_empty());
    }
    // A destination of the wrong size is refused, never written past.
    if inp.u8() % 16 == 0 {
        let mut long = vec![0u8; out_len + 1];
        let e = view.copy_to_compact(&mut long).unwrap_err();
        assert_eq!(e, Error::Dispatch(DispatchError::DestinationSize { needed: out_len as u64, available: out_len as u64 + 1 }));
        if out_len > 0 {
            let e = view.copy_to_compact(&mut long[..out_len - 1]).unwrap_err();
            assert_eq!(e, Error::Dispatch(DispatchError::DestinationSize { needed: out_len as u64, available: out_len as u64 - 1 }));
        }
    }

    // 2. The CPU backend: a new compact tensor (packed, IS_COPIED).
    let packed_len = dtype.bytes_for(numel, false).unwrap() as usize;
    match CpuBackend.copy(&view, Device::cpu()) {
        Ok(Some(c)) => {
            assert!(c.is_copied() && c.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED == 0);
            assert_eq!((c.dtype(), c.shape()), (dtype, &shape[..]));
            let guard = c.view().expect("a fresh tensor is readable");
            let cv = guard.tensor_ref();
            assert!(numel == 0 || cv.contiguity().is_row_major());
            let got = cv.as_bytes().unwrap();
            assert_eq!(got.len(), packed_len);
            assert!(same_elements(got, &want, numel, value_bits), "backend compact differs: {dtype} {shape:?} {strides:?} padded {padded}");
        }
        Ok(None) => panic!("CpuBackend::copy declined a host tensor: {dtype} {shape:?} {strides:?}"),
        Err(e) => panic!("CpuBackend::copy refused a valid tensor: {e} ({dtype} {shape:?} {strides:?} +{byte_offset} padded {padded} contiguity {:?})", view.contiguity()),
    }
});
