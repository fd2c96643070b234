//! The address rule: where a host tensor may lie (user space), named once per platform.

use super::summary::ByteSpan;
use crate::error::{AddressRange, Error, LayoutError};

/// One past the highest user-space address of this platform: the first and last byte of a
/// host tensor must lie below it (and above 0). The platform conditions are named once, here:
/// x86_64 and riscv64 Linux reach 2^56 with 5-level paging (Sv57); aarch64 reaches 2^52 (LVA),
/// with the top byte ignored (TBI, used by tagged heap pointers); other 64-bit targets keep the
/// `isize::MAX` rule; 32-bit targets use their whole (wrapping-free) address range.
pub const USER_ADDRESS_END: u64 = {
    cfg_if::cfg_if! {
        if #[cfg(any(target_arch = "x86_64", target_arch = "riscv64"))] {
            1 << 56
        } else if #[cfg(target_arch = "aarch64")] {
            1 << 52
        } else if #[cfg(target_pointer_width = "64")] {
            1 << 63
        } else {
            1 << 32
        }
    }
};

/// Bits of an address that carry a tag rather than a location (aarch64's top byte).
pub(super) const ADDRESS_TAG_MASK: u64 = if cfg!(target_arch = "aarch64") {
    0xff << 56
} else {
    0
};

/// Checks that `data + byte_offset + [lo, hi)` is user-space memory: the first byte above 0,
/// the last below [`USER_ADDRESS_END`], and the whole range at most `isize::MAX` bytes (Rust's
/// rule for any object). A tensor that passes can be read without leaving the address space;
/// `byte_offset = 2^63` over a valid buffer cannot.
#[inline]
pub fn check_address(data: usize, byte_offset: u64, span: ByteSpan) -> Result<(), Error> {
    let fail = || {
        Error::Layout(LayoutError::AddressOverflow {
            range: AddressRange::new(data, byte_offset, span),
        })
    };
    let untagged = data as u64 & !ADDRESS_TAG_MASK;
    let first = i128::from(untagged) + i128::from(byte_offset);
    let start = first + i128::from(span.lo);
    let end = first + i128::from(span.hi);
    let fits = start > 0
        && end <= i128::from(USER_ADDRESS_END)
        && end - start <= isize::MAX as i128
        && start <= end;
    if fits { Ok(()) } else { Err(fail()) }
}

/// Whether [`check_address`] accepts a span with `lo ≤ 0 ≤ hi` (every span validation
/// computes), in `u64` arithmetic and without building the error: the range is
/// `[first - |lo|, first + hi)` with `first = data + byte_offset`. On 64-bit targets a range
/// with `0 < start` and `end ≤ USER_ADDRESS_END` is shorter than `USER_ADDRESS_END ≤ 2^63`,
/// so the `isize::MAX` test is needed on 32-bit targets only. Checked equal to
/// [`check_address`] by `address_fits_is_check_address`.
#[inline(always)]
pub(crate) fn address_fits(data: usize, byte_offset: u64, span: ByteSpan) -> bool {
    debug_assert!(span.lo <= 0 && span.hi >= 0);
    const LENGTH_BOUNDED: bool = USER_ADDRESS_END - 1 <= isize::MAX as u64;
    let Some(first) = (data as u64 & !ADDRESS_TAG_MASK).checked_add(byte_offset) else {
        return false;
    };
    let (Some(start), Some(end)) = (
        first.checked_sub(span.lo.unsigned_abs()),
        first.checked_add(span.hi as u64),
    ) else {
        return false;
    };
    start != 0 && end <= USER_ADDRESS_END && (LENGTH_BOUNDED || end - start <= isize::MAX as u64)
}

/// The largest power of two dividing `address` (capped at 4096; `address` 0 counts as 4096).
pub const fn address_alignment(address: usize) -> usize {
    const CAP: usize = 4096;
    if address == 0 {
        return CAP;
    }
    let a = 1usize << address.trailing_zeros();
    if a > CAP { CAP } else { a }
}

// The addresses below are 64-bit ones (the tests run on 64-bit hosts, natively and under
// qemu-aarch64); 32-bit targets would overflow them at compile time.
#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;

    #[test]
    fn address_fits_is_check_address() {
        let end = USER_ADDRESS_END as usize;
        let datas = [
            0usize,
            1,
            8,
            0x1000,
            end / 2,
            end - 4096,
            end - 1,
            end,
            usize::MAX - 7,
        ];
        let offsets = [
            0u64,
            1,
            7,
            4096,
            1 << 40,
            USER_ADDRESS_END - 1,
            1 << 63,
            u64::MAX,
        ];
        let los = [0i64, -1, -8, -4096, -(1 << 40), i64::MIN / 2, i64::MIN];
        let his = [0i64, 1, 8, 4096, 1 << 40, i64::MAX / 2, i64::MAX];
        for &data in &datas {
            for &byte_offset in &offsets {
                for &lo in &los {
                    for &hi in &his {
                        let span = ByteSpan { lo, hi };
                        assert_eq!(
                            address_fits(data, byte_offset, span),
                            check_address(data, byte_offset, span).is_ok(),
                            "{data:#x} + {byte_offset:#x} + [{lo}, {hi})"
                        );
                    }
                }
            }
        }
    }
}
