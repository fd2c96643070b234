//! The C ABI during thread teardown, from Rust: a thread-local whose destructor calls dlport
//! runs after dlport's own thread-local state was first touched (destructors run in reverse
//! order of registration), so every entry it calls must work without any destroyed TLS. Also:
//! a message longer than the last-error buffer is cut, not lost.

use std::cell::RefCell;
use std::ffi::{CStr, c_int, c_void};
use std::ptr::null_mut;
use std::sync::mpsc;

use dlport::ffi::{
    DLPORT_INVALID_ARGUMENT, DLPORT_OK, DlportTensor, dlport_alloc, dlport_describe, dlport_export,
    dlport_last_error, dlport_release, dlport_tensor_free,
};

fn last_error() -> Option<String> {
    let p = dlport_last_error();
    // SAFETY: NULL or a NUL-terminated message, valid until the next dlport call here.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// What the destructor saw, one line per check.
fn exercise() -> Vec<String> {
    let mut seen = Vec::new();
    let shape = [8i64];
    let mut t: *mut DlportTensor = null_mut();
    // SAFETY: valid arguments, `t` writable.
    let s = unsafe { dlport_alloc(std::ptr::null(), 1, 0, 2, 32, 1, shape.as_ptr(), 1, &mut t) };
    seen.push(format!("alloc {s}"));
    let (mut out, mut v): (*mut c_void, c_int) = (null_mut(), -1);
    // SAFETY: a live handle; out pointers writable.
    let s = unsafe { dlport_export(t, 1, 3, 0, 0, 0, &mut out, &mut v) };
    seen.push(format!("export {s}"));
    // SAFETY: a live handle, freed once.
    unsafe { dlport_tensor_free(t) };
    // SAFETY: our export, released once.
    seen.push(format!("release {}", unsafe { dlport_release(out, v) }));
    // SAFETY: released before: refused without touching it.
    let s = unsafe { dlport_release(out, v) };
    seen.push(format!(
        "second release {s}: {}",
        last_error().unwrap_or_default()
    ));
    let mut json = null_mut();
    // SAFETY: NULL tensor, `json` writable.
    let s = unsafe { dlport_describe(std::ptr::null(), 1, &mut json) };
    seen.push(format!(
        "describe NULL {s}: {}",
        last_error().unwrap_or_default()
    ));
    // The panic machinery an entry relies on (catch_unwind, the default hook's report) also
    // works here: a bug caught at the boundary during teardown is a status, not an abort.
    let caught = std::panic::catch_unwind(|| panic!("a panic during teardown")).is_err();
    seen.push(format!("panic caught {caught}"));
    seen
}

struct CallsDlportOnDrop(mpsc::Sender<Vec<String>>);

impl Drop for CallsDlportOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(exercise());
    }
}

thread_local! {
    static GUARD: RefCell<Option<CallsDlportOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn entries_work_in_a_thread_local_destructor() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Registered first, so destroyed last: after dlport's state from the call below.
        GUARD.with(|g| *g.borrow_mut() = Some(CallsDlportOnDrop(tx)));
        let mut json = null_mut();
        // SAFETY: NULL tensor, `json` writable: a failed call that sets the last error.
        let s = unsafe { dlport_describe(std::ptr::null(), 1, &mut json) };
        assert_eq!(s, 1);
        assert!(last_error().is_some());
    })
    .join()
    .expect("the thread (and its TLS destructors) finished without a panic");
    let seen = rx.recv().expect("the destructor ran");
    assert_eq!(seen[0], format!("alloc {DLPORT_OK}"));
    assert_eq!(seen[1], format!("export {DLPORT_OK}"));
    assert_eq!(seen[2], format!("release {DLPORT_OK}"));
    assert!(
        seen[3].starts_with(&format!(
            "second release {DLPORT_INVALID_ARGUMENT}: managed tensor 0x"
        )) && seen[3].contains("already released"),
        "{}",
        seen[3]
    );
    assert!(seen[4].starts_with("describe NULL 1: "), "{}", seen[4]);
    assert!(
        seen[4].len() > "describe NULL 1: ".len(),
        "a message: {}",
        seen[4]
    );
    assert_eq!(seen[5], "panic caught true");
}

#[test]
fn a_long_message_is_cut_at_a_character_boundary() {
    // A backend name of 5000 bytes (multi-byte characters) makes a message over the limit.
    let name = format!("{}\0", "é".repeat(2500));
    let shape = [1i64];
    let mut t: *mut DlportTensor = null_mut();
    // SAFETY: a NUL-terminated name; valid arguments.
    let s = unsafe {
        dlport_alloc(
            name.as_ptr().cast(),
            1,
            0,
            2,
            32,
            1,
            shape.as_ptr(),
            1,
            &mut t,
        )
    };
    assert_eq!(s, DLPORT_INVALID_ARGUMENT);
    let p = dlport_last_error();
    assert!(!p.is_null());
    // SAFETY: NUL-terminated.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    assert!(bytes.len() <= 2047, "{} bytes", bytes.len());
    assert!(bytes.len() > 2000, "{} bytes", bytes.len());
    let text = std::str::from_utf8(bytes).expect("cut at a character boundary");
    assert!(text.starts_with("backend \"éé"), "{text:.40}");
    assert!(text.ends_with("..."), "{}", &text[text.len() - 20..]);
}
