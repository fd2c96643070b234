//! [`Access`]: who else may touch a tensor's memory, the vocabulary of dlport's aliasing model.

use crate::abi::{FLAG_IS_COPIED, FLAG_READ_ONLY};

/// Who else may touch a tensor's memory while its holder has it, and so what the holder may do.
///
/// dlport's aliasing model (see `DESIGN.md`): Rust code gets `&mut [T]` into a tensor only
/// with proof that nobody else reads or writes those bytes meanwhile ([`Access::Exclusive`]).
/// The proof is either the construction (dlport built the export from storage it owned alone,
/// or copied the data, or took the memory with `release_ownership`) or the producer's word
/// (`IS_COPIED`: the consumer owns the data alone until it calls the deleter). Everything else
/// is shared (a PyTorch tensor and the NumPy array viewing it both stay writable, as DLPack
/// allows) or read-only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// Nobody else reads or writes the bytes while the holder has them: writable through
    /// `&mut [T]` (unless READ_ONLY is set).
    Exclusive,
    /// Other handles may read and write the same bytes (DLPack's ordinary shared memory).
    /// Foreign consumers may write (READ_ONLY is not set), but dlport never hands out
    /// `&mut [T]` into it.
    Shared,
    /// Other handles may read the bytes and nobody writes them: READ_ONLY.
    ReadOnly,
}

impl core::fmt::Display for Access {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Exclusive => "exclusive",
            Self::Shared => "shared with other handles (no IS_COPIED, or a no-copy export)",
            Self::ReadOnly => "read-only (READ_ONLY)",
        })
    }
}

impl Access {
    /// What a foreign producer's flags prove: READ_ONLY → read-only; IS_COPIED → exclusive;
    /// otherwise shared.
    pub const fn from_flags(flags: u64) -> Self {
        if flags & FLAG_READ_ONLY != 0 {
            Self::ReadOnly
        } else if flags & FLAG_IS_COPIED != 0 {
            Self::Exclusive
        } else {
            Self::Shared
        }
    }

    /// The weaker of two accesses (a view of a view is at most what its source allows).
    pub const fn min(self, other: Self) -> Self {
        match (self, other) {
            (Self::ReadOnly, _) | (_, Self::ReadOnly) => Self::ReadOnly,
            (Self::Shared, _) | (_, Self::Shared) => Self::Shared,
            _ => Self::Exclusive,
        }
    }
}
