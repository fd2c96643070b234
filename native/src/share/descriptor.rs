//! The share descriptor: a small, versioned, serialisable value that says which tensor lies in
//! the memory its file descriptors (or CUDA IPC handle) reach.
//!
//! Wire format, version 1 (little-endian, no padding; `DESCRIPTOR_HEADER` = 56 bytes):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"DLPS"` |
//! | 4 | 2 | format version (1) |
//! | 6 | 2 | handle kind (1 memfd, 2 CUDA IPC) |
//! | 8 | 4 | fd count (1 for both kinds) |
//! | 12 | 4 | ndim |
//! | 16 | 4 | device type |
//! | 20 | 4 | device id |
//! | 24 | 4 | dtype code (1), bits (1), lanes (2) |
//! | 28 | 4 | handle length (0 for a memfd, 64 for CUDA IPC) |
//! | 32 | 8 | DLPack flags |
//! | 40 | 8 | byte offset of element 0 from the start of the shared memory |
//! | 48 | 8 | byte length of the shared memory (what is mapped) |
//! | 56 | 8 × ndim | shape |
//! | … | 8 × ndim | strides (in elements) |
//! | … | handle length | the opaque handle |
//!
//! Parsing is defensive: the magic and the version are read first (a version from the future
//! is named as such, whatever follows), then the header, then the exact length; every field is
//! range-checked and the tensor is validated by dlport-core's validator against `byte_len`, so
//! a descriptor that parses can never describe bytes outside the memory it maps.

use dlport_core::abi::{DLPackVersion, DeviceType, FLAG_IS_COPIED, FLAG_READ_ONLY, TypeCode};
use dlport_core::layout::{self, Layout, MAX_NDIM};
use dlport_core::{DataType, Device, Error};

/// The format version this dlport writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// The magic that starts every descriptor.
pub const MAGIC: [u8; 4] = *b"DLPS";
/// Bytes before the shape.
pub const DESCRIPTOR_HEADER: usize = 56;
/// Bytes of a CUDA IPC memory handle (`CUipcMemHandle`).
pub const CUDA_IPC_HANDLE_LEN: usize = 64;
/// The longest descriptor of format 1: `MAX_NDIM` dimensions and a CUDA IPC handle.
pub const DESCRIPTOR_MAX: usize = DESCRIPTOR_HEADER + 16 * MAX_NDIM + CUDA_IPC_HANDLE_LEN;

/// How the shared memory travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandleKind {
    /// Host memory in a sealed memfd; one fd, mapped whole (`byte_len` bytes).
    Memfd,
    /// CUDA device memory as a `cuIpcGetMemHandle` handle; one fd keeps the producer's memory
    /// alive while the consumer holds it (the write end of a pipe the producer watches).
    CudaIpc,
}

impl HandleKind {
    const fn code(self) -> u16 {
        match self {
            Self::Memfd => 1,
            Self::CudaIpc => 2,
        }
    }

    const fn handle_len(self) -> usize {
        match self {
            Self::Memfd => 0,
            Self::CudaIpc => CUDA_IPC_HANDLE_LEN,
        }
    }

    /// The fds that travel with a descriptor of this kind.
    pub const fn fd_count(self) -> usize {
        1
    }
}

/// Which tensor lies in the shared memory, and how to reach that memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// How the memory travels.
    pub kind: HandleKind,
    /// The device of the memory: `cpu` for a memfd (pinning does not cross processes), the
    /// producer's `cuda:N` for CUDA IPC.
    pub device: Device,
    /// The element type.
    pub dtype: DataType,
    /// The extents.
    pub shape: Vec<i64>,
    /// The strides, in elements (always explicit).
    pub strides: Vec<i64>,
    /// Bytes from the start of the shared memory to element 0.
    pub byte_offset: u64,
    /// Bytes of shared memory the consumer maps (the whole memfd, or the CUDA allocation).
    pub byte_len: u64,
    /// DLPack flags: READ_ONLY (memfd only: its memfd is write-sealed) and IS_SUBBYTE_TYPE_PADDED
    /// travel; IS_COPIED never does (the memory is shared, never the consumer's alone).
    pub flags: u64,
    /// The opaque handle (the 64 bytes of a `CUipcMemHandle`; empty for a memfd).
    pub handle: Vec<u8>,
}

use super::errors::invalid as bad;
use dlport_core::error::ValueRule;

/// Reads little-endian fields from a byte slice whose length was checked before.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        out
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn i64s(&mut self, n: usize) -> Vec<i64> {
        (0..n).map(|_| i64::from_le_bytes(self.take())).collect()
    }
}

impl Descriptor {
    /// The fds that must travel with this descriptor.
    pub fn fd_count(&self) -> usize {
        self.kind.fd_count()
    }

    /// Checks every field: the device, handle and flags fit the kind (READ_ONLY only with a memfd,
    /// which the kernel can seal against writes), `byte_len` is at most
    /// `isize::MAX`, and the tensor (validated by dlport-core as a DLPack 1.3 tensor) lies
    /// inside `byte_len` bytes from `byte_offset`. Returns the tensor's layout.
    pub fn validate(&self) -> Result<Layout, Error> {
        match self.kind {
            HandleKind::Memfd if self.device != Device::cpu() => {
                return Err(bad(
                    &ValueRule {
                        field: "descriptor.device_type",
                        expected: "1 (kDLCPU, device_id 0) for a memfd: host memory is plain CPU memory in \
                     every process that maps it (pinning does not cross processes)",
                    },
                    self.device.device_type.0 as u64,
                ));
            }
            HandleKind::CudaIpc if self.device.device_type != DeviceType::CUDA => {
                return Err(bad(
                    &ValueRule {
                        field: "descriptor.device_type",
                        expected: "2 (kDLCUDA) for a CUDA IPC handle",
                    },
                    self.device.device_type.0 as u64,
                ));
            }
            HandleKind::CudaIpc if self.flags & FLAG_READ_ONLY != 0 => {
                return Err(bad(
                    &ValueRule {
                        field: "descriptor.flags",
                        expected: "without READ_ONLY (0x1) for a CUDA IPC handle: CUDA IPC maps \
                                   the memory writable in every process that opens it, so no \
                                   dlport producer makes a read-only one",
                    },
                    self.flags,
                ));
            }
            _ => {}
        }
        if self.handle.len() != self.kind.handle_len() {
            return Err(bad(
                &ValueRule {
                    field: "descriptor.handle_len",
                    expected: "0 for a memfd and 64 (a CUipcMemHandle) for CUDA IPC",
                },
                self.handle.len() as u64,
            ));
        }
        if self.byte_len > isize::MAX as u64 {
            return Err(bad(
                &ValueRule {
                    field: "descriptor.byte_len",
                    expected: "at most isize::MAX (no process can map more)",
                },
                self.byte_len,
            ));
        }
        let n = layout::check_ndim(self.shape.len() as i64)?;
        if self.strides.len() != n {
            return Err(Error::Layout(
                dlport_core::error::LayoutError::StridesLength {
                    strides: self.strides.len(),
                    ndim: n,
                },
            ));
        }
        let checked = layout::validate_metadata(
            self.dtype,
            &self.shape,
            Some(&self.strides),
            Some(DLPackVersion::CURRENT),
            self.flags,
        )?;
        if checked.numel != 0 {
            let lo = i128::from(self.byte_offset) + i128::from(checked.span.lo);
            let hi = i128::from(self.byte_offset) + i128::from(checked.span.hi);
            if lo < 0 || hi > i128::from(self.byte_len) {
                return Err(Error::Layout(
                    dlport_core::error::LayoutError::StorageTooSmall {
                        needed: u64::try_from(hi.max(0)).unwrap_or(u64::MAX),
                        available: self.byte_len,
                    },
                ));
            }
        }
        Ok(checked)
    }

    /// The bytes of format [`FORMAT_VERSION`]. Fails only when [`validate`](Self::validate)
    /// does: an invalid descriptor is never written.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        self.validate()?;
        let n = self.shape.len();
        let mut out = Vec::with_capacity(DESCRIPTOR_HEADER + 16 * n + self.handle.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.kind.code().to_le_bytes());
        out.extend_from_slice(&(self.fd_count() as u32).to_le_bytes());
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(&self.device.device_type.0.to_le_bytes());
        out.extend_from_slice(&self.device.device_id.to_le_bytes());
        out.extend_from_slice(&[self.dtype.code.0, self.dtype.bits]);
        out.extend_from_slice(&self.dtype.lanes.to_le_bytes());
        out.extend_from_slice(&(self.handle.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.flags & !FLAG_IS_COPIED).to_le_bytes());
        out.extend_from_slice(&self.byte_offset.to_le_bytes());
        out.extend_from_slice(&self.byte_len.to_le_bytes());
        for v in self.shape.iter().chain(&self.strides) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.handle);
        Ok(out)
    }

    /// Parses and validates bytes written by [`to_bytes`](Self::to_bytes). Every failure names
    /// the field and its value: bytes cut short or too long, a wrong magic, a format version
    /// from the future, an unknown kind, a wrong fd count or handle length, an out-of-range
    /// ndim, and every rule of [`validate`](Self::validate).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let len = bytes.len() as u64;
        if bytes.len() < MAGIC.len() || bytes[..4] != MAGIC {
            let mut m = [0u8; 4];
            let k = bytes.len().min(4);
            m[..k].copy_from_slice(&bytes[..k]);
            return Err(bad(
                &ValueRule {
                    field: "descriptor.magic",
                    expected: "0x53504c44 (\"DLPS\"): these bytes are not a dlport share descriptor (or \
                 were cut before 4 bytes)",
                },
                u64::from(u32::from_le_bytes(m)),
            ));
        }
        if bytes.len() < 6 {
            return Err(bad(
                &ValueRule {
                    field: "descriptor length",
                    expected: "at least 56 bytes (the format 1 header): the bytes were cut; send the whole \
                 descriptor",
                },
                len,
            ));
        }
        let mut r = Reader { bytes, at: 4 };
        let version = r.u16();
        if version != FORMAT_VERSION {
            return Err(bad(
                &ValueRule {
                    field: "descriptor.version",
                    expected: "1, the only format this dlport reads: a newer dlport wrote it; upgrade dlport \
                 in the opening process (or share from the older one)",
                },
                u64::from(version),
            ));
        }
        if bytes.len() < DESCRIPTOR_HEADER {
            return Err(bad(
                &ValueRule {
                    field: "descriptor length",
                    expected: "at least 56 bytes (the format 1 header): the bytes were cut; send the whole \
                 descriptor",
                },
                len,
            ));
        }
        let kind = match r.u16() {
            1 => HandleKind::Memfd,
            2 => HandleKind::CudaIpc,
            k => {
                return Err(bad(
                    &ValueRule {
                        field: "descriptor.kind",
                        expected: "1 (memfd) or 2 (CUDA IPC)",
                    },
                    u64::from(k),
                ));
            }
        };
        let fd_count = r.u32();
        if fd_count as usize != kind.fd_count() {
            return Err(bad(
                &ValueRule {
                    field: "descriptor.fd_count",
                    expected: "1 for both kinds (memfd, CUDA IPC)",
                },
                u64::from(fd_count),
            ));
        }
        let ndim = r.u32();
        let n = layout::check_ndim(i64::from(ndim))?;
        let device = Device::new(DeviceType(r.i32()), r.i32());
        let [code, bits, l0, l1] = r.take::<4>();
        let dtype = DataType::new(TypeCode(code), bits, u16::from_le_bytes([l0, l1]));
        let handle_len = r.u32();
        if handle_len as usize != kind.handle_len() {
            return Err(bad(
                &ValueRule {
                    field: "descriptor.handle_len",
                    expected: "0 for a memfd and 64 (a CUipcMemHandle) for CUDA IPC",
                },
                u64::from(handle_len),
            ));
        }
        let flags = r.u64();
        let byte_offset = r.u64();
        let byte_len = r.u64();
        let want = DESCRIPTOR_HEADER + 16 * n + handle_len as usize;
        if bytes.len() != want {
            return Err(bad(
                if bytes.len() < want {
                    &ValueRule {
                        field: "descriptor length",
                        expected: "56 + 16 × ndim + handle_len bytes: the bytes were cut; \
                                   send the whole descriptor",
                    }
                } else {
                    &ValueRule {
                        field: "descriptor length",
                        expected: "56 + 16 × ndim + handle_len bytes: bytes follow the \
                                   descriptor's end; send one descriptor per message",
                    }
                },
                len,
            ));
        }
        let shape = r.i64s(n);
        let strides = r.i64s(n);
        let handle = bytes[r.at..].to_vec();
        let d = Self {
            kind,
            device,
            dtype,
            shape,
            strides,
            byte_offset,
            byte_len,
            flags: flags & !FLAG_IS_COPIED,
            handle,
        };
        d.validate()?;
        Ok(d)
    }
}

const _: () = assert!(DESCRIPTOR_MAX == 56 + 16 * 64 + 64);

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Descriptor {
        Descriptor {
            kind: HandleKind::Memfd,
            device: Device::cpu(),
            dtype: DataType::FLOAT32,
            shape: vec![2, 3],
            strides: vec![3, 1],
            byte_offset: 8,
            byte_len: 4096,
            flags: 0,
            handle: Vec::new(),
        }
    }

    #[test]
    fn round_trips_and_every_cut_is_refused() {
        let d = sample();
        let bytes = d.to_bytes().unwrap();
        assert_eq!(bytes.len(), DESCRIPTOR_HEADER + 32);
        assert_eq!(Descriptor::from_bytes(&bytes).unwrap(), d);
        for cut in 0..bytes.len() {
            let e = Descriptor::from_bytes(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(e, Error::Dispatch(dlport_core::error::DispatchError::InvalidValue { rule, .. })
                    if rule.field == "descriptor length" || rule.field == "descriptor.magic"),
                "cut at {cut}: {e}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        let e = Descriptor::from_bytes(&long).unwrap_err().to_string();
        assert!(e.contains("descriptor length = 89"), "{e}");
    }

    #[test]
    fn a_version_from_the_future_is_named() {
        let mut bytes = sample().to_bytes().unwrap();
        bytes[4..6].copy_from_slice(&2u16.to_le_bytes());
        // Even cut right after the version, the version is what is reported.
        let e = Descriptor::from_bytes(&bytes[..6]).unwrap_err().to_string();
        assert!(e.contains("descriptor.version = 2"), "{e}");
        assert!(e.contains("upgrade dlport"), "{e}");
    }

    #[test]
    fn a_tensor_outside_byte_len_is_refused() {
        let mut d = sample();
        d.byte_len = 31; // needs 8 + 24 = 32
        assert_eq!(
            d.validate(),
            Err(Error::Layout(
                dlport_core::error::LayoutError::StorageTooSmall {
                    needed: 32,
                    available: 31
                }
            ))
        );
        assert!(d.to_bytes().is_err());
    }
}
