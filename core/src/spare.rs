//! The two heap blocks a thread freed last, kept for its next allocations of the same layouts.
//!
//! dlport allocates two kinds of small blocks per exchange: a backend buffer per import (the
//! [`crate::Tensor`]'s shared buffer, which holds the imported tensor) and an export block per
//! export (the managed tensor a consumer releases). A program passing tensors through frees one
//! and makes the next in a steady rhythm, and glibc's `malloc` and `free` cost about 135
//! instructions a round. So, with `std` on Linux, each thread keeps the last two blocks it
//! freed (two: an import and an export alternate in an exchange) and an allocation of the same
//! layout takes one back. Per thread, not a shared list: no lock and no cache line shared
//! between threads. A block may be freed on another thread than the one that made it (a
//! consumer's deleter), as with any allocator. A thread's blocks are given back when it ends,
//! by a pthread-key destructor (see `linux` below); the main thread's stay reachable until the
//! process exits. Without `std`, and off Linux, every call goes to the global allocator.

use core::alloc::Layout;
use core::ptr::NonNull;

/// Allocates a block of `layout` (not zero-sized): a spare of that layout, else from the global
/// allocator (whose error handler runs on failure, as for `Box::new`).
#[inline]
pub(crate) fn alloc(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() != 0);
    if let Some(block) = take(layout) {
        return block;
    }
    // SAFETY: not zero-sized (contract).
    let ptr = unsafe { alloc::alloc::alloc(layout) };
    match NonNull::new(ptr) {
        Some(block) => block,
        None => alloc::alloc::handle_alloc_error(layout),
    }
}

/// Gives back a block: kept as the thread's newest spare, or deallocated.
///
/// # Safety
/// `block` came from [`alloc`] with this `layout`, its contents need no drop (dropped already
/// or never written), and nothing reaches it any more.
#[inline]
pub(crate) unsafe fn dealloc(block: NonNull<u8>, layout: Layout) {
    if let Some((block, layout)) = keep(block, layout) {
        // SAFETY: a block of this layout from the global allocator (contract, or an evicted
        // spare), unreachable.
        unsafe { alloc::alloc::dealloc(block.as_ptr(), layout) }
    }
}

#[cfg(all(feature = "std", target_os = "linux"))]
use linux::{keep, take};

#[cfg(not(all(feature = "std", target_os = "linux")))]
fn take(_: Layout) -> Option<NonNull<u8>> {
    None
}

#[cfg(not(all(feature = "std", target_os = "linux")))]
fn keep(block: NonNull<u8>, layout: Layout) -> Option<(NonNull<u8>, Layout)> {
    Some((block, layout))
}

/// The slots, on Linux: thread-locals without a destructor, emptied by a pthread-key
/// destructor. A thread-local's own destructor would not do: glibc runs thread-local
/// destructors before pthread-key destructors, and one registered after they ran (a thread
/// whose first release comes from a key destructor, as in `native/tests/c/teardown_pthread_key.c`)
/// never runs, which lost the blocks. A key destructor still runs when its value is set during
/// the key destructors (glibc repeats them, up to 4 rounds), and once it ran the thread keeps
/// nothing more. Elsewhere there are no spares.
#[cfg(all(feature = "std", target_os = "linux"))]
mod linux {
    use core::alloc::Layout;
    use core::cell::Cell;
    use core::ffi::{c_int, c_uint, c_void};
    use core::ptr::NonNull;
    use core::sync::atomic::{AtomicU64, Ordering};

    type Spare = Option<(NonNull<u8>, Layout)>;

    /// The thread has not kept a block yet; its key is not set.
    const UNARMED: u8 = 0;
    /// The thread's key is set: its destructor will empty the slots.
    const ARMED: u8 = 1;
    /// The key destructor ran (the thread is ending), or the key could not be set: keep nothing.
    const DONE: u8 = 2;

    std::thread_local! {
        /// Newest first; each owns its block.
        static SLOTS: [Cell<Spare>; 2] = const { [Cell::new(None), Cell::new(None)] };
        static STATE: Cell<u8> = const { Cell::new(UNARMED) };
    }

    // glibc and musl: `pthread_key_t` is an `unsigned int`.
    unsafe extern "C" {
        fn pthread_key_create(
            key: *mut c_uint,
            destructor: Option<unsafe extern "C" fn(*mut c_void)>,
        ) -> c_int;
        fn pthread_setspecific(key: c_uint, value: *const c_void) -> c_int;
    }

    /// The process's key plus one (0: not made yet; `u64::MAX`: could not be made).
    static KEY: AtomicU64 = AtomicU64::new(0);

    /// The key, made on first use (two threads racing may each make one; one is kept, the
    /// other never set, so never called).
    fn key() -> Option<c_uint> {
        match KEY.load(Ordering::Acquire) {
            0 => {}
            u64::MAX => return None,
            k => return Some((k - 1) as c_uint),
        }
        let mut key: c_uint = 0;
        // SAFETY: a valid out-pointer and a destructor of the right signature.
        let made = unsafe { pthread_key_create(&mut key, Some(empty_slots)) } == 0;
        let value = if made { u64::from(key) + 1 } else { u64::MAX };
        match KEY.compare_exchange(0, value, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => made.then_some(key),
            Err(u64::MAX) => None,
            Err(k) => Some((k - 1) as c_uint),
        }
    }

    /// The key destructor: gives the thread's spares back; from now on it keeps none.
    unsafe extern "C" fn empty_slots(_: *mut c_void) {
        let _ = STATE.try_with(|state| state.set(DONE));
        let _ = SLOTS.try_with(|slots| {
            for slot in slots {
                if let Some((block, layout)) = slot.take() {
                    // SAFETY: a block of this layout from the global allocator, owned by the
                    // slot alone (what `keep` put there).
                    unsafe { alloc::alloc::dealloc(block.as_ptr(), layout) };
                }
            }
        });
    }

    /// A spare of exactly `layout`, taken out of its slot.
    #[inline]
    pub(super) fn take(layout: Layout) -> Option<NonNull<u8>> {
        SLOTS
            .try_with(|slots| {
                slots.iter().find_map(|slot| match slot.get() {
                    Some((block, kept)) if kept == layout => {
                        slot.set(None);
                        Some(block)
                    }
                    _ => None,
                })
            })
            .ok()
            .flatten()
    }

    /// Keeps `block` as the newest spare; returns what no slot keeps (the evicted oldest, or
    /// `block` itself when the thread keeps nothing), for the caller to deallocate.
    #[inline]
    pub(super) fn keep(block: NonNull<u8>, layout: Layout) -> Spare {
        let state = STATE.try_with(Cell::get).unwrap_or(DONE);
        if state == DONE || (state == UNARMED && !arm()) {
            return Some((block, layout));
        }
        SLOTS
            .try_with(
                |[newest, oldest]| match newest.replace(Some((block, layout))) {
                    None => None,
                    older => oldest.replace(older),
                },
            )
            .unwrap_or(Some((block, layout)))
    }

    /// Sets the thread's key (so that its destructor empties the slots when the thread ends);
    /// whether it could.
    #[cold]
    fn arm() -> bool {
        // SAFETY: a key of this process; the value only has to be non-NULL.
        let armed = key().is_some_and(
            |k| unsafe { pthread_setspecific(k, NonNull::<u8>::dangling().as_ptr().cast()) } == 0,
        );
        let _ = STATE.try_with(|state| state.set(if armed { ARMED } else { DONE }));
        armed
    }
}
