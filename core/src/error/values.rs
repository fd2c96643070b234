//! Small value types that keep the errors within their size bound: a short inline string, a
//! byte count past 64 bits and an address, the last two at a 4-byte alignment.

use core::fmt;

/// A short string stored inline (no allocation), for a name a caller passed (an unparsable data
/// type or device name) in an error that must also work without `alloc`.
///
/// Longer text is cut at a character boundary and shown with a trailing `…`. It is 22 bytes
/// at an alignment of 1, so that [`DispatchError::InvalidName`](super::DispatchError) stays
/// within [`Error`](super::Error)'s size bound.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortStr {
    buf: [u8; Self::CAPACITY],
    len: u8,
    truncated: bool,
}

impl ShortStr {
    /// Bytes kept.
    pub const CAPACITY: usize = 20;

    /// Copies `s`, cutting it at a character boundary if it is longer than [`Self::CAPACITY`].
    pub fn new(s: &str) -> Self {
        let mut end = s.len().min(Self::CAPACITY);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let mut buf = [0u8; Self::CAPACITY];
        buf[..end].copy_from_slice(&s.as_bytes()[..end]);
        Self {
            buf,
            len: end as u8,
            truncated: end < s.len(),
        }
    }

    /// The stored text (without the `…` of a cut one).
    pub fn as_str(&self) -> &str {
        // The buffer always holds a prefix of a `str` cut at a char boundary.
        core::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or("")
    }

    /// Whether the text was cut.
    pub const fn is_truncated(&self) -> bool {
        self.truncated
    }
}

/// Shown as written, except control characters, quotes and backslashes, which are escaped as
/// Rust writes them (`\0`, `\n`, `\u{1b}`, `\"`): the text is a caller's, and an error message
/// quotes it on one line, into logs and terminals.
impl fmt::Display for ShortStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.as_str().chars() {
            if c.is_control() || c == '"' || c == '\\' {
                fmt::Display::fmt(&c.escape_debug(), f)?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ShortStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A value read from outside that is not one number (a JSON array, a text, a flatbuffer's
/// verdict), as [`DispatchError::InvalidInput`](super::DispatchError) shows it: cut at
/// [`Self::MAX_LEN`] bytes at a character boundary (shown with a trailing `…`), with control
/// characters escaped as Rust writes them (`\n`, `\u{1b}`), so that the message stays one line.
/// One pointer, so that the error stays within its size bound.
#[cfg(feature = "alloc")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ShownValue(
    #[allow(
        clippy::box_collection,
        reason = "a thin pointer keeps DispatchError within 24 bytes"
    )]
    alloc::boxed::Box<alloc::string::String>,
);

#[cfg(feature = "alloc")]
impl ShownValue {
    /// Bytes of the value's text kept.
    pub const MAX_LEN: usize = 160;

    /// `value`, escaped and cut.
    pub fn new(value: &str) -> Self {
        use core::fmt::Write as _;
        let mut out = alloc::string::String::new();
        for c in value.chars() {
            if out.len() >= Self::MAX_LEN {
                out.push('…');
                break;
            }
            if c.is_control() {
                let _ = write!(out, "{}", c.escape_debug());
            } else {
                out.push(c);
            }
        }
        Self(alloc::boxed::Box::new(out))
    }

    /// The text shown.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(feature = "alloc")]
impl fmt::Display for ShownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(feature = "alloc")]
impl fmt::Debug for ShownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A byte count that may exceed 64 bits (a broadcast tensor's compact size can), stored as
/// three 32-bit words: 12 bytes at a 4-byte alignment, so that
/// [`DispatchError::AllocationLimit`](super::DispatchError) fits in 24 bytes.
///
/// It holds up to 2^96 − 1 and saturates there. A compact size is below 2^85 (at most
/// `i64::MAX` elements of at most 2^24 bits), so no real count is ever cut.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteCount {
    /// Most significant word first, so that the derived order is the numeric one.
    words: [u32; 3],
}

impl ByteCount {
    /// The largest count held.
    pub const MAX: u128 = (1 << 96) - 1;

    /// `v`, saturated at [`Self::MAX`].
    pub const fn new(v: u128) -> Self {
        let v = if v > Self::MAX { Self::MAX } else { v };
        Self {
            words: [(v >> 64) as u32, (v >> 32) as u32, v as u32],
        }
    }

    /// The count.
    pub const fn get(self) -> u128 {
        ((self.words[0] as u128) << 64) | ((self.words[1] as u128) << 32) | self.words[2] as u128
    }
}

impl From<u128> for ByteCount {
    fn from(v: u128) -> Self {
        Self::new(v)
    }
}

impl From<u64> for ByteCount {
    fn from(v: u64) -> Self {
        Self::new(u128::from(v))
    }
}

impl fmt::Display for ByteCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}

impl fmt::Debug for ByteCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}

/// An address (`data + byte_offset`), stored as two 32-bit halves so that
/// [`CopyReason`](super::CopyReason) keeps a 4-byte alignment and
/// [`DispatchError::CopyRequired`](super::DispatchError) fits in 24 bytes. Formats like
/// `usize` (`{:#x}` gives `0x…`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    /// Most significant half first, so that the derived order is the numeric one.
    halves: [u32; 2],
}

impl Address {
    /// Stores `address`.
    pub const fn new(address: usize) -> Self {
        let a = address as u64;
        Self {
            halves: [(a >> 32) as u32, a as u32],
        }
    }

    /// The address.
    pub const fn get(self) -> usize {
        (((self.halves[0] as u64) << 32) | self.halves[1] as u64) as usize
    }
}

impl From<usize> for Address {
    fn from(address: usize) -> Self {
        Self::new(address)
    }
}

impl fmt::LowerHex for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.get(), f)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.get())
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_count_round_trips_and_saturates() {
        for v in [0u128, 1, u64::MAX as u128, 1 << 84, (1 << 96) - 1] {
            assert_eq!(ByteCount::new(v).get(), v);
        }
        assert_eq!(ByteCount::new(u128::MAX).get(), ByteCount::MAX);
        assert!(ByteCount::new(1 << 64) > ByteCount::new(u64::MAX as u128));
    }

    #[test]
    fn address_round_trips() {
        for a in [0usize, 1, 0x1234_5678, usize::MAX, usize::MAX - 8] {
            assert_eq!(Address::new(a).get(), a);
        }
        assert_eq!(alloc_free_format(Address::new(0x41)), *b"0x41");
    }

    fn alloc_free_format(a: Address) -> [u8; 4] {
        struct Buf([u8; 4], usize);
        impl fmt::Write for Buf {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0[self.1..self.1 + s.len()].copy_from_slice(s.as_bytes());
                self.1 += s.len();
                Ok(())
            }
        }
        let mut b = Buf([0; 4], 0);
        fmt::write(&mut b, format_args!("{a:#x}")).unwrap();
        b.0
    }

    #[test]
    fn short_str_cuts_at_a_char_boundary() {
        let s = ShortStr::new("float8_e4m3fnuz_with_a_long_tail");
        assert_eq!(s.as_str().len(), ShortStr::CAPACITY);
        assert!(s.is_truncated());
        let e = ShortStr::new("aaaaaaaaaaaaaaaaaaaé");
        assert_eq!(e.as_str(), "aaaaaaaaaaaaaaaaaaa");
        assert!(!ShortStr::new("cuda:0").is_truncated());
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn short_str_shows_a_callers_control_characters_escaped() {
        use alloc::string::ToString;
        let shown = |s: &str| ShortStr::new(s).to_string();
        assert_eq!(shown("cpu\0"), "cpu\\0");
        assert_eq!(shown("cuda\n:0"), "cuda\\n:0");
        assert_eq!(shown("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(shown("a\"b\\c"), "a\\\"b\\\\c");
        assert_eq!(shown("cuda_host:0"), "cuda_host:0");
        assert_eq!(shown("bf16é"), "bf16é");
    }
}
