//! The release tracker: the DLPack tensors handed to C are dlport's own header blocks,
//! told from foreign tensors by identity; released blocks are quarantined so their addresses
//! are not reused while a stale pointer could still arrive.

use std::collections::{HashSet, VecDeque};
use std::ffi::{c_int, c_void};
use std::hash::BuildHasherDefault;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{NonNull, null_mut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor, RawManaged};
use dlport_core::{DataType, Device, ManagedTensor};

use super::status::{Failure, arg, run};

/// Counts the DLPack tensors this C ABI handed out and how many consumers released.
pub(crate) static EXPORTED: AtomicU64 = AtomicU64::new(0);
pub(crate) static RELEASED: AtomicU64 = AtomicU64::new(0);

/// How many released exports keep their block (and so their address) reserved.
pub(crate) const QUARANTINE: usize = 4096;

/// The header of a DLPack tensor handed to C, in either form. It is what C sees: its address
/// is the tensor's address, its `deleter` is dlport's.
#[repr(C)]
pub(crate) union Header {
    versioned: ManuallyDrop<DLManagedTensorVersioned>,
    legacy: ManuallyDrop<DLManagedTensor>,
}

/// A DLPack tensor this C ABI handed out: dlport's own header (a copy of the inner export's,
/// with dlport's deleter) and the real export, dropped when a consumer releases.
///
/// Identity, not address, tells dlport's exports from foreign tensors: a released block is not
/// freed but kept in a quarantine of the last [`QUARANTINE`] released ones, so malloc cannot
/// give its address to anything else while dlport still knows it. Hence an address in
/// `Tracker::live` is a live export of ours, one in `Tracker::dead` a released export of ours,
/// and any other address a foreign tensor (or an export released more than `QUARANTINE`
/// releases ago, which is then indistinguishable from one).
#[repr(C)]
pub(crate) struct ExportBlock {
    /// First: the address of the block is the address of the header.
    header: Header,
    /// The real export (`None` once released).
    inner: Option<ManagedTensor>,
}

/// A quarantined block, owned by the tracker.
pub(crate) struct BlockPtr(NonNull<ExportBlock>);

// SAFETY: a released block is plain memory owned by the tracker (its inner export is gone);
// it is only freed, under or after the tracker lock, by whichever thread evicts it.
unsafe impl Send for BlockPtr {}

/// Hashes addresses (a folded multiply): fast, and free of `RandomState`, whose keys live in a
/// thread-local.
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let p = u128::from(self.0) * 0x9E37_79B9_7F4A_7C15;
        (p as u64) ^ ((p >> 64) as u64)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8)) ^ u64::from(b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }
}

/// A set of block addresses. (cbindgen cannot read it and the header needs nothing here.)
///
/// cbindgen:ignore
pub(crate) type AddrSet = HashSet<usize, BuildHasherDefault<AddrHasher>>;

/// The states of dlport's exports, by block address: live (handed out, not released), dead
/// (its release has begun: being dropped or quarantined). An address is in at most one set.
pub(crate) struct Tracker {
    live: AddrSet,
    dead: AddrSet,
    /// Released blocks whose inner export is dropped, oldest first; at most `QUARANTINE`.
    quarantine: VecDeque<BlockPtr>,
}

pub(crate) static TRACKER: Mutex<Tracker> = Mutex::new(Tracker {
    live: HashSet::with_hasher(BuildHasherDefault::new()),
    dead: HashSet::with_hasher(BuildHasherDefault::new()),
    quarantine: VecDeque::new(),
});

pub(crate) fn tracker() -> MutexGuard<'static, Tracker> {
    // A poisoned lock only means a panic elsewhere; every update leaves the sets consistent.
    TRACKER.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn already_released(p: *const c_void) -> Failure {
    arg(format!(
        "managed tensor {p:p} was already released (dlport exported it and its deleter has \
         run): releasing or using a DLPack tensor after its release is a bug in the caller; \
         release each tensor exactly once and drop every pointer to it"
    ))
}

/// Refuses a dlport export that was released (and is still in the quarantine), before anything
/// reads it: its header no longer describes a tensor.
pub(crate) fn refuse_released(p: *const c_void) -> Result<(), Failure> {
    if !p.is_null() && tracker().dead.contains(&(p as usize)) {
        return Err(already_released(p));
    }
    Ok(())
}

/// Releases one of dlport's exports: the first call drops the inner export (its deleter runs
/// once, outside the lock, so it may call dlport again); any later call, nested inside that
/// drop or after it, is refused without touching anything. The block then joins the
/// quarantine; the oldest quarantined block is freed.
pub(crate) fn release_export(block: *mut ExportBlock) -> Result<(), Failure> {
    let addr = block as usize;
    let inner = {
        let mut t = tracker();
        if !t.live.remove(&addr) {
            return Err(already_released(block.cast()));
        }
        t.dead.insert(addr);
        // SAFETY: `block` was live: allocated by `give` and not released; removing it from
        // `live` under the lock made this call its only releaser, so nothing else accesses it.
        unsafe { poison(block) }
    };
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(inner)));
    RELEASED.fetch_add(1, Ordering::SeqCst);
    let evicted = {
        let mut t = tracker();
        // SAFETY: `block` comes from Box::into_raw in `give`: not NULL.
        t.quarantine
            .push_back(BlockPtr(unsafe { NonNull::new_unchecked(block) }));
        if t.quarantine.len() > QUARANTINE {
            t.quarantine.pop_front().inspect(|old| {
                t.dead.remove(&(old.0.as_ptr() as usize));
            })
        } else {
            None
        }
    };
    if let Some(old) = evicted {
        // SAFETY: allocated by `give`, released (its inner export is gone) and now out of every
        // set: nothing refers to it any more.
        drop(unsafe { Box::from_raw(old.0.as_ptr()) });
    }
    if let Err(panic) = dropped {
        std::panic::resume_unwind(panic);
    }
    Ok(())
}

/// Takes the inner export out of a block being released and poisons its header (NULL data,
/// shape and strides, `ndim` -1), keeping dlport's deleter so that a second call is detected.
///
/// # Safety
/// `block` is a block from `give`, being released by the caller alone.
pub(crate) unsafe fn poison(block: *mut ExportBlock) -> Option<ManagedTensor> {
    // SAFETY: exclusive access (contract).
    let inner = unsafe { (*block).inner.take() };
    let dead = DLTensor {
        data: null_mut(),
        device: Device::cpu(),
        ndim: -1,
        dtype: DataType::new(dlport_core::abi::TypeCode(0), 0, 0),
        shape: null_mut(),
        strides: null_mut(),
        byte_offset: 0,
    };
    match inner.as_ref().map(ManagedTensor::is_versioned) {
        // SAFETY: the header is in the form of the inner export (`give`); exclusive access.
        Some(true) => unsafe { (*(*block).header.versioned).dl_tensor = dead },
        // SAFETY: as above.
        Some(false) => unsafe { (*(*block).header.legacy).dl_tensor = dead },
        None => {}
    }
    inner
}

/// The deleter of dlport's versioned exports.
///
/// # Safety
/// Called by a consumer with a pointer from this C ABI (once; later calls are refused while the
/// block is quarantined).
pub(crate) unsafe extern "C" fn export_deleter_versioned(managed: *mut DLManagedTensorVersioned) {
    deleter(managed.cast());
}

/// The deleter of dlport's legacy exports.
///
/// # Safety
/// As [`export_deleter_versioned`].
pub(crate) unsafe extern "C" fn export_deleter_legacy(managed: *mut DLManagedTensor) {
    deleter(managed.cast());
}

/// A deleter has no status: a refused call (a second release) only leaves its message for
/// `dlport_last_error`; a successful one leaves the last error alone.
pub(crate) fn deleter(block: *mut ExportBlock) {
    let _ = run(false, || {
        if block.is_null() {
            return Ok(());
        }
        release_export(block)
    });
}

/// Releases any managed tensor handed to dlport to be released: dlport's own exports through
/// the tracker (a released one is refused), foreign ones by calling their deleter.
///
/// # Safety
/// `p` is an owned managed tensor of the form `versioned` says, or one of dlport's exports
/// (live or released, in either form).
pub(crate) unsafe fn release_any(p: NonNull<c_void>, versioned: c_int) -> Result<(), Failure> {
    let addr = p.as_ptr() as usize;
    let ours = {
        let t = tracker();
        t.live.contains(&addr) || t.dead.contains(&addr)
    };
    if ours {
        return release_export(p.as_ptr().cast());
    }
    let raw = if versioned != 0 {
        RawManaged::Versioned(p.cast())
    } else {
        RawManaged::Legacy(p.cast())
    };
    // SAFETY: a foreign tensor, owned and handed over (contract).
    unsafe { raw.release() };
    Ok(())
}

/// Hands a managed tensor to C, in the requested form, counted and tracked.
pub(crate) fn give(
    t: ManagedTensor,
    versioned: bool,
    out: NonNull<*mut c_void>,
) -> Result<(), Failure> {
    let inner = t.reexport_with((), versioned)?;
    let versioned_header = inner.is_versioned();
    let header = match inner.as_raw() {
        RawManaged::Versioned(p) => {
            // SAFETY: `inner` owns this live, validated header.
            let h = unsafe { p.as_ref() };
            Header {
                versioned: ManuallyDrop::new(DLManagedTensorVersioned {
                    version: h.version,
                    manager_ctx: null_mut(),
                    deleter: Some(export_deleter_versioned),
                    flags: h.flags,
                    dl_tensor: h.dl_tensor,
                }),
            }
        }
        RawManaged::Legacy(p) => {
            // SAFETY: as above.
            let h = unsafe { p.as_ref() };
            Header {
                legacy: ManuallyDrop::new(DLManagedTensor {
                    dl_tensor: h.dl_tensor,
                    manager_ctx: null_mut(),
                    deleter: Some(export_deleter_legacy),
                }),
            }
        }
    };
    // The header's shape and strides point into `inner`, alive as long as the block is live.
    let block = Box::into_raw(Box::new(ExportBlock {
        header,
        inner: Some(inner),
    }));
    // `manager_ctx` is the block itself: DLPack leaves the field to the producer, but Paddle
    // (3.3) never calls the deleter of a tensor whose `manager_ctx` is NULL, so a NULL one
    // leaks every export given to it. Nothing of dlport reads it back (the tracker knows the
    // block by its address).
    // SAFETY: just allocated and not shared yet; the header is in the inner export's form.
    unsafe {
        if versioned_header {
            (*(*block).header.versioned).manager_ctx = block.cast();
        } else {
            (*(*block).header.legacy).manager_ctx = block.cast();
        }
    }
    EXPORTED.fetch_add(1, Ordering::SeqCst);
    tracker().live.insert(block as usize);
    // SAFETY: `out` is a valid, writable pointer (checked non-NULL; the caller's contract).
    unsafe { out.as_ptr().write(block.cast()) };
    Ok(())
}
