//! The other process of the sharing tests (`share.rs`, `share_cuda.rs`): this test binary again,
//! started with [`ROLE`] set and its end of a socketpair as stdin, and the line protocol both
//! sides speak. A folder module, so that cargo does not build it as a test of its own.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};

/// The environment variable that makes the test binary run a child's role.
pub const ROLE: &str = "DLPORT_SHARE_ROLE";

/// An error as the tests report it.
pub fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

/// A child process, killed (and reaped) if a test returns before it ended.
pub struct Peer(pub Child);

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl std::ops::Deref for Peer {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Peer {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Starts this binary as `role`, its stdin one end of a socketpair; returns the other end.
pub fn spawn(role: &str) -> Result<(Peer, UnixStream), String> {
    let (ours, theirs) = UnixStream::pair().map_err(e)?;
    let child = dlport_testkit::process::this_binary()
        .map_err(e)?
        .env(ROLE, role)
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .map_err(e)?;
    Ok((Peer(child), ours))
}

/// One line from the peer, read a byte at a time (nothing past the newline is consumed: a
/// descriptor frame may follow).
pub fn line(mut sock: &UnixStream) -> Result<String, String> {
    let (mut s, mut b) = (Vec::new(), [0u8; 1]);
    loop {
        match sock.read(&mut b).map_err(e)? {
            0 => return Err(format!("the peer closed the socket after {s:?}")),
            _ if b[0] == b'\n' => return String::from_utf8(s).map_err(e),
            _ => s.push(b[0]),
        }
    }
}
