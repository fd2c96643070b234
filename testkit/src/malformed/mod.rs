//! The malformed-input table: one case per DLPack rule (from dlpack.h 1.3, the array-API DLPack
//! section and the behaviour of the main producers), each with its exact outcome.
//!
//! A [`Case`] says everything a producer can get wrong: the header (legacy, 1.x or a future
//! major, and the flags), `ndim`, `shape` and `strides` or NULL, `data` (NULL, a real buffer or
//! a raw address), the dtype as raw code/bits/lanes, the device and `byte_offset`. An
//! [`Expect`] is the accepted tensor's numbers or the exact [`Error`].
//!
//! [`Case::produce`] builds the case as a real producer would: a heap managed tensor (versioned
//! or legacy) with its arrays and data, released by a counting deleter. The drivers are the
//! tests: dlport-core's `conformance` runs the table through the Rust API
//! (`ManagedTensor::from_raw_*` and `TensorRef::from_raw`), dlport-native's `malformed` through
//! the C ABI (`dlport_describe`, `dlport_import`).
//!
//! [`device_ids`] is the list of devices that every door (capsules here; requested, advertised
//! and export devices in the Rust API, the C ABI and the Python package) is tried with.

mod cases;
mod producer;

pub use cases::table;

use dlport_core::abi::{DLPackVersion, TypeCode};
use dlport_core::error::LayoutError;
use dlport_core::layout::{ByteSpan, Contiguity};
use dlport_core::{DataType, Device, Error, TensorRef};

pub use producer::{Deleted, Produced};

/// Where a case's `data` points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    /// NULL.
    Null,
    /// The middle of a 64-byte-aligned 4 KiB buffer (2 KiB on either side), so negative
    /// strides stay inside it.
    Buffer,
    /// A raw address without provenance: never dereferenced.
    Addr(usize),
}

/// One producer's tensor. Built with [`case`] and the builder methods; the defaults are a 0-d
/// float32 CPU tensor with empty (non-NULL) arrays, data in a buffer, version 1.3 and no flags.
#[derive(Clone, Debug)]
pub struct Case {
    /// The rule the case checks.
    pub rule: &'static str,
    /// The same case under the other names it had in an earlier catalogue.
    pub also: Vec<&'static str>,
    /// `dtype`, any raw code/bits/lanes.
    pub dtype: DataType,
    /// `ndim` when it differs from the length of the shape (or the shape is NULL).
    pub ndim: Option<i32>,
    /// `shape`, or `None` for NULL.
    pub shape: Option<Vec<i64>>,
    /// `strides`, or `None` for NULL.
    pub strides: Option<Vec<i64>>,
    /// `byte_offset`.
    pub byte_offset: u64,
    /// `data`.
    pub data: Data,
    /// `device`.
    pub device: Device,
    /// The header's version: `None` for a legacy `DLManagedTensor`.
    pub version: Option<DLPackVersion>,
    /// The header's flags (0 for legacy, which cannot carry them).
    pub flags: u64,
}

/// A new case for `rule`, with the defaults [`Case`] lists.
pub fn case(rule: &'static str) -> Case {
    Case {
        rule,
        also: Vec::new(),
        dtype: DataType::FLOAT32,
        ndim: None,
        shape: Some(vec![]),
        strides: Some(vec![]),
        byte_offset: 0,
        data: Data::Buffer,
        device: Device::cpu(),
        version: Some(DLPackVersion::new(1, 3)),
        flags: 0,
    }
}

impl Case {
    /// The same case was also catalogued under `name`.
    pub fn also(mut self, name: &'static str) -> Self {
        self.also.push(name);
        self
    }
    /// Every name of the case.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.rule).chain(self.also.iter().copied())
    }
    /// `shape`.
    pub fn shape(mut self, s: &[i64]) -> Self {
        self.shape = Some(s.to_vec());
        self
    }
    /// `strides`.
    pub fn strides(mut self, s: &[i64]) -> Self {
        self.strides = Some(s.to_vec());
        self
    }
    /// A compact 2×3 tensor (shape `[2, 3]`, strides `[3, 1]`).
    pub fn matrix(self) -> Self {
        self.shape(&[2, 3]).strides(&[3, 1])
    }
    /// `strides` NULL.
    pub fn null_strides(mut self) -> Self {
        self.strides = None;
        self
    }
    /// `shape` NULL with `ndim`.
    pub fn null_shape(mut self, ndim: i32) -> Self {
        self.shape = None;
        self.ndim = Some(ndim);
        self
    }
    /// `ndim`, whatever the arrays hold.
    pub fn ndim(mut self, ndim: i32) -> Self {
        self.ndim = Some(ndim);
        self
    }
    /// `dtype` from raw code, bits and lanes.
    pub fn dtype(mut self, code: TypeCode, bits: u8, lanes: u16) -> Self {
        self.dtype = DataType::new(code, bits, lanes);
        self
    }
    /// `dtype`.
    pub fn dt(mut self, dtype: DataType) -> Self {
        self.dtype = dtype;
        self
    }
    /// `data`.
    pub fn data(mut self, d: Data) -> Self {
        self.data = d;
        self
    }
    /// `device`.
    pub fn device(mut self, d: Device) -> Self {
        self.device = d;
        self
    }
    /// The header: `None` for legacy, `Some((major, minor))` for a versioned one.
    pub fn version(mut self, v: Option<(u32, u32)>) -> Self {
        self.version = v.map(|(a, b)| DLPackVersion::new(a, b));
        self
    }
    /// A legacy `DLManagedTensor`.
    pub fn legacy(self) -> Self {
        self.version(None)
    }
    /// The header's flags.
    pub fn flags(mut self, f: u64) -> Self {
        self.flags = f;
        self
    }
    /// `byte_offset`.
    pub fn byte_offset(mut self, b: u64) -> Self {
        self.byte_offset = b;
        self
    }
    /// `ndim` as the producer writes it.
    pub fn ndim_value(&self) -> i32 {
        self.ndim
            .unwrap_or_else(|| self.shape.as_ref().map_or(0, |s| s.len() as i32))
    }
    /// Whether two cases give a consumer exactly the same input (names aside).
    pub fn same_input(&self, other: &Case) -> bool {
        (
            self.dtype,
            self.ndim_value(),
            &self.shape,
            &self.strides,
            self.byte_offset,
            self.data,
            self.device,
            self.version,
            self.flags,
        ) == (
            other.dtype,
            other.ndim_value(),
            &other.shape,
            &other.strides,
            other.byte_offset,
            other.data,
            other.device,
            other.version,
            other.flags,
        )
    }
}

/// What a consumer sees of an accepted tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The element count.
    pub numel: u64,
    /// The layout class.
    pub contiguity: Contiguity,
    /// The bytes touched relative to the first element, `[lo, hi)`.
    pub span: (i64, i64),
    /// The strides in elements (computed when NULL).
    pub strides: Vec<i64>,
}

impl Outcome {
    /// The outcome of a validated view.
    pub fn of(view: &TensorRef<'_>) -> Self {
        let ByteSpan { lo, hi } = view.byte_span();
        Self {
            numel: view.numel(),
            contiguity: view.contiguity(),
            span: (lo, hi),
            strides: view.strides().collect(),
        }
    }
}

/// A case's exact outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Accepted, with these numbers.
    Ok(Outcome),
    /// Refused with exactly this error.
    Err(Error),
}

impl Expect {
    /// Whether `got` is exactly the expected outcome.
    pub fn matches(&self, got: &Result<Outcome, Error>) -> bool {
        match (self, got) {
            (Expect::Ok(e), Ok(g)) => e == g,
            (Expect::Err(e), Err(g)) => e == g,
            _ => false,
        }
    }
    /// The expected error, if the case is refused.
    pub fn error(&self) -> Option<&Error> {
        match self {
            Expect::Ok(_) => None,
            Expect::Err(e) => Some(e),
        }
    }
}

/// Accepted with these numbers.
pub fn ok(numel: u64, contiguity: Contiguity, span: (i64, i64), strides: &[i64]) -> Expect {
    Expect::Ok(Outcome {
        numel,
        contiguity,
        span,
        strides: strides.to_vec(),
    })
}

/// Refused with this layout error.
pub fn err(e: LayoutError) -> Expect {
    Expect::Err(Error::Layout(e))
}

/// A version, shorter.
pub fn v(major: u32, minor: u32) -> DLPackVersion {
    DLPackVersion::new(major, minor)
}

/// How many rule names the two catalogues held before they were merged into this table:
/// `core/tests/conformance.rs` had 73 (all through `TensorRef::from_raw`) and
/// `native/tests/malformed.rs` 62 (all refusals, through the Rust API and the C ABI).
pub const NAMES_BEFORE: usize = 73 + 62;

/// How many distinct cases the two catalogues held: [`NAMES_BEFORE`] less the 8 exact
/// duplicates (the same input and outcome: 7 in both catalogues, 1 twice in the conformance
/// suite), which this table lists once under every name ([`Case::also`]).
pub const DISTINCT_BEFORE: usize = NAMES_BEFORE - 8;

/// The list of devices every door tries ([`device_ids.txt`](self), one file that the Python
/// tests read too), with whether [the rule of device ids](dlport_core::Device#the-rule-of-device-ids) accepts each.
pub const DEVICE_IDS: &str = include_str!("device_ids.txt");

/// [`DEVICE_IDS`], parsed: each device and whether the rule accepts it.
pub fn device_ids() -> Vec<(Device, bool)> {
    DEVICE_IDS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace();
            let mut num = || {
                it.next()
                    .and_then(|n| n.parse::<i32>().ok())
                    .unwrap_or_else(|| panic!("device_ids.txt: bad line {l:?}"))
            };
            let (t, id) = (num(), num());
            let accepted = match it.next() {
                Some("yes") => true,
                Some("no") => false,
                _ => panic!("device_ids.txt: bad verdict in {l:?}"),
            };
            (Device::new(dlport_core::abi::DeviceType(t), id), accepted)
        })
        .collect()
}
