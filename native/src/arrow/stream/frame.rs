//! The framing of an IPC stream: length prefixes, metadata and bodies, read in steps that grow
//! only with what the reader supplies.

use std::io::Read;

use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::MetadataVersion;
use dlport_core::Error;
use dlport_core::error::{BackendError, BackendReport, ValueRule};

use super::super::{NAME, bad_signed, bad_text};

pub(super) struct Stream<'r> {
    pub(super) reader: &'r mut dyn Read,
}

/// One message: its metadata bytes (a flatbuffer `Message`) and its body.
pub(super) struct Raw {
    metadata: MutableBuffer,
    pub(super) body: Buffer,
}

impl Raw {
    pub(super) fn message(&self) -> Result<arrow_ipc::Message<'_>, Error> {
        parse_message(self.metadata.as_slice())
    }
}

/// The flatbuffer `Message` in `metadata`, verified, of a metadata version dlport reads.
fn parse_message(metadata: &[u8]) -> Result<arrow_ipc::Message<'_>, Error> {
    let message = arrow_ipc::root_as_message(metadata).map_err(|e| {
        bad_text(
            &ValueRule {
                field: "Message (the metadata flatbuffer)",
                expected: "a flatbuffer that passes the verifier",
            },
            &e.to_string(),
        )
    })?;
    let v = message.version();
    if v != MetadataVersion::V4 && v != MetadataVersion::V5 {
        return Err(bad_text(
            &ValueRule {
                field: "Message.version",
                expected: "V4 or V5 (what Arrow writes since 0.15)",
            },
            &v.variant_name()
                .map_or_else(|| v.0.to_string(), str::to_owned),
        ));
    }
    Ok(message)
}

impl Stream<'_> {
    /// The next message, or `None` at the end-of-stream marker or at the reader's end between
    /// two messages.
    pub(super) fn next_message(&mut self) -> Result<Option<Raw>, Error> {
        let mut word = [0u8; 4];
        match self.fill(&mut word)? {
            0 => return Ok(None),
            4 => {}
            n => return Err(truncated(&PREFIX, 4, n)),
        }
        if word == [0xff; 4] {
            let n = self.fill(&mut word)?;
            if n != 4 {
                return Err(truncated(&PREFIX, 4, n));
            }
        }
        let len = i32::from_le_bytes(word);
        if len == 0 {
            return Ok(None);
        }
        if len < 0 {
            return Err(bad_signed(
                &ValueRule {
                    field: "message metadata length",
                    expected: "a non-negative i32 (0 ends the stream)",
                },
                i64::from(len),
            ));
        }
        let metadata = self.read_exactly(&METADATA_LEN, len as u64)?;
        // The body length is in the metadata: parse it (the verifier runs here and again when
        // the caller reads the message; both are cheap next to the body).
        let declared = parse_message(metadata.as_slice())?.bodyLength();
        if declared < 0 {
            return Err(bad_signed(
                &ValueRule {
                    field: "Message.bodyLength",
                    expected: "a non-negative byte count",
                },
                declared,
            ));
        }
        let body = self.read_exactly(&BODY_LEN, declared as u64)?;
        Ok(Some(Raw {
            metadata,
            body: body.into(),
        }))
    }

    /// Fills `buf` from the reader; returns how many bytes it got (fewer only at its end).
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut got = 0;
        while got < buf.len() {
            match self.reader.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(e)),
            }
        }
        Ok(got)
    }

    /// Reads exactly `len` bytes that `rule`'s field declared: refused above the allocation limit
    /// before anything is allocated, and read in steps that grow with what the reader supplies
    /// (64 KiB, then doubling), so that a stream declaring more than it holds allocates at most
    /// twice what it holds.
    fn read_exactly(&mut self, rule: &'static ValueRule, len: u64) -> Result<MutableBuffer, Error> {
        dlport_core::backend::check_alloc(u128::from(len), None)?;
        let len = usize::try_from(len).map_err(|_| truncated(rule, usize::MAX, 0))?;
        const FIRST_STEP: usize = 64 << 10;
        let mut buf = MutableBuffer::new(0);
        let mut filled = 0;
        while filled < len {
            let step = len.min(filled.saturating_mul(2).max(FIRST_STEP));
            buf.resize(step, 0);
            let got = self.fill(&mut buf.as_slice_mut()[filled..step])?;
            filled += got;
            if filled < step {
                return Err(truncated(rule, len, filled));
            }
        }
        Ok(buf)
    }
}

/// A length the stream declared (`rule`'s field), larger than what it holds.
fn truncated(rule: &'static ValueRule, declared: usize, held: usize) -> Error {
    bad_text(
        rule,
        &format!("{declared} (the stream ends after {held} of those bytes)"),
    )
}

const PREFIX: ValueRule = ValueRule {
    field: "message length prefix",
    expected: "4 or 8 bytes (0xFFFFFFFF and the metadata length) or the stream's end",
};
const METADATA_LEN: ValueRule = ValueRule {
    field: "message metadata length",
    expected: "at most the bytes the stream holds after it",
};
const BODY_LEN: ValueRule = ValueRule {
    field: "Message.bodyLength",
    expected: "at most the bytes the stream holds after the message's metadata",
};

fn io_error(e: std::io::Error) -> Error {
    Error::Backend(BackendError::Failed {
        code: e.raw_os_error().unwrap_or(0),
        report: BackendReport::new(
            NAME,
            "reading the IPC stream",
            "the reader failed (the code is errno)",
        )
        .with_source(e),
    })
}
