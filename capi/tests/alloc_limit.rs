//! The process's allocation limit through the C ABI's allocation, `dlport_alloc`: the
//! registry's allocation, checked once there for every backend, and a limit raised above the
//! machine's memory honoured as in every other door. The limit is process-wide, so this binary
//! is its own and its tests take `LOCK` in turn, restoring the default.

use std::ffi::{CStr, c_int};
use std::sync::{Mutex, MutexGuard, PoisonError};

use dlport::cabi::{DLPORT_ERR_ALLOCATION_LIMIT, DLPORT_OK};
use dlport::ffi::*;

static LOCK: Mutex<()> = Mutex::new(());

/// Holds the process limit for one test and restores the default (0) when dropped.
struct Held(#[allow(dead_code)] MutexGuard<'static, ()>);

fn hold() -> Held {
    Held(LOCK.lock().unwrap_or_else(PoisonError::into_inner))
}

impl Drop for Held {
    fn drop(&mut self) {
        dlport_set_alloc_limit(0);
    }
}

fn last_error() -> String {
    // SAFETY: called right after a failure on this thread.
    unsafe { CStr::from_ptr(dlport_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// `dlport_alloc` of `n` uint8 on the CPU through `backend` (`None`: the one that serves it):
/// the status, and the handle freed.
fn alloc(backend: Option<&CStr>, n: i64) -> c_int {
    let shape = [n];
    let mut out = std::ptr::null_mut();
    let name = backend.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: a NUL-terminated name or NULL, a readable shape, a writable out.
    let status = unsafe { dlport_alloc(name, 1, 0, 1, 8, 1, shape.as_ptr(), 1, &mut out) };
    if status == DLPORT_OK {
        // SAFETY: a handle dlport_alloc gave, freed once.
        unsafe { dlport_tensor_free(out) };
    }
    status
}

const BACKENDS: [Option<&CStr>; 3] = [None, Some(c"cpu"), Some(c"pinned")];

#[test]
fn dlport_alloc_refuses_four_mib_under_a_one_mib_limit_on_every_backend() {
    let _held = hold();
    dlport_set_alloc_limit(1 << 20);
    for backend in BACKENDS {
        assert_eq!(
            alloc(backend, 4 << 20),
            DLPORT_ERR_ALLOCATION_LIMIT,
            "{backend:?}"
        );
        let e = last_error();
        assert!(
            e.contains("needs 4194304 bytes, above the allocation limit of 1048576 bytes"),
            "{backend:?}: {e}"
        );
    }
    dlport_set_alloc_limit(8 << 20);
    assert_eq!(alloc(None, 4 << 20), DLPORT_OK, "{}", last_error());
    assert_eq!(alloc(Some(c"cpu"), 4 << 20), DLPORT_OK, "{}", last_error());
}

#[test]
fn a_limit_raised_above_the_machines_memory_holds_in_dlport_alloc() {
    let _held = hold();
    dlport_set_alloc_limit(0);
    let memory = dlport_alloc_limit();
    let raised = 2 * memory;
    dlport_set_alloc_limit(raised);
    assert_eq!(dlport_alloc_limit(), raised);
    let past = i64::try_from(3 * memory).unwrap();
    for backend in BACKENDS {
        assert_eq!(
            alloc(backend, past),
            DLPORT_ERR_ALLOCATION_LIMIT,
            "{backend:?}"
        );
        let e = last_error();
        assert!(
            e.contains(&format!("above the allocation limit of {raised} bytes")),
            "{backend:?}: the raised limit is the one in force: {e}"
        );
    }
    dlport_set_alloc_limit(0);
    assert_eq!(
        dlport_alloc_limit(),
        memory,
        "0: the machine's memory again"
    );
}

#[test]
fn an_aligned_compaction_counts_what_its_alignment_can_take() {
    let _held = hold();
    // Two bytes, compacted with DLPORT_COPY_ALWAYS (2) and a 2^30 alignment.
    let shape = [2i64];
    let mut t = std::ptr::null_mut();
    // SAFETY: a readable shape, a writable out.
    let status =
        unsafe { dlport_alloc(std::ptr::null(), 1, 0, 1, 8, 1, shape.as_ptr(), 1, &mut t) };
    assert_eq!(status, DLPORT_OK, "{}", last_error());
    let compact = |max_alloc: u64| {
        let mut out = std::ptr::null_mut();
        // SAFETY: a live handle, a writable out.
        let status = unsafe { dlport_tensor_compact(t, 1 << 30, 2, max_alloc, &mut out) };
        if status == DLPORT_OK {
            let mut data = std::ptr::null_mut();
            let mut offset = 0;
            // SAFETY: a live handle; writable outs.
            let got = unsafe { dlport_tensor_data(out, &mut data, &mut offset) };
            assert_eq!(got, DLPORT_OK);
            assert_eq!((data as u64 + offset) % (1 << 30), 0, "aligned as asked");
            // SAFETY: the handle dlport_tensor_compact gave, freed once.
            unsafe { dlport_tensor_free(out) };
        }
        status
    };
    // The copy (2 bytes) and the aligned one (2 + 2^30 - 1), as the limit counts them.
    let counted = "needs 1073741827 bytes";
    dlport_set_alloc_limit(1 << 20);
    for _ in 0..8 {
        assert_eq!(compact(0), DLPORT_ERR_ALLOCATION_LIMIT);
        let e = last_error();
        assert!(
            e.contains(counted) && e.contains("limit of 1048576 bytes"),
            "{e}"
        );
    }
    dlport_set_alloc_limit(0);
    assert_eq!(compact(1 << 30), DLPORT_ERR_ALLOCATION_LIMIT);
    assert!(last_error().contains(counted), "{}", last_error());
    assert_eq!(compact(0), DLPORT_OK, "{}", last_error());
    // SAFETY: the handle dlport_alloc gave, freed once.
    unsafe { dlport_tensor_free(t) };
}
