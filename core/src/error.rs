//! The one error type of dlport-core.

use core::fmt;

use crate::abi::{DLPackVersion, DeviceType, TypeCode};
use crate::device::Device;
use crate::dtype::DataType;
use crate::layout::Contiguity;

/// Everything that can go wrong when reading, validating, owning or exporting a DLPack tensor.
///
/// Each message names the field and the value that failed, and says what to do. The enum is
/// `#[non_exhaustive]`: match the variants you handle and keep a catch-all arm.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The pointer to the managed tensor itself was NULL.
    NullManagedTensor,
    /// `version.major` is not 1. The tensor was released (its deleter called) and nothing else
    /// was read.
    UnsupportedVersion {
        /// The version the producer wrote.
        version: DLPackVersion,
    },
    /// `flags` has bits that DLPack 1.3 does not define.
    UnknownFlags {
        /// The whole flags word.
        flags: u64,
    },
    /// `ndim` is negative or above [`MAX_NDIM`](crate::layout::MAX_NDIM).
    NdimOutOfRange {
        /// The value found.
        ndim: i64,
    },
    /// `shape` is NULL although `ndim > 0`.
    NullShape {
        /// The number of dimensions.
        ndim: i32,
    },
    /// `strides` is NULL although the DLPack version requires it (1.2 and later, `ndim > 0`).
    NullStrides {
        /// The number of dimensions.
        ndim: i32,
        /// The version the tensor came with.
        version: DLPackVersion,
    },
    /// `data` is NULL although the tensor has elements.
    NullData {
        /// The element count.
        numel: u64,
    },
    /// `shape[axis]` is negative.
    NegativeExtent {
        /// The axis.
        axis: usize,
        /// The extent found.
        extent: i64,
    },
    /// The product of the extents overflows 64 bits at `shape[axis]`.
    ElementCountOverflow {
        /// The axis whose extent made the product overflow.
        axis: usize,
        /// Its extent.
        extent: i64,
    },
    /// The byte span overflows 64 bits at `strides[axis]`.
    SpanOverflow {
        /// The axis.
        axis: usize,
        /// Its extent.
        extent: i64,
        /// Its stride.
        stride: i64,
    },
    /// `data + byte_offset` plus the span leaves the address space of this machine.
    AddressOverflow {
        /// The data address.
        data: usize,
        /// The byte offset.
        byte_offset: u64,
        /// The lowest byte touched, relative to `data + byte_offset`.
        lo: i64,
        /// One past the highest byte touched, relative to `data + byte_offset`.
        hi: i64,
    },
    /// `dtype.code` is not a DLPack type code.
    UnknownTypeCode {
        /// The code found.
        code: TypeCode,
    },
    /// `dtype.bits` is not allowed for the type code.
    InvalidBits {
        /// The whole data type.
        dtype: DataType,
        /// What the code requires, in words ("4", "a multiple of 8").
        expected: &'static str,
    },
    /// `dtype.lanes` is not allowed (0, or lanes that this code cannot have).
    InvalidLanes {
        /// The whole data type.
        dtype: DataType,
        /// Why, in words.
        reason: &'static str,
    },
    /// Typed access with a Rust type whose DLPack type differs from the tensor's.
    DtypeMismatch {
        /// The Rust element type's DLPack type.
        requested: DataType,
        /// The tensor's type.
        actual: DataType,
    },
    /// Typed access to memory the host cannot read without a copy.
    NotHostAccessible {
        /// The tensor's device.
        device: Device,
    },
    /// Slice access needs a compact row-major layout.
    NotContiguous {
        /// The layout found.
        contiguity: Contiguity,
    },
    /// The first element is not aligned for the requested element type.
    Misaligned {
        /// The address of the first element.
        address: usize,
        /// The alignment the element type needs.
        required: usize,
    },
    /// Mutable access to a tensor flagged READ_ONLY.
    ReadOnly,
    /// Mutable access to a tensor whose memory others may also read or write (a no-copy export
    /// of a backend tensor, or a foreign tensor without IS_COPIED).
    NotExclusive {
        /// Who else may touch the memory.
        access: crate::Access,
    },
    /// A flag that the legacy `DLManagedTensor` cannot carry (it has no flags field), so a
    /// legacy consumer would misread the tensor.
    FlagNotRepresentable {
        /// The flag's name (`READ_ONLY`, `IS_SUBBYTE_TYPE_PADDED`).
        flag: &'static str,
    },
    /// An allocation above the caller's limit, refused before anything was allocated.
    AllocationLimit {
        /// Bytes the operation needs (exact, even past 64 bits).
        bytes: ByteCount,
        /// The limit in force.
        limit: u64,
    },
    /// A copy's destination does not have the compact size of the source.
    DestinationSize {
        /// Bytes the compact copy needs.
        needed: u64,
        /// Bytes the destination has.
        available: u64,
    },
    /// An option out of its range.
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        expected: &'static str,
    },
    /// An exported tensor's byte span does not fit inside its storage.
    StorageTooSmall {
        /// Bytes the layout needs, from the storage's start.
        needed: u64,
        /// Bytes the storage has.
        available: u64,
    },
    /// `strides` has a different length than `shape`.
    StridesLength {
        /// Number of strides given.
        strides: usize,
        /// Number of dimensions.
        ndim: usize,
    },
    /// A name (of a data type, device, …) could not be parsed.
    InvalidName {
        /// What was being parsed ("data type", "device").
        what: &'static str,
        /// The text, possibly truncated.
        name: ShortStr,
    },
    /// No backend in the registry serves this device.
    NoBackend {
        /// The device type.
        device_type: DeviceType,
        /// The device id.
        device_id: i32,
        /// The names of the registered backends, comma-separated (possibly truncated).
        registered: ShortStr,
    },
    /// The capsule's device and the one the producer advertises (`__dlpack_device__`)
    /// contradict each other.
    DeviceMismatch {
        /// The device in the DLTensor.
        capsule: Device,
        /// The device the producer advertised.
        advertised: Device,
    },
    /// The copy policy forbids a copy, but one is needed.
    CopyRequired {
        /// Why a zero-copy view is impossible.
        reason: CopyReason,
    },
    /// The buffer was handed to a DLPack consumer by `release_ownership`; this handle can no
    /// longer reach it.
    BufferReleased,
    /// The buffer cannot be released while views or external references use it.
    BufferInUse {
        /// Active users (views and DLPack references).
        users: usize,
    },
    /// A backend does not support an operation.
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// The operation, in words.
        operation: &'static str,
    },
    /// Memory could not be allocated.
    AllocationFailed {
        /// Bytes requested.
        bytes: u64,
        /// Alignment requested.
        align: usize,
    },
    /// A backend with this name is already registered.
    DuplicateBackend {
        /// The name.
        name: &'static str,
    },
    /// A backend's driver or operating system refused an operation.
    Backend {
        /// The backend's name.
        backend: &'static str,
        /// The operation that failed ("mlock", "cuMemAlloc", …).
        operation: &'static str,
        /// The code it returned (errno, CUresult, …).
        code: i64,
        /// What it means and what to do.
        detail: &'static str,
    },
    /// A driver library is not installed on this machine.
    DriverNotFound {
        /// The API ("CUDA").
        api: &'static str,
        /// The library looked for ("libcuda.so.1").
        library: &'static str,
    },
    /// The `stream` argument of `__dlpack__` is not valid for the device type.
    InvalidStream {
        /// The value received (`i64::MIN` stands for None).
        stream: i64,
        /// The device type it was meant for.
        device_type: DeviceType,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A backend cannot translate a producer's device id.
    InvalidDeviceId {
        /// The backend's name.
        backend: &'static str,
        /// The id received.
        device_id: i32,
    },
}

/// Why [`Error::CopyRequired`] was raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CopyReason {
    /// The target backend cannot reach the memory.
    Device {
        /// Where the data is.
        from: Device,
        /// Where it was asked for.
        to: Device,
    },
    /// The target needs another layout.
    Layout {
        /// The layout found.
        contiguity: Contiguity,
    },
    /// The consumer's form cannot carry a flag of the tensor (a legacy consumer and
    /// READ_ONLY or IS_SUBBYTE_TYPE_PADDED).
    Flag {
        /// The flag's name.
        flag: &'static str,
    },
    /// The target needs a stronger alignment.
    Alignment {
        /// The first element's address.
        address: usize,
        /// The alignment needed.
        required: usize,
    },
}

impl fmt::Display for CopyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Device { from, to } => {
                write!(f, "the data is on {from}, which {to} cannot reach")
            }
            Self::Layout { contiguity } => write!(
                f,
                "the layout is {contiguity}, which the target cannot view"
            ),
            Self::Flag { flag } => write!(
                f,
                "the tensor has {flag}, which a legacy DLManagedTensor cannot carry"
            ),
            Self::Alignment { address, required } => write!(
                f,
                "data + byte_offset = {address:#x} is not {required}-byte aligned, as the target requires"
            ),
        }
    }
}

impl Error {
    /// How many distinct codes [`code`](Self::code) returns (codes are `1..=CODE_COUNT`).
    pub const CODE_COUNT: u32 = 39;

    /// A stable number for this variant (1-based), used by the C ABI and by tests that check
    /// every variant is reachable. Codes are never reused; new variants get new numbers.
    pub const fn code(&self) -> u32 {
        match self {
            Self::NullManagedTensor => 1,
            Self::UnsupportedVersion { .. } => 2,
            Self::UnknownFlags { .. } => 3,
            Self::NdimOutOfRange { .. } => 4,
            Self::NullShape { .. } => 5,
            Self::NullStrides { .. } => 6,
            Self::NullData { .. } => 7,
            Self::NegativeExtent { .. } => 8,
            Self::ElementCountOverflow { .. } => 9,
            Self::SpanOverflow { .. } => 10,
            Self::AddressOverflow { .. } => 11,
            Self::UnknownTypeCode { .. } => 12,
            Self::InvalidBits { .. } => 13,
            Self::InvalidLanes { .. } => 14,
            Self::DtypeMismatch { .. } => 15,
            Self::NotHostAccessible { .. } => 16,
            Self::NotContiguous { .. } => 17,
            Self::Misaligned { .. } => 18,
            Self::ReadOnly => 19,
            Self::StorageTooSmall { .. } => 20,
            Self::StridesLength { .. } => 21,
            Self::InvalidName { .. } => 22,
            Self::NoBackend { .. } => 23,
            Self::DeviceMismatch { .. } => 24,
            Self::CopyRequired { .. } => 25,
            Self::BufferReleased => 26,
            Self::BufferInUse { .. } => 27,
            Self::Unsupported { .. } => 28,
            Self::AllocationFailed { .. } => 29,
            Self::DuplicateBackend { .. } => 30,
            Self::InvalidDeviceId { .. } => 31,
            Self::Backend { .. } => 32,
            Self::DriverNotFound { .. } => 33,
            Self::InvalidStream { .. } => 34,
            Self::NotExclusive { .. } => 35,
            Self::FlagNotRepresentable { .. } => 36,
            Self::AllocationLimit { .. } => 37,
            Self::InvalidOption { .. } => 38,
            Self::DestinationSize { .. } => 39,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NullManagedTensor => f.write_str(
                "the managed tensor pointer is NULL: pass the pointer the producer returned",
            ),
            Self::UnsupportedVersion { version } => write!(
                f,
                "version = {version} is not supported: dlport reads DLPack major version 1; \
                 the tensor was released; ask the producer for max_version (1, 3)"
            ),
            Self::UnknownFlags { flags } => write!(
                f,
                "flags = {flags:#x} has bits DLPack 1.3 does not define ({:#x}); refusing to \
                 guess their meaning",
                flags & !crate::abi::KNOWN_FLAGS
            ),
            Self::NdimOutOfRange { ndim } => write!(
                f,
                "ndim = {ndim} is out of range 0..={}",
                crate::layout::MAX_NDIM
            ),
            Self::NullShape { ndim } => {
                write!(f, "shape is NULL, but ndim = {ndim}: a shape array of ndim extents is required")
            }
            Self::NullStrides { ndim, version } => write!(
                f,
                "strides is NULL, but DLPack {version} requires strides when ndim = {ndim}; \
                 producers of DLPack >= 1.2 must send explicit strides"
            ),
            Self::NullData { numel } => write!(
                f,
                "data is NULL, but the tensor has {numel} elements: only size-0 tensors may have NULL data"
            ),
            Self::NegativeExtent { axis, extent } => {
                write!(f, "shape[{axis}] = {extent} is negative")
            }
            Self::ElementCountOverflow { axis, extent } => write!(
                f,
                "shape[{axis}] = {extent} makes the element count overflow 64 bits"
            ),
            Self::SpanOverflow { axis, extent, stride } => write!(
                f,
                "strides[{axis}] = {stride} with shape[{axis}] = {extent} makes the byte span \
                 overflow 64 bits"
            ),
            Self::AddressOverflow { data, byte_offset, lo, hi } => write!(
                f,
                "data = {data:#x} with byte_offset = {byte_offset} and span [{lo}, {hi}) \
                 leaves user-space memory (its first byte must be above 0, its last below \
                 USER_ADDRESS_END): fix data or byte_offset"
            ),
            Self::UnknownTypeCode { code } => write!(
                f,
                "dtype.code = {} is not a DLPack type code (known: 0..=18)",
                code.0
            ),
            Self::InvalidBits { dtype, expected } => write!(
                f,
                "dtype.bits = {} is invalid for {}: it must be {expected}",
                dtype.bits, dtype.code
            ),
            Self::InvalidLanes { dtype, reason } => write!(
                f,
                "dtype.lanes = {} is invalid for {}: {reason}",
                dtype.lanes, dtype.code
            ),
            Self::DtypeMismatch { requested, actual } => write!(
                f,
                "dtype is {actual}, but {requested} was requested: use the matching element type"
            ),
            Self::NotHostAccessible { device } => write!(
                f,
                "device = {device} is not host-accessible: copy the tensor to the CPU first"
            ),
            Self::NotContiguous { contiguity } => write!(
                f,
                "layout is {contiguity}, but slice access needs row-major contiguous data: \
                 compact it first or use a strided accessor"
            ),
            Self::Misaligned { address, required } => write!(
                f,
                "data + byte_offset = {address:#x} is not aligned to {required} bytes for this \
                 element type: copy it into aligned storage"
            ),
            Self::ReadOnly => f.write_str(
                "flags has READ_ONLY set: the producer forbids writes; copy the tensor to modify it",
            ),
            Self::NotExclusive { access } => write!(
                f,
                "the tensor's memory is {access}: a `&mut` slice would alias other handles; copy \
                 it (CopyPolicy::Always), take the memory with release_ownership, or, if you can \
                 prove nobody else touches it, call `unsafe assume_exclusive`"
            ),
            Self::FlagNotRepresentable { flag } => write!(
                f,
                "flags has {flag} set, which a legacy DLManagedTensor cannot carry (a legacy \
                 consumer would misread or overwrite the data): ask for a versioned tensor \
                 (max_version >= (1, 0)) or allow a copy"
            ),
            Self::AllocationLimit { bytes, limit } => write!(
                f,
                "the operation needs {bytes} bytes, above the allocation limit of {limit} bytes; \
                 nothing was allocated: raise the limit (ImportOptions::max_alloc, \
                 Registry::set_alloc_limit, dlport_set_alloc_limit) or use a smaller tensor"
            ),
            Self::DestinationSize { needed, available } => write!(
                f,
                "the destination has {available} bytes, but the compact copy needs {needed}: \
                 pass a destination of exactly the compact size (compact_bytes)"
            ),
            Self::InvalidOption { option, value, expected } => {
                write!(f, "{option} = {value} is invalid: it must be {expected}")
            }
            Self::StorageTooSmall { needed, available } => write!(
                f,
                "the layout needs {needed} bytes, but the storage has {available}: fix shape, \
                 strides or byte_offset"
            ),
            Self::StridesLength { strides, ndim } => write!(
                f,
                "strides has {strides} entries, but ndim = {ndim}: give one stride per axis"
            ),
            Self::InvalidName { what, name } => write!(f, "{what} name \"{name}\" is not recognised"),
            Self::NoBackend { device_type, device_id, registered } => write!(
                f,
                "no backend for {device_type} device {device_id}; registered: {registered}"
            ),
            Self::DeviceMismatch { capsule, advertised } => write!(
                f,
                "the capsule says device = {capsule} but the producer advertises {advertised}: \
                 they contradict each other; fix the producer's __dlpack_device__"
            ),
            Self::CopyRequired { reason } => write!(
                f,
                "a copy would be needed, but the copy policy is Never: {reason}; allow a copy \
                 (copy=None or True) or move the data first"
            ),
            Self::BufferReleased => f.write_str(
                "the buffer was released to a DLPack consumer (release_ownership): this handle \
                 is no longer valid; keep a reference with acquire_external instead",
            ),
            Self::BufferInUse { users } => write!(
                f,
                "the buffer has {users} active view(s) or DLPack reference(s): drop them before \
                 releasing ownership"
            ),
            Self::Unsupported { backend, operation } => {
                write!(f, "backend \"{backend}\" does not support {operation}")
            }
            Self::AllocationFailed { bytes, align } => {
                write!(f, "allocating {bytes} bytes aligned to {align} failed: out of memory")
            }
            Self::DuplicateBackend { name } => write!(
                f,
                "a backend named \"{name}\" is already registered: unregister it first"
            ),
            Self::Backend { backend, operation, code, detail } => {
                write!(f, "backend \"{backend}\": {operation} failed with code {code}: {detail}")
            }
            Self::DriverNotFound { api, library } => write!(
                f,
                "no {api} driver: {library} not found; install the driver or use the host backends"
            ),
            Self::InvalidStream { stream, device_type, reason } => {
                write!(f, "stream = {stream} is invalid for {device_type}: {reason}")
            }
            Self::InvalidDeviceId { backend, device_id } => write!(
                f,
                "backend \"{backend}\" has no device for producer device_id = {device_id}"
            ),
        }
    }
}

impl core::error::Error for Error {}

/// A byte count that may exceed 64 bits (a broadcast tensor's compact size can), stored as two
/// 64-bit halves so that [`Error`] keeps an 8-byte alignment.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteCount {
    hi: u64,
    lo: u64,
}

impl ByteCount {
    /// The count.
    pub const fn get(self) -> u128 {
        ((self.hi as u128) << 64) | self.lo as u128
    }
}

impl From<u128> for ByteCount {
    fn from(v: u128) -> Self {
        Self {
            hi: (v >> 64) as u64,
            lo: v as u64,
        }
    }
}

impl From<u64> for ByteCount {
    fn from(v: u64) -> Self {
        Self::from(u128::from(v))
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

/// A short string stored inline (no allocation), for error values in `no_std` builds.
///
/// Longer text is cut at a character boundary and shown with a trailing `…`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ShortStr {
    buf: [u8; Self::CAPACITY],
    len: u8,
    truncated: bool,
}

impl ShortStr {
    /// Bytes kept.
    pub const CAPACITY: usize = 96;

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

    /// The stored text.
    pub fn as_str(&self) -> &str {
        // The buffer always holds a prefix of a `str` cut at a char boundary.
        core::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Display for ShortStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
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

/// A `fmt::Write` sink into a [`ShortStr`]-sized buffer, used to build messages without `alloc`.
#[cfg(feature = "alloc")]
pub(crate) struct ShortWriter {
    buf: [u8; ShortStr::CAPACITY],
    len: usize,
    truncated: bool,
}

#[cfg(feature = "alloc")]
impl ShortWriter {
    pub(crate) fn new() -> Self {
        Self {
            buf: [0; ShortStr::CAPACITY],
            len: 0,
            truncated: false,
        }
    }

    pub(crate) fn finish(self) -> ShortStr {
        let s = core::str::from_utf8(&self.buf[..self.len]).unwrap_or("");
        let mut out = ShortStr::new(s);
        out.truncated |= self.truncated;
        out
    }
}

#[cfg(feature = "alloc")]
impl fmt::Write for ShortWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = ShortStr::CAPACITY - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            self.truncated = true;
        }
        Ok(())
    }
}
