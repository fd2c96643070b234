//! The allocation limit: the most bytes a copy or an allocation that dlport makes may take,
//! checked before anything is allocated. One rule, decided here: the limit in force is **the
//! lowest** of a call's `max_alloc`, its [`Registry`](crate::Registry)'s and the process's, so
//! a call or a registry can lower the limit, never raise it. The process limit is the one users
//! set ([`set_alloc_limit`]; `dlport_set_alloc_limit` in C, `dlport.set_alloc_limit` in
//! Python); its default is the platform's, kept here alone ([`set_default_alloc_limit`], which
//! `dlport_native::install()` calls with the machine's memory), and a limit the user set
//! outranks it whenever it was set. Every check is [`check_alloc`]: the registry's copies and
//! allocations ([`Registry::allocate`](crate::Registry::allocate)) and the backends' own
//! allocations (`backend::allocation_bytes`) make it.
//!
//! `0` has one meaning wherever a limit is given as a number: none of its own
//! (`set_alloc_limit(0)` restores the default, a registry's 0 leaves the process's, C's
//! `max_alloc_bytes = 0` is no call limit). A call's `max_alloc` of `Some(0)`, which would be a
//! zero-byte limit, is refused ([`OptionRule::MaxAlloc`]).

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{DispatchError, Error, OptionRule};

/// No limit was set: the value `USER` holds until [`set_alloc_limit`] sets one. No clamped
/// limit reaches it (they stop at `isize::MAX`).
const UNSET: usize = usize::MAX;

/// The limit the user set ([`set_alloc_limit`]), or [`UNSET`].
static USER: AtomicUsize = AtomicUsize::new(UNSET);

/// The platform's default ([`set_default_alloc_limit`]): `isize::MAX` until a backend crate
/// gives one.
static DEFAULT: AtomicUsize = AtomicUsize::new(isize::MAX as usize);

/// Bytes as a limit: clamped to `isize::MAX`, the most any allocation can take.
fn clamp(bytes: u64) -> usize {
    usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize)
}

/// The process-wide allocation limit in bytes: the one the user set, else the platform's
/// default (`isize::MAX` unless a backend crate gave one).
pub(crate) fn alloc_limit() -> u64 {
    // Two loads and two stores, no swap: targets without compare-and-swap build this crate too.
    match USER.load(Ordering::Relaxed) {
        UNSET => DEFAULT.load(Ordering::Relaxed) as u64,
        set => set as u64,
    }
}

/// The limit in force for a call: the lowest of the call's (`per_call`), the registry's
/// (`registry`) and the process's. A call or a registry can lower the limit, never raise it.
pub(crate) fn in_force(per_call: Option<u64>, registry: Option<u64>) -> u64 {
    [per_call, registry]
        .into_iter()
        .flatten()
        .fold(alloc_limit(), u64::min)
}

/// Sets the process-wide allocation limit in bytes (clamped to `isize::MAX`; 0 restores the
/// default) and returns the limit it replaces.
///
/// Every copy and allocation dlport makes is checked, before anything is allocated, against
/// the limit in force: the lowest of this one, the [`Registry`](crate::Registry)'s
/// ([`Registry::set_alloc_limit`](crate::Registry::set_alloc_limit)) and the call's `max_alloc`
/// ([`ImportOptions`](crate::ImportOptions), [`ExportOptions`](crate::ExportOptions)): a 1-byte
/// tensor broadcast to `[2^40]` is refused with [`DispatchError::AllocationLimit`], not
/// allocated; so is an allocation ([`Registry::allocate`](crate::Registry::allocate), a
/// backend's own). The default is the platform's: the machine's memory once
/// `dlport_native::install()` ran, `isize::MAX` otherwise. A limit set here holds whatever the
/// order (`install()` after it keeps it), above the machine's memory too.
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
/// set_alloc_limit(1024);
/// let err = t.view().to_vec::<u8>().unwrap_err();
/// assert!(matches!(err, Error::Dispatch(DispatchError::AllocationLimit { limit: 1024, .. })));
/// set_alloc_limit(0); // the default again
/// assert_eq!(t.view().to_vec::<u8>()?.len(), 2048);
/// # Ok::<(), dlport_core::Error>(())
/// ```
pub fn set_alloc_limit(bytes: u64) -> u64 {
    let before = alloc_limit();
    USER.store(
        if bytes == 0 { UNSET } else { clamp(bytes) },
        Ordering::Relaxed,
    );
    before
}

/// Sets the platform's default allocation limit in bytes (clamped to `isize::MAX`): the
/// process limit while the user set none with [`set_alloc_limit`]. For backend crates that
/// know the machine (`dlport_native::install()` gives the machine's memory); a limit the user
/// set, before or after, outranks it.
pub fn set_default_alloc_limit(bytes: u64) {
    DEFAULT.store(clamp(bytes), Ordering::Relaxed);
}

/// A call's `max_alloc`: `None` or a number of bytes from 1. `Some(0)` is
/// [`DispatchError::InvalidOption`] ([`OptionRule::MaxAlloc`]): 0 means "none of its own" in
/// every door that takes a limit as a number, so it is never taken as a zero-byte limit.
pub(crate) fn check_max_alloc(max_alloc: Option<u64>) -> Result<(), Error> {
    match max_alloc {
        Some(0) => Err(Error::Dispatch(DispatchError::InvalidOption {
            rule: OptionRule::MaxAlloc,
            value: 0,
        })),
        _ => Ok(()),
    }
}

/// Checks a copy or an allocation of `bytes` against the limit in force: the lowest of `limit`
/// (a call's or a registry's, e.g. [`Registry::alloc_limit`](crate::Registry::alloc_limit)) and
/// the process-wide one ([`set_alloc_limit`](crate::set_alloc_limit)), before anything is
/// allocated: [`DispatchError::AllocationLimit`] when it is over. A `limit` of 0 is
/// [`DispatchError::InvalidOption`] ([`OptionRule::MaxAlloc`]), never a zero-byte limit.
pub fn check_alloc(bytes: u128, limit: Option<u64>) -> Result<(), Error> {
    check_max_alloc(limit)?;
    let limit = in_force(limit, None);
    if bytes > u128::from(limit) {
        return Err(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: bytes.into(),
            limit,
        }));
    }
    Ok(())
}
