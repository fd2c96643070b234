//! How to share a tensor, and the frame limit every room checks.

use dlport_core::CopyPolicy;

/// The most fds one descriptor frame may carry (format 1 uses one).
pub const MAX_FDS: usize = 4;

/// How to share a tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShareOptions {
    /// Whether memory that is not one of dlport's memfds may be copied into a new one
    /// (`Never`: such memory is an error; `Always`: a copy even of a memfd).
    pub copy: CopyPolicy,
    /// The peers get the tensor READ_ONLY, in memory no process that receives it can write (a
    /// write-sealed memfd; see [the module docs](crate::share#read-only-shares)), through a read-only fd
    /// where `/proc` is mounted.
    pub read_only: bool,
    /// The most bytes a copy may allocate (`None`: the process-wide limit).
    pub max_alloc: Option<u64>,
}
