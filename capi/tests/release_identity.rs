//! `dlport_release` tells dlport's own exports from foreign tensors by identity, not by address.
//!
//! The whole test binary runs on a recycling allocator: every small block freed goes on one
//! LIFO free list and is handed out by the next small allocation, whoever asks. So when dlport
//! frees an export's header, the very next foreign header lands at that address (what malloc
//! does in real programs, only deterministically). The tests drive the C ABI's extern fns and
//! check that every foreign deleter runs exactly once, that a released export released again
//! is refused (never run twice), that a nested release is refused, and that the export counts
//! are exact.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{CStr, c_int, c_void};
use std::ptr::{NonNull, null_mut};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use dlport::ffi::{
    DLPORT_INVALID_ARGUMENT, DLPORT_OK, dlport_convert, dlport_describe, dlport_export_counts,
    dlport_import, dlport_last_error, dlport_release,
};
use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use dlport_core::{DataType, Device};

// ── The recycling allocator ──

/// Blocks up to this size (and alignment 16) come from the shared free list.
const SLOT: usize = 1024;

/// One LIFO free list of `SLOT`-byte blocks for every small allocation; blocks are never given
/// back to the system, so an address freed is the next one handed out.
struct Recycling {
    /// Head of the intrusive free list (the first word of a free block holds the next).
    head: Mutex<usize>,
}

// SAFETY: small blocks are `SLOT` bytes aligned to 16 (from System), so any layout of at most
// `SLOT` bytes and alignment 16 fits; a block is on the free list or handed out, never both
// (the list is only touched under the mutex); larger layouts go to System unchanged.
unsafe impl GlobalAlloc for Recycling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > SLOT || layout.align() > 16 {
            // SAFETY: forwarded contract.
            return unsafe { System.alloc(layout) };
        }
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        if *head != 0 {
            let block = *head as *mut u8;
            // SAFETY: a free block, whose first word holds the next free block.
            *head = unsafe { block.cast::<usize>().read() };
            return block;
        }
        drop(head);
        // SAFETY: a non-zero size and a valid alignment.
        unsafe { System.alloc(Layout::from_size_align_unchecked(SLOT, 16)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() > SLOT || layout.align() > 16 {
            // SAFETY: forwarded contract (allocated by System with this layout).
            return unsafe { System.dealloc(ptr, layout) };
        }
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: a `SLOT`-byte block of ours, no longer used by its owner.
        unsafe { ptr.cast::<usize>().write(*head) };
        *head = ptr as usize;
    }
}

#[global_allocator]
static ALLOC: Recycling = Recycling {
    head: Mutex::new(0),
};

// ── A foreign producer ──

/// How often each foreign tensor's deleter ran, by id.
fn deleted() -> &'static [AtomicU32] {
    static D: OnceLock<Vec<AtomicU32>> = OnceLock::new();
    D.get_or_init(|| (0..1_000_000).map(|_| AtomicU32::new(0)).collect())
}
static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
/// Nested releases attempted from a deleter, and how many of them were refused as expected.
static NESTED: AtomicUsize = AtomicUsize::new(0);
static NESTED_REFUSED: AtomicUsize = AtomicUsize::new(0);

/// A foreign tensor: header, shape and data in one heap block (a small one: recycled).
#[repr(C)]
struct Foreign<H> {
    header: H,
    shape: [i64; 1],
    strides: [i64; 1],
    data: [f32; 4],
    id: usize,
    /// When set, the deleter releases this export again (a nested release) and expects a
    /// refusal.
    outer: AtomicPtr<c_void>,
    outer_versioned: AtomicI32,
}

fn dl_tensor(shape: *mut i64, strides: *mut i64, data: *mut f32) -> DLTensor {
    DLTensor {
        data: data.cast(),
        device: Device::cpu(),
        ndim: 1,
        dtype: DataType::FLOAT32,
        shape,
        strides,
        byte_offset: 0,
    }
}

fn deleter_ran<H>(b: &Foreign<H>) {
    deleted()[b.id].fetch_add(1, Ordering::SeqCst);
    let outer = b.outer.load(Ordering::SeqCst);
    if !outer.is_null() {
        NESTED.fetch_add(1, Ordering::SeqCst);
        // SAFETY: a nested release of the export being released: dlport must refuse it.
        let status = unsafe { dlport_release(outer, b.outer_versioned.load(Ordering::SeqCst)) };
        if status == DLPORT_INVALID_ARGUMENT && last_error().contains("already released") {
            NESTED_REFUSED.fetch_add(1, Ordering::SeqCst);
        }
    }
}

unsafe extern "C" fn delete_v(p: *mut DLManagedTensorVersioned) {
    // SAFETY: a Box<Foreign<..>> made by `foreign`, released once (checked by the counts).
    let b = unsafe { Box::from_raw(p.cast::<Foreign<DLManagedTensorVersioned>>()) };
    deleter_ran(&b);
}

unsafe extern "C" fn delete_l(p: *mut DLManagedTensor) {
    // SAFETY: as above.
    let b = unsafe { Box::from_raw(p.cast::<Foreign<DLManagedTensor>>()) };
    deleter_ran(&b);
}

/// A new foreign tensor (versioned or legacy) and its id.
fn foreign(versioned: bool, outer: *mut c_void, outer_versioned: c_int) -> (*mut c_void, usize) {
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    assert!(id < deleted().len(), "raise the id table's size");
    if versioned {
        let mut b = Box::new(Foreign {
            header: DLManagedTensorVersioned {
                version: DLPackVersion::new(1, 3),
                manager_ctx: null_mut(),
                deleter: Some(delete_v),
                flags: 0,
                dl_tensor: dl_tensor(null_mut(), null_mut(), null_mut()),
            },
            shape: [4],
            strides: [1],
            data: [1.0, 2.0, 3.0, 4.0],
            id,
            outer: AtomicPtr::new(outer),
            outer_versioned: AtomicI32::new(outer_versioned),
        });
        b.header.dl_tensor = dl_tensor(
            b.shape.as_mut_ptr(),
            b.strides.as_mut_ptr(),
            b.data.as_mut_ptr(),
        );
        (Box::into_raw(b).cast(), id)
    } else {
        let mut b = Box::new(Foreign {
            header: DLManagedTensor {
                dl_tensor: dl_tensor(null_mut(), null_mut(), null_mut()),
                manager_ctx: null_mut(),
                deleter: Some(delete_l),
            },
            shape: [4],
            strides: [1],
            data: [1.0, 2.0, 3.0, 4.0],
            id,
            outer: AtomicPtr::new(outer),
            outer_versioned: AtomicI32::new(outer_versioned),
        });
        b.header.dl_tensor = dl_tensor(
            b.shape.as_mut_ptr(),
            b.strides.as_mut_ptr(),
            b.data.as_mut_ptr(),
        );
        (Box::into_raw(b).cast(), id)
    }
}

/// Makes the deleter of the live foreign tensor `f` release `outer` again (nested release).
fn set_outer(f: *mut c_void, versioned: bool, outer: *mut c_void, outer_versioned: bool) {
    // SAFETY: `f` is a live foreign tensor (a dlport export holds it), of the form `versioned`;
    // the fields written are atomics, read by its deleter.
    let (o, ov) = unsafe {
        if versioned {
            let b = &*f.cast::<Foreign<DLManagedTensorVersioned>>();
            (&b.outer, &b.outer_versioned)
        } else {
            let b = &*f.cast::<Foreign<DLManagedTensor>>();
            (&b.outer, &b.outer_versioned)
        }
    };
    ov.store(c_int::from(outer_versioned), Ordering::SeqCst);
    o.store(outer, Ordering::SeqCst);
}

fn last_error() -> String {
    let p = dlport_last_error();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated message, valid until the next dlport call on this thread.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn counts() -> (u64, u64) {
    let (mut e, mut r) = (0, 0);
    // SAFETY: writable.
    unsafe { dlport_export_counts(&mut e, &mut r) };
    (e, r)
}

/// The tests share the global counters: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Wraps a new foreign tensor in a dlport export (`dlport_convert`).
fn export(versioned: bool, to_versioned: bool) -> (*mut c_void, usize) {
    let (f, id) = foreign(versioned, null_mut(), 0);
    let mut out = null_mut();
    // SAFETY: an owned tensor handed over; `out` writable.
    let s = unsafe {
        dlport_convert(
            f,
            c_int::from(versioned),
            c_int::from(to_versioned),
            &mut out,
        )
    };
    assert_eq!(s, DLPORT_OK, "convert: {}", last_error());
    (out, id)
}

#[test]
fn foreign_tensors_at_recycled_export_addresses_are_released_across_threads() {
    let _serial = serial();
    const THREADS: usize = 8;
    const PER: usize = 3000;
    let (e0, r0) = counts();
    let first_id = NEXT_ID.load(Ordering::SeqCst);
    let released_exports = Mutex::new(std::collections::HashSet::<usize>::new());
    let staged = AtomicUsize::new(0);
    let exports = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (released_exports, staged, exports) = (&released_exports, &staged, &exports);
            s.spawn(move || {
                for k in 0..PER {
                    let (v, to_v) = ((k + t) % 2 == 0, (k / 2 + t) % 2 == 0);
                    if k % 16 == 5 {
                        // A nested release: the producer's deleter releases the export again.
                        let (f, _) = foreign(v, null_mut(), 0);
                        let mut out = null_mut();
                        // SAFETY: owned, handed over; `out` writable.
                        let st = unsafe {
                            dlport_convert(f, c_int::from(v), c_int::from(to_v), &mut out)
                        };
                        assert_eq!(st, DLPORT_OK);
                        exports.fetch_add(1, Ordering::SeqCst);
                        set_outer(f, v, out, to_v);
                        // SAFETY: our export, released once.
                        assert_eq!(unsafe { dlport_release(out, c_int::from(to_v)) }, DLPORT_OK);
                        released_exports.lock().unwrap().insert(out as usize);
                        continue;
                    }
                    let (e, _) = export(v, to_v);
                    exports.fetch_add(1, Ordering::SeqCst);
                    // SAFETY: our export, released once.
                    let st = unsafe { dlport_release(e, c_int::from(to_v)) };
                    assert_eq!(st, DLPORT_OK, "{}", last_error());
                    released_exports.lock().unwrap().insert(e as usize);
                    // The next small block handed out is the one freed last: with address
                    // tracking, this foreign tensor would sit at a dead export's address.
                    let (f, id) = foreign(!v, null_mut(), 0);
                    if released_exports.lock().unwrap().contains(&(f as usize)) {
                        staged.fetch_add(1, Ordering::SeqCst);
                    }
                    // SAFETY: an owned foreign tensor, released once.
                    let st = unsafe { dlport_release(f, c_int::from(!v)) };
                    assert_eq!(
                        st,
                        DLPORT_OK,
                        "foreign tensor {f:p} (id {id}) refused: {}",
                        last_error()
                    );
                    assert_eq!(deleted()[id].load(Ordering::SeqCst), 1, "id {id}");
                }
            });
        }
    });
    let last_id = NEXT_ID.load(Ordering::SeqCst);
    for id in first_id..last_id {
        assert_eq!(
            deleted()[id].load(Ordering::SeqCst),
            1,
            "foreign tensor {id}: deleter calls"
        );
    }
    let staged = staged.load(Ordering::SeqCst);
    println!(
        "{} foreign tensors, {staged} of them at the address of a released export",
        last_id - first_id
    );
    assert!(
        staged > 0,
        "the recycling allocator never put a foreign tensor at a released export's address: \
         the test did not exercise the case"
    );
    let nested = THREADS * PER.div_ceil(16);
    assert_eq!(NESTED.load(Ordering::SeqCst), nested);
    assert_eq!(
        NESTED_REFUSED.load(Ordering::SeqCst),
        nested,
        "every nested release was refused"
    );
    let (e1, r1) = counts();
    let exports = exports.load(Ordering::SeqCst) as u64;
    assert_eq!(e1 - e0, exports, "exported count");
    assert_eq!(r1 - r0, exports, "released count");
}

#[test]
fn a_released_export_released_again_is_refused_by_every_path() {
    let _serial = serial();
    let (e0, r0) = counts();
    for (v, to_v) in [(true, true), (true, false), (false, true), (false, false)] {
        let (e, id) = export(v, to_v);
        let to = c_int::from(to_v);
        // The export's own deleter, as a consumer would call it.
        // SAFETY: our live export, of the form `to_v`.
        let call_deleter = move || unsafe {
            if to_v {
                let m = e.cast::<DLManagedTensorVersioned>();
                (*m).deleter.unwrap()(m)
            } else {
                let m = e.cast::<DLManagedTensor>();
                (*m).deleter.unwrap()(m)
            }
        };
        // SAFETY: our export, released once.
        assert_eq!(unsafe { dlport_release(e, to) }, DLPORT_OK);
        assert_eq!(deleted()[id].load(Ordering::SeqCst), 1);
        let name = format!("{e:p}");
        for flag in [to, 1 - to] {
            // SAFETY: a released export: dlport must refuse it without touching the producer.
            assert_eq!(unsafe { dlport_release(e, flag) }, DLPORT_INVALID_ARGUMENT);
            let msg = last_error();
            assert!(
                msg.contains(&name) && msg.contains("already released"),
                "{msg}"
            );
        }
        // A consumer calling the deleter a second time: a no-op that reports the misuse.
        call_deleter();
        assert!(last_error().contains(&name), "{}", last_error());
        // Consuming and borrowing calls refuse it too, without releasing anything.
        let mut t = null_mut();
        // SAFETY: a released export: refused before any read.
        let st = unsafe { dlport_import(e, to, std::ptr::null(), &mut t) };
        assert_eq!(st, DLPORT_INVALID_ARGUMENT);
        assert!(t.is_null() && last_error().contains("already released"));
        let mut json = null_mut();
        // SAFETY: as above.
        let st = unsafe { dlport_describe(e, to, &mut json) };
        assert_eq!(st, DLPORT_INVALID_ARGUMENT);
        assert!(json.is_null());
        assert_eq!(deleted()[id].load(Ordering::SeqCst), 1, "deleter ran once");
    }
    let (e1, r1) = counts();
    assert_eq!((e1 - e0, r1 - r0), (4, 4), "exact counts");
}

#[test]
fn the_deleter_called_inside_itself_is_refused() {
    let _serial = serial();
    let (e0, r0) = counts();
    // The producer's deleter calls the export's deleter (not dlport_release) re-entrantly.
    static OUTER: AtomicPtr<c_void> = AtomicPtr::new(null_mut());
    static INNER_STATUS: Mutex<String> = Mutex::new(String::new());
    unsafe extern "C" fn reenter(p: *mut DLManagedTensorVersioned) {
        // SAFETY: the Box made below, released once.
        let b = unsafe { Box::from_raw(p.cast::<Foreign<DLManagedTensorVersioned>>()) };
        deleted()[b.id].fetch_add(1, Ordering::SeqCst);
        let Some(o) = NonNull::new(
            OUTER
                .load(Ordering::SeqCst)
                .cast::<DLManagedTensorVersioned>(),
        ) else {
            return; // released before the export existed (a failed convert)
        };
        let o = o.as_ptr();
        // SAFETY: the export being released: its block is still dlport's; its deleter must
        // detect the re-entry.
        unsafe { (*o).deleter.unwrap()(o) };
        *INNER_STATUS.lock().unwrap() = last_error();
    }
    let (f, id) = foreign(true, null_mut(), 0);
    // SAFETY: a live foreign tensor of ours.
    unsafe { (*f.cast::<DLManagedTensorVersioned>()).deleter = Some(reenter) };
    let mut out = null_mut();
    // SAFETY: owned, handed over.
    assert_eq!(unsafe { dlport_convert(f, 1, 1, &mut out) }, DLPORT_OK);
    OUTER.store(out, Ordering::SeqCst);
    let m = NonNull::new(out.cast::<DLManagedTensorVersioned>()).unwrap();
    // SAFETY: our export, released once through its deleter.
    unsafe { (*m.as_ptr()).deleter.unwrap()(m.as_ptr()) };
    assert_eq!(deleted()[id].load(Ordering::SeqCst), 1);
    let msg = INNER_STATUS.lock().unwrap().clone();
    assert!(
        msg.contains("already released") && msg.contains(&format!("{out:p}")),
        "{msg}"
    );
    let (e1, r1) = counts();
    assert_eq!((e1 - e0, r1 - r0), (1, 1));
}
