//! Descriptors over a Unix stream socket (Linux): one frame per descriptor, a little-endian
//! `u32` length then the descriptor's bytes, with its fds attached to the frame's first bytes
//! as `SCM_RIGHTS` ancillary data.
//!
//! The receiver reads exactly the 4 length bytes with `recvmsg` (which brings the fds, marked
//! close-on-exec), then exactly the frame: it never reads into the next frame. Received fds are
//! owned (`OwnedFd`) the moment they arrive, so every error path closes them.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use dlport_core::Error;

use super::descriptor::DESCRIPTOR_MAX;
use super::errors::{descriptor_too_long, errno, os_error};
use super::options::MAX_FDS;

/// Control-message space for `n` fds, as `u64` words (cmsg buffers must be aligned).
fn control_words(n: usize) -> usize {
    // SAFETY: CMSG_SPACE only computes a size.
    let bytes = unsafe { libc::CMSG_SPACE((n * size_of::<c_int>()) as u32) } as usize;
    bytes.div_ceil(size_of::<u64>())
}

fn retry<T: PartialOrd + Default>(mut f: impl FnMut() -> T) -> T {
    loop {
        let r = f();
        if r >= T::default() || errno() != i64::from(libc::EINTR) {
            return r;
        }
    }
}

/// Sends one frame with `fds` attached.
pub(super) fn send(
    socket: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
) -> Result<(), Error> {
    if fds.len() > MAX_FDS {
        return Err(os_error(
            "sendmsg",
            fds.len() as i64,
            "more fds than a frame carries (4)",
        ));
    }
    let mut frame = Vec::with_capacity(4 + bytes.len());
    frame.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    frame.extend_from_slice(bytes);
    let mut control = vec![0u64; control_words(fds.len())];
    let mut iov = libc::iovec {
        iov_base: frame.as_ptr().cast_mut().cast::<c_void>(),
        iov_len: frame.len(),
    };
    // SAFETY: all-zero is a valid msghdr (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = (control.len() * size_of::<u64>()) as _;
        // SAFETY: the control buffer holds CMSG_SPACE(fds) aligned bytes, so the first header
        // and its data (fds.len() ints) fit inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN((fds.len() * size_of::<c_int>()) as u32) as _;
            let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `msg` points at live buffers (frame, control) for the duration of the call.
    let n = retry(|| unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) });
    if n < 0 {
        return Err(os_error(
            "sendmsg",
            errno(),
            "sending the descriptor failed (EPIPE: the peer closed the socket; ENOTSOCK: not \
             a Unix socket)",
        ));
    }
    let mut sent = n as usize;
    while sent < frame.len() {
        let rest = &frame[sent..];
        // SAFETY: `rest` is readable for its length.
        let n = retry(|| unsafe {
            libc::send(
                socket.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        });
        if n <= 0 {
            return Err(os_error(
                "send",
                errno(),
                "the peer closed the socket mid-frame",
            ));
        }
        sent += n as usize;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes (after the first `have`).
fn read_exact(socket: BorrowedFd<'_>, buf: &mut [u8], mut have: usize) -> Result<(), Error> {
    while have < buf.len() {
        let rest = &mut buf[have..];
        // SAFETY: `rest` is writable for its length.
        let n = retry(|| unsafe {
            libc::recv(socket.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len(), 0)
        });
        if n < 0 {
            return Err(os_error("recv", errno(), "receiving the descriptor failed"));
        }
        if n == 0 {
            return Err(os_error(
                "recv",
                have as i64,
                "the peer closed the socket in the middle of a descriptor (the code is the \
                 bytes received)",
            ));
        }
        have += n as usize;
    }
    Ok(())
}

/// Receives one frame and the fds attached to it.
pub(super) fn recv(socket: BorrowedFd<'_>) -> Result<(Vec<u8>, Vec<OwnedFd>), Error> {
    let mut head = [0u8; 4];
    let mut control = vec![0u64; control_words(MAX_FDS)];
    let mut iov = libc::iovec {
        iov_base: head.as_mut_ptr().cast(),
        iov_len: head.len(),
    };
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = (control.len() * size_of::<u64>()) as _;
    // SAFETY: `msg` points at live, writable buffers for the duration of the call.
    let n =
        retry(|| unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) });
    if n < 0 {
        return Err(os_error(
            "recvmsg",
            errno(),
            "receiving the descriptor failed (ENOTSOCK: not a Unix socket)",
        ));
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_controllen` bytes of well-formed control messages; each
    // SCM_RIGHTS message holds (cmsg_len - CMSG_LEN(0)) / 4 fds just installed in this
    // process, owned by nobody else, so each becomes an OwnedFd at once.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
                for i in 0..bytes / size_of::<c_int>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 {
        return Err(os_error(
            "recvmsg",
            0,
            "the peer closed the socket before sending a descriptor",
        ));
    }
    read_exact(socket, &mut head, n as usize)?;
    let len = u32::from_le_bytes(head) as usize;
    if len > DESCRIPTOR_MAX {
        return Err(descriptor_too_long(len));
    }
    let mut bytes = vec![0u8; len];
    // The whole frame is read even when it is refused below, so the next one starts in step.
    read_exact(socket, &mut bytes, 0)?;
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(os_error(
            "recvmsg",
            fds.len() as i64,
            "the peer attached more than 4 fds to one descriptor (the kernel dropped some; \
             the code is the number kept, now closed)",
        ));
    }
    Ok((bytes, fds))
}
