//! Bad fds through `dlport_share_open`: each is refused before anything is mapped, with the
//! message naming it, as dlport-native's `share_descriptor` tests check through the Rust API.
#![cfg(target_os = "linux")]

use std::ffi::{CStr, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use dlport::ffi::{DLPORT_INVALID_ARGUMENT, dlport_last_error};
use dlport::share::dlport_share_open;
use dlport_core::{DataType, Device};
use dlport_native::share::{Descriptor, HandleKind, mapping_counts};

/// The tests below count the mappings of the whole process: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A valid descriptor of a 4×5×6 float32 tensor in a memfd.
fn good() -> Descriptor {
    Descriptor {
        kind: HandleKind::Memfd,
        device: Device::cpu(),
        dtype: DataType::FLOAT32,
        shape: vec![4, 5, 6],
        strides: vec![30, 6, 1],
        byte_offset: 0,
        byte_len: 480,
        flags: 0,
        handle: Vec::new(),
    }
}

/// The message of this thread's last call.
fn last_error() -> String {
    // SAFETY: a failed call leaves a NUL-terminated message for this thread.
    unsafe { CStr::from_ptr(dlport_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_read_only_descriptor_whose_memfd_is_not_write_sealed_is_refused() {
    let _serial = serial();
    let bytes = Descriptor { flags: 1, ..good() }.to_bytes().unwrap();
    // SAFETY: a NUL-terminated name.
    let raw = unsafe { libc::memfd_create(c"forged".as_ptr(), libc::MFD_ALLOW_SEALING) };
    assert!(raw >= 0);
    // SAFETY: just created, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sizes and seals (against shrinking, not writes) the file we own.
    unsafe {
        assert_eq!(libc::ftruncate(raw, 480), 0);
        assert_eq!(libc::fcntl(raw, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK), 0);
    }
    let raw = fd.as_raw_fd();
    let before = mapping_counts();
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid buffers; one fd, open.
    let status = unsafe { dlport_share_open(bytes.as_ptr(), bytes.len(), &raw, 1, 1, &mut out) };
    assert_ne!(status, 0);
    assert!(out.is_null());
    assert!(last_error().contains("no write seal"), "{}", last_error());
    assert_eq!(mapping_counts(), before, "a refused open mapped memory");
}

#[test]
fn a_closed_or_negative_fd_is_refused() {
    let _serial = serial();
    let bytes = good().to_bytes().unwrap();
    // Far above any fd this process opens (the lowest free number is always taken first),
    // so no other test thread can be handed it meanwhile.
    let closed = 999_999;
    for bad in [closed, -1] {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid buffers; the fd value is what is under test (checked before use).
        let status =
            unsafe { dlport_share_open(bytes.as_ptr(), bytes.len(), &bad, 1, 1, &mut out) };
        assert_eq!(status, DLPORT_INVALID_ARGUMENT);
        assert!(out.is_null());
        let msg = last_error();
        assert!(msg.contains(&format!("fds[0] = {bad}")), "{msg}");
    }
}
