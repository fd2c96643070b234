//! The allocation limit: the most bytes a copy that dlport makes may allocate, checked before
//! anything is allocated. One process-wide default here ([`set_alloc_limit`], the one entry
//! users call); a [`Registry`](crate::Registry) and a single call may set a lower one, and
//! backends check their own allocations with [`check_alloc`].

use crate::error::{DispatchError, Error};

/// The process-wide default allocation limit in bytes (`isize::MAX` unless [`set_alloc_limit`]
/// lowered it).
pub(crate) fn alloc_limit() -> u64 {
    ALLOC_LIMIT.load(core::sync::atomic::Ordering::Relaxed) as u64
}

/// Sets the process-wide default allocation limit in bytes (clamped to `isize::MAX`, the
/// default) and returns the limit it replaces.
///
/// Every allocation dlport makes for a copy is checked against the limit in force (a per-call
/// `max_alloc` of [`ImportOptions`](crate::ImportOptions) or
/// [`ExportOptions`](crate::ExportOptions), else the [`Registry`](crate::Registry)'s
/// ([`Registry::set_alloc_limit`](crate::Registry::set_alloc_limit)), else this one) before
/// anything is allocated: a 1-byte tensor broadcast to `[2^40]` is refused with
/// [`DispatchError::AllocationLimit`], not allocated.
///
/// # Examples
///
/// ```standalone_crate
/// use dlport_core::error::DispatchError;
/// use dlport_core::{Error, ExportBuilder, set_alloc_limit};
///
/// // (The limit is process-wide: this example runs as a program of its own.)
/// // One byte, broadcast to 2048 elements: a row-major copy would take 2 KiB.
/// let t = ExportBuilder::from_vec(vec![7u8], &[2048]).strides(&[0]).build()?;
/// let before = set_alloc_limit(1024);
/// let err = t.view().to_vec::<u8>().unwrap_err();
/// assert!(matches!(err, Error::Dispatch(DispatchError::AllocationLimit { limit: 1024, .. })));
/// set_alloc_limit(before);
/// assert_eq!(t.view().to_vec::<u8>()?.len(), 2048);
/// # Ok::<(), dlport_core::Error>(())
/// ```
pub fn set_alloc_limit(bytes: u64) -> u64 {
    let clamped = usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize);
    // A load and a store, not a swap: targets without compare-and-swap build this crate too.
    let before = alloc_limit();
    ALLOC_LIMIT.store(clamped, core::sync::atomic::Ordering::Relaxed);
    before
}

static ALLOC_LIMIT: core::sync::atomic::AtomicUsize =
    core::sync::atomic::AtomicUsize::new(isize::MAX as usize);

/// Checks a copy of `bytes` against `limit`, or the process-wide limit
/// ([`set_alloc_limit`](crate::set_alloc_limit)) when `limit` is `None`, before anything is
/// allocated: [`DispatchError::AllocationLimit`] when it is over.
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
