//! The plain baseline against dlport: the two accept and refuse the same tensors.

use super::*;
use dlport_core::ManagedTensor;
use dlport_core::abi::{DeviceType, FLAG_READ_ONLY, TypeCode};

/// The plain baseline accepts exactly what dlport accepts, with the same layout: its checks
/// are dlport's checks.
#[test]
fn the_plain_baseline_checks_what_dlport_checks() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let extents = [1i64, 2, 3, 7, 0, -1, 1 << 31, i64::MAX];
    let strides_set = [1i64, 0, -1, 2, 6, -7, 1 << 40, i64::MAX];
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..50_000 {
        let ndim = next(5);
        let mut shape: Vec<i64> = (0..ndim).map(|_| extents[next(extents.len())]).collect();
        let mut strides: Vec<i64> = if next(2) == 0 {
            let mut acc = 1i64;
            (0..ndim)
                .rev()
                .map(|a| {
                    let s = acc;
                    acc = acc.saturating_mul(shape[a].max(1));
                    s
                })
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect()
        } else {
            (0..ndim)
                .map(|_| strides_set[next(strides_set.len())])
                .collect()
        };
        let version = DLPackVersion::new([1, 1, 1, 2][next(4)], [0, 1, 2, 3][next(4)]);
        let flags = [0, FLAG_READ_ONLY, FLAG_IS_SUBBYTE_TYPE_PADDED, 1 << 7][next(4)];
        let tensor = DLTensor {
            data: [0usize, 0x1000, usize::MAX - 15][next(3)] as *mut c_void,
            device: [
                Device::cpu(),
                Device::cuda(0),
                Device::new(DeviceType::CUDA_HOST, 0),
            ][next(3)],
            ndim: ndim as i32 - i32::from(next(30) == 0) * 70,
            dtype: match next(3) {
                0 => DataType::FLOAT32,
                _ => DataType::new(TypeCode(next(20) as u8), next(130) as u8, next(3) as u16),
            },
            shape: if next(30) == 0 {
                std::ptr::null_mut()
            } else {
                shape.as_mut_ptr()
            },
            strides: if next(5) == 0 {
                std::ptr::null_mut()
            } else {
                strides.as_mut_ptr()
            },
            byte_offset: [0u64, 16, 1 << 62][next(3)],
        };
        let header = || DLManagedTensorVersioned {
            version,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_deleter),
            flags,
            dl_tensor: tensor,
        };
        let (mut a, mut b) = (header(), header());
        // SAFETY: the arrays outlive both imports; the deleter only counts; no memory behind
        // `data` is read by validation.
        let plain = unsafe { plain_import(&mut a) };
        // SAFETY: as above.
        let ours = unsafe { ManagedTensor::from_raw_versioned(&mut b) };
        match (&plain, &ours) {
            (Ok((p, ..)), Ok(t)) => {
                accepted += 1;
                let l = t.view().layout();
                assert_eq!(
                    (p.numel, p.lo, p.hi, p.contiguity),
                    (l.numel, l.span.lo, l.span.hi, l.contiguity),
                    "{a:?}"
                );
            }
            (Err(_), Err(_)) => refused += 1,
            _ => panic!(
                "plain {:?} but dlport {:?} for {a:?}",
                plain.map(|p| p.0),
                ours
            ),
        }
    }
    assert!(
        accepted > 1000 && refused > 1000,
        "{accepted} accepted, {refused} refused"
    );
}
