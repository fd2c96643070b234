//! The allocation limit: the most bytes a copy that dlport makes may allocate, checked before
//! anything is allocated. One process-wide default here; a [`Registry`](crate::Registry) and a
//! single call may set a lower one.

use crate::error::{DispatchError, Error};

/// The process-wide default allocation limit in bytes (`isize::MAX` unless
/// [`set_alloc_limit`] lowered it). Every allocation dlport makes for a copy is checked against
/// the limit in force (a per-call `max_alloc`, else the registry's, else this one) before
/// anything is allocated: a 1-byte tensor broadcast to `[2^40]` is refused with
/// [`DispatchError::AllocationLimit`], not allocated.
pub fn alloc_limit() -> u64 {
    ALLOC_LIMIT.load(core::sync::atomic::Ordering::Relaxed) as u64
}

/// Sets the process-wide default allocation limit (clamped to `isize::MAX`).
pub fn set_alloc_limit(bytes: u64) {
    let clamped = usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize);
    ALLOC_LIMIT.store(clamped, core::sync::atomic::Ordering::Relaxed);
}

static ALLOC_LIMIT: core::sync::atomic::AtomicUsize =
    core::sync::atomic::AtomicUsize::new(isize::MAX as usize);

/// Checks `bytes` against `limit` (none: [`alloc_limit`]).
pub fn check_alloc(bytes: u128, limit: Option<u64>) -> Result<(), Error> {
    let limit = limit.unwrap_or_else(alloc_limit);
    if bytes > u128::from(limit) {
        return Err(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: bytes.into(),
            limit,
        }));
    }
    Ok(())
}
