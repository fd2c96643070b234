//! A read-only share through the C entries (`dlport_share_alloc`, `dlport_share`,
//! `dlport_share_send`, `dlport_share_recv`, `dlport_share_open`): the receiver gets the bytes,
//! a READ_ONLY tensor, and fds through which nothing writes the memory. (dlport-native's
//! `share` test attacks shares from other processes through the Rust API; the seals are the
//! same.)
#![cfg(target_os = "linux")]

use std::ffi::c_void;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use dlport::share::{
    DlportShared, dlport_share, dlport_share_alloc, dlport_share_mapping_counts, dlport_share_open,
    dlport_share_recv, dlport_share_send, dlport_shared_descriptor, dlport_shared_fds,
    dlport_shared_free,
};
use dlport_core::abi::DLManagedTensorVersioned;

fn pattern(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

/// Every way of writing through `fd` this test tries, each refused.
fn writes_refused(fd: i32, len: usize) -> Vec<String> {
    let mut allowed = Vec::new();
    let byte = [0u8];
    // SAFETY: one readable byte; an fd the test holds.
    if unsafe { libc::pwrite(fd, byte.as_ptr().cast(), 1, 0) } == 1 {
        allowed.push("pwrite".to_owned());
    }
    // SAFETY: a new mapping of an fd the test holds, unmapped at once if made.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p != libc::MAP_FAILED {
        allowed.push("mmap(PROT_WRITE, MAP_SHARED)".to_owned());
        // SAFETY: the mapping just made.
        unsafe { libc::munmap(p, len) };
    }
    // SAFETY: an fd the test holds.
    if unsafe { libc::ftruncate(fd, 0) } == 0 {
        allowed.push("ftruncate(shrink to 0)".to_owned());
    }
    // A writable reopen through /proc.
    if std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{fd}"))
        .and_then(|mut f| std::io::Write::write(&mut f, &byte))
        .is_ok()
    {
        allowed.push("write through a /proc/self/fd reopen".to_owned());
    }
    allowed
}

#[test]
fn a_read_only_share_through_the_c_abi_is_unwritable() {
    let n = 4096 + 7;
    let mut managed: *mut c_void = std::ptr::null_mut();
    // SAFETY: a 1-d shape of one extent and a writable out pointer.
    let status = unsafe { dlport_share_alloc(1, 8, 1, &(n as i64), 1, 1, &mut managed) };
    assert_eq!(status, 0);
    let m = managed.cast::<DLManagedTensorVersioned>();
    // SAFETY: a live versioned tensor of `n` uint8 in a memfd nobody else maps yet.
    unsafe {
        let data = (*m).dl_tensor.data.cast::<u8>();
        for i in 0..n {
            data.add(i).write(pattern(i));
        }
    }
    let mut shared: *mut DlportShared = std::ptr::null_mut();
    // SAFETY: consumes the tensor made above; DLPORT_COPY_NEVER (0), read-only.
    let status = unsafe { dlport_share(managed, 1, 0, 1, &mut shared) };
    assert_eq!(status, 0);
    let (a, b) = UnixStream::pair().unwrap();
    // SAFETY: a live handle and a connected socket.
    assert_eq!(unsafe { dlport_share_send(shared, a.as_raw_fd()) }, 0);
    // SAFETY: the handle is not used again.
    unsafe { dlport_shared_free(shared) };
    let mut received: *mut DlportShared = std::ptr::null_mut();
    // SAFETY: a connected socket with a frame waiting; `received` writable.
    let status = unsafe { dlport_share_recv(b.as_raw_fd(), &mut received) };
    assert_eq!(status, 0);
    let (mut bytes, mut len, mut fds, mut nfds) = (std::ptr::null(), 0, std::ptr::null(), 0);
    let mut opened: *mut c_void = std::ptr::null_mut();
    let (mapped, _) = {
        let (mut m, mut u) = (0, 0);
        // SAFETY: writable counters.
        unsafe { dlport_share_mapping_counts(&mut m, &mut u) };
        (m, u)
    };
    // SAFETY: a live handle, writable out pointers; the bytes and fds stay the handle's while
    // it is opened.
    let status = unsafe {
        dlport_shared_descriptor(received, &mut bytes, &mut len);
        dlport_shared_fds(received, &mut fds, &mut nfds);
        dlport_share_open(bytes, len, fds, nfds, 1, &mut opened)
    };
    assert_eq!(status, 0);
    assert_eq!(nfds, 1);
    // SAFETY: one fd, owned by the live handle.
    let fd = unsafe { *fds };
    let allowed = writes_refused(fd, n);
    assert!(allowed.is_empty(), "writes allowed: {allowed:?}");
    let o = opened.cast::<DLManagedTensorVersioned>();
    // SAFETY: a live versioned tensor of `n` bytes, released once below.
    let (flags, view) = unsafe {
        (
            (*o).flags,
            std::slice::from_raw_parts((*o).dl_tensor.data.cast::<u8>(), n).to_vec(),
        )
    };
    // SAFETY: released once, by its own deleter.
    unsafe { ((*o).deleter.expect("a deleter"))(o) };
    // SAFETY: the handle is not used again.
    unsafe { dlport_shared_free(received) };
    assert!(flags & 1 != 0, "opened without READ_ONLY");
    assert!(view.iter().enumerate().all(|(i, &b)| b == pattern(i)));
    let (mut m, mut u) = (0, 0);
    // SAFETY: writable counters.
    unsafe { dlport_share_mapping_counts(&mut m, &mut u) };
    assert_eq!(m, mapped + 1, "the open mapped once");
    assert_eq!(m, u, "every mapping was unmapped");
}
