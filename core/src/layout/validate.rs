//! [`validate`]: every DLPack rule applied to a tensor's raw fields, the fast path first and
//! the rules one by one where it does not answer.

use super::address::check_address;
use super::fast::{fast_path, validate_fast};
use super::rules::validate_metadata_slow;
use super::summary::{Layout, RawFields};
use crate::abi::DLPackVersion;
use crate::device::DeviceField;
use crate::dtype::DataType;
use crate::error::{Error, LayoutError};

/// Applies every DLPack rule to `fields` and summarises the layout.
///
/// Checks, in order: the major version, unknown flag bits, `ndim`, the data type (code, bits,
/// lanes), the extents (negative, element-count overflow), the NULL-strides rule of the version,
/// the stride count, the span (checked arithmetic on every product), the device
/// ([`Device::check`](crate::Device::check): a negative id, a `kDLCPU` id other than 0), NULL data, and, for
/// host-accessible memory, that `data + byte_offset + [lo, hi)` stays inside the address space.
///
/// ```
/// use dlport_core::internal::{RawFields, validate};
/// use dlport_core::layout::Contiguity;
/// use dlport_core::{DataType, Device};
///
/// let shape = [2, 3];
/// let strides = [1, 2]; // column-major
/// let layout = validate(&RawFields {
///     data: 0x1000, device: Device::cpu(), dtype: DataType::FLOAT32,
///     shape: &shape, strides: Some(&strides), byte_offset: 0,
///     version: Some(dlport_core::abi::DLPackVersion::CURRENT), flags: 0,
/// }).unwrap();
/// assert_eq!(layout.contiguity, Contiguity::ColumnMajor);
/// assert_eq!((layout.span.lo, layout.span.hi), (0, 24));
/// ```
#[inline]
pub fn validate(fields: &RawFields<'_>) -> Result<Layout, Error> {
    match validate_fast(fields) {
        Some(layout) => Ok(layout),
        None => validate_slow(fields),
    }
}

/// [`validate`] rule by rule, naming the exact error: what the fast path does not answer.
#[cold]
#[inline(never)]
fn validate_slow(fields: &RawFields<'_>) -> Result<Layout, Error> {
    let layout = validate_metadata(
        fields.dtype,
        fields.shape,
        fields.strides,
        fields.version,
        fields.flags,
    )?;
    fields.device.check(DeviceField::Tensor)?;
    if layout.numel != 0 && fields.data == 0 {
        return Err(Error::Layout(LayoutError::NullData {
            numel: layout.numel,
        }));
    }
    if layout.numel != 0 && fields.device.is_host_accessible() {
        check_address(fields.data, fields.byte_offset, layout.span)?;
    }
    Ok(layout)
}

/// Every rule of [`validate`] that does not look at `data`, `device` or `byte_offset`.
#[inline]
pub fn validate_metadata(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    version: Option<DLPackVersion>,
    flags: u64,
) -> Result<Layout, Error> {
    match fast_path(dtype, shape, strides, version, flags) {
        Some(layout) => Ok(layout),
        None => validate_metadata_slow(dtype, shape, strides, version, flags),
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::super::address::USER_ADDRESS_END;
    use super::super::fast::{compact_fast, validate_fast};
    use super::super::rules::compact_row_major;
    use super::*;
    use crate::abi::DLPackVersion;
    use crate::abi::{FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
    use crate::device::Device;
    use crate::dtype::DataType;

    /// The export fast path agrees with the full validation wherever it answers, and computes
    /// the same strides.
    #[test]
    fn compact_fast_agrees_with_validate_metadata() {
        let dtypes = [
            DataType::FLOAT32,
            DataType::UINT8,
            DataType::FLOAT16,
            DataType::COMPLEX128,
            DataType::BOOL,
            "float4_e2m1fn".parse().unwrap(),
            "int4".parse().unwrap(),
        ];
        let extents = [0i64, 1, 2, 3, 7, 1 << 20, i64::MAX / 3, -1];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut answered = 0;
        for _ in 0..if cfg!(miri) { 200 } else { 20_000 } {
            let ndim = next(6);
            let shape: alloc::vec::Vec<i64> =
                (0..ndim).map(|_| extents[next(extents.len())]).collect();
            let dtype = dtypes[next(dtypes.len())];
            let flags = [0, FLAG_READ_ONLY, FLAG_IS_SUBBYTE_TYPE_PADDED][next(3)];
            let mut fast = alloc::vec![core::mem::MaybeUninit::<i64>::uninit(); ndim];
            let Some(layout) = compact_fast(dtype, &shape, &mut fast, flags) else {
                continue;
            };
            answered += 1;
            // SAFETY: `compact_fast` wrote every stride (it answered).
            let fast: alloc::vec::Vec<i64> =
                fast.iter().map(|v| unsafe { v.assume_init() }).collect();
            let mut slow = alloc::vec![0i64; ndim];
            compact_row_major(&shape, &mut slow).unwrap();
            assert_eq!(fast, slow, "{shape:?}");
            let full = validate_metadata(
                dtype,
                &shape,
                Some(&slow),
                Some(DLPackVersion::CURRENT),
                flags,
            );
            assert_eq!(full, Ok(layout), "{dtype} {shape:?} flags {flags}");
        }
        assert!(
            answered > 1000 || cfg!(miri),
            "the fast path answered only {answered} times"
        );
    }

    /// The import fast path answers only what the full rules accept, with the same layout, and
    /// it answers the common cases (contiguous, strided, negative, legacy NULL strides).
    #[test]
    fn validate_fast_agrees_with_validate() {
        use crate::abi::{DeviceType, TypeCode};
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let extents = [
            1i64,
            1,
            2,
            3,
            5,
            7,
            0,
            -1,
            1 << 20,
            1 << 31,
            i64::MAX / 2,
            i64::MAX,
        ];
        let odd_strides = [0i64, -1, -3, 2, 1 << 40, i64::MIN, i64::MAX, -(1 << 62)];
        let datas = [
            0usize,
            8,
            0x1000,
            0x7fff_0000,
            (USER_ADDRESS_END as usize).wrapping_sub(4096),
            (USER_ADDRESS_END as usize).wrapping_sub(1),
            usize::MAX - 7,
        ];
        let offsets = [0u64, 4, 1 << 20, 1 << 55, 1 << 63, u64::MAX];
        let devices = [
            Device::cpu(),
            Device::cuda(0),
            Device::cuda_host(),
            Device::new(DeviceType::CUDA_MANAGED, 0),
            Device::new(DeviceType::CPU, 5),
            Device::new(DeviceType::CPU, -1),
            Device::cuda(-1),
            Device::new(DeviceType::CUDA_HOST, 1),
        ];
        let versions = [
            None,
            Some(DLPackVersion::new(1, 0)),
            Some(DLPackVersion::new(1, 1)),
            Some(DLPackVersion::CURRENT),
            Some(DLPackVersion::new(2, 0)),
        ];
        let flags = [0, FLAG_READ_ONLY, FLAG_IS_SUBBYTE_TYPE_PADDED, 1 << 9];
        let mut answered = 0;
        for _ in 0..if cfg!(miri) { 300 } else { 200_000 } {
            let ndim = next(6);
            let shape: alloc::vec::Vec<i64> =
                (0..ndim).map(|_| extents[next(extents.len())]).collect();
            let dtype = match next(4) {
                0 => DataType::FLOAT32,
                1 => DataType::new(TypeCode(next(20) as u8), 8 << next(5), 1),
                _ => DataType::new(TypeCode(next(20) as u8), next(256) as u8, next(3) as u16),
            };
            let strides = match next(4) {
                0 => None,
                1 => {
                    // Compact, possibly reversed or with one odd stride.
                    let mut s = alloc::vec![0i64; ndim];
                    if compact_row_major(&shape, &mut s).is_err() {
                        continue;
                    }
                    if ndim > 0 && next(2) == 0 {
                        s[next(ndim)] = odd_strides[next(odd_strides.len())];
                    }
                    if next(3) == 0 {
                        s.iter_mut().for_each(|v| *v = v.wrapping_neg());
                    }
                    Some(s)
                }
                2 => {
                    // A permutation of the compact strides (column-major and others).
                    let mut s = alloc::vec![0i64; ndim];
                    if compact_row_major(&shape, &mut s).is_err() {
                        continue;
                    }
                    for i in (1..ndim).rev() {
                        s.swap(i, next(i + 1));
                    }
                    Some(s)
                }
                _ => Some(
                    (0..ndim + usize::from(next(20) == 0))
                        .map(|_| odd_strides[next(odd_strides.len())] / (1 + next(4) as i64))
                        .collect(),
                ),
            };
            let fields = RawFields {
                data: datas[next(datas.len())],
                // The last four break the rule of device ids: one draw in eight.
                device: devices[if next(8) == 0 { 4 + next(4) } else { next(4) }],
                dtype,
                shape: &shape,
                strides: strides.as_deref(),
                byte_offset: offsets[next(offsets.len())],
                version: versions[next(versions.len())],
                flags: flags[next(flags.len())],
            };
            let full = validate_slow(&fields);
            if let Some(layout) = validate_fast(&fields) {
                answered += 1;
                assert_eq!(full, Ok(layout), "{fields:?}");
            }
            assert_eq!(validate(&fields), full, "{fields:?}");
        }
        assert!(
            answered > 5000 || cfg!(miri),
            "the fast path answered only {answered} times"
        );
    }

    /// The dtype table of the fast path is the full rules' own verdict: every code, width and
    /// lane count.
    #[test]
    fn whole_byte_dtypes_are_exactly_the_valid_scalar_byte_widths() {
        use crate::abi::TypeCode;
        // Every value natively. Under Miri (the table is the same), every code up to 15 (the
        // defined ones and the first undefined) and a few past it, and the bit widths at and
        // around each whole-byte width and the sub-byte ones.
        let (codes, widths): (alloc::vec::Vec<u8>, alloc::vec::Vec<u8>) = if cfg!(miri) {
            (
                (0..=15).chain([16, 100, 255]).collect(),
                alloc::vec![
                    0, 1, 2, 4, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255
                ],
            )
        } else {
            ((0..=255).collect(), (0..=255).collect())
        };
        for &code in &codes {
            for &bits in &widths {
                for lanes in [0u16, 1, 2, 3, 4] {
                    let dtype = DataType::new(TypeCode(code), bits, lanes);
                    let expected = dtype.validate().is_ok()
                        && lanes == 1
                        && matches!(bits, 8 | 16 | 32 | 64 | 128);
                    let fast = dtype.whole_byte_log2();
                    assert_eq!(fast.is_some(), expected, "{dtype:?}");
                    if let Some(k) = fast {
                        assert_eq!(dtype.storage_bits(false), 8 << k);
                        assert_eq!(dtype.storage_bits(true), 8 << k);
                    }
                }
            }
        }
    }
}
