//! Sub-byte elements (`bits × lanes < 8`): a bit gather that reads each element, packed or
//! padded (IS_SUBBYTE_TYPE_PADDED), and writes it packed. The compact form of a sub-byte tensor
//! is always packed, so every consumer (legacy ones included, which cannot carry the flag)
//! reads it the same way.

use crate::layout::MAX_NDIM;
use crate::view::TensorRef;

/// Calls `f` with the offset (in `strides`' unit) of every index of `shape`, in row-major
/// order. `shape` has no zero extent.
fn for_each_offset(shape: &[i64], strides: &[isize], mut f: impl FnMut(isize)) {
    let ndim = shape.len();
    if ndim == 0 {
        f(0);
        return;
    }
    let (inner_extent, inner_stride) = (shape[ndim - 1] as usize, strides[ndim - 1]);
    let rows: usize = shape[..ndim - 1].iter().map(|&e| e as usize).product();
    let mut index = [0usize; MAX_NDIM];
    for _ in 0..rows {
        let mut offset: isize = 0;
        for axis in 0..ndim - 1 {
            offset += index[axis] as isize * strides[axis];
        }
        for i in 0..inner_extent {
            f(offset + i as isize * inner_stride);
        }
        for axis in (0..ndim - 1).rev() {
            index[axis] += 1;
            if (index[axis] as i64) < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// The sub-byte gather: reads each element's `bits × lanes` bits (packed: at bit
/// `offset × bits` past the first element, little bit-endian; padded: the low bits of its own
/// byte) and packs them into `dst` (exactly the packed size, overwritten). `src` is a
/// non-empty host-accessible tensor of a sub-byte type.
pub(super) fn gather(src: &TensorRef<'_>, dst: &mut [u8]) {
    let value_bits = src.dtype().storage_bits(false) as usize;
    let storage_bits = src.layout().element_bits as isize;
    let mask: u16 = (1u16 << value_bits) - 1;
    let base = src.first_element_ptr().cast_const();
    let ndim = src.ndim();
    let mut strides = [0isize; MAX_NDIM];
    for (axis, s) in src.strides().enumerate() {
        // Within the validated span (computed in bits), so the bit stride fits.
        strides[axis] = (s as isize).wrapping_mul(storage_bits);
    }
    dst.fill(0);
    let mut out_bit = 0usize;
    for_each_offset(src.shape(), &strides[..ndim], |bit| {
        let (byte, shift) = (bit.div_euclid(8), bit.rem_euclid(8) as u32);
        let last = (bit + value_bits as isize - 1).div_euclid(8);
        // SAFETY: the element's bits lie inside the validated span, rounded outwards to whole
        // bytes, which the view keeps readable: both `byte` and `last` are inside it.
        let lo = u16::from(unsafe { *base.offset(byte) });
        let hi = if last != byte {
            // SAFETY: as above.
            u16::from(unsafe { *base.offset(last) })
        } else {
            0
        };
        let value = (((hi << 8) | lo) >> shift) & mask;
        let (at, sh) = (out_bit / 8, out_bit % 8);
        let placed = value << sh;
        dst[at] |= placed as u8;
        if sh + value_bits > 8 {
            dst[at + 1] |= (placed >> 8) as u8;
        }
        out_bit += value_bits;
    });
}
