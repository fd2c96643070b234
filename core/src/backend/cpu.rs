//! The CPU backend (alloc only), the only one in dlport: aligned host allocations, zero-copy
//! views of every host-accessible memory class, and strided → compact copies through
//! [`crate::copy`] (the SIMD kernels of every target).

use alloc::boxed::Box;
use core::ffi::c_void;
use core::ptr::NonNull;

use super::api::Backend;
use crate::abi::{DeviceType, FLAG_IS_COPIED};
use crate::device::Device;
use crate::dispatch::{Buffer, Tensor};
use crate::dtype::DataType;
use crate::error::{AccessError, BackendError, DispatchError, Error};
use crate::export::TensorStorage;
use crate::layout;
use crate::tensor::TensorRef;

pub use crate::copy::copy_to_compact;

/// The alignment of CPU allocations: 64 bytes, what JAX/XLA needs to view host memory without
/// copying it.
pub const CPU_ALIGN: usize = 64;

/// A zeroed host allocation with a chosen power-of-two alignment.
#[derive(Debug)]
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: the buffer owns its allocation alone; moving it between threads moves that ownership.
unsafe impl Send for AlignedBuffer {}
// SAFETY: `&AlignedBuffer` only exposes the pointer value and length.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two; at least 1).
    pub fn zeroed(len: usize, align: usize) -> Result<Self, Error> {
        let fail = || {
            Error::Backend(BackendError::AllocationFailed {
                bytes: len as u64,
                align,
            })
        };
        let layout = core::alloc::Layout::from_size_align(len, align.max(1)).map_err(|_| fail())?;
        if len == 0 {
            // A dangling, aligned, non-NULL pointer: nothing is ever read through it.
            let ptr =
                NonNull::new(core::ptr::without_provenance_mut(layout.align())).ok_or_else(fail)?;
            return Ok(Self {
                ptr,
                len,
                align: layout.align(),
            });
        }
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(fail)?;
        Ok(Self {
            ptr,
            len,
            align: layout.align(),
        })
    }

    /// The start of the allocation.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is allocated.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, read-only.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised (zeroed) bytes owned by self; a zero-length slice over the
        // dangling aligned pointer is valid.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, with exclusive access through `&mut self`.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in `zeroed` with exactly this size and alignment.
            unsafe {
                alloc::alloc::dealloc(
                    self.ptr.as_ptr(),
                    core::alloc::Layout::from_size_align_unchecked(self.len, self.align),
                )
            }
        }
    }
}

// SAFETY: the allocation does not move with the value, holds `len` bytes, and is owned alone.
unsafe impl TensorStorage for AlignedBuffer {
    fn data_ptr(&mut self) -> *mut c_void {
        self.ptr.as_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.len
    }
}

/// The CPU backend: serves `kDLCPU` and reads every host-accessible memory class (pinned,
/// managed) without a copy, so a `kDLCUDAHost` tensor imported here is a view of the same
/// address.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// The backend's name.
    pub const NAME: &'static str = "cpu";
}

/// Bytes of a compact tensor of `dtype` and `shape` (sub-byte elements packed). A size past
/// `isize::MAX` is [`DispatchError::AllocationLimit`] with the exact byte count, never a wrapped
/// number.
pub fn compact_bytes(dtype: DataType, shape: &[i64]) -> Result<usize, Error> {
    dtype.validate()?;
    let numel = layout::element_count(shape)?;
    let bits = u128::from(numel) * u128::from(dtype.storage_bits(false));
    let bytes = bits.div_ceil(8);
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: bytes.into(),
            limit: isize::MAX as u64,
        }))
}

/// A fresh host copy of `src` in compact row-major order (sub-byte elements packed), aligned
/// to `alignment` (at least [`CPU_ALIGN`]), after checking its size against `limit` bytes
/// (none: the process-wide [`crate::alloc_limit`]) before anything is allocated.
pub fn compact_copy(src: &TensorRef<'_>, limit: Option<u64>) -> Result<AlignedBuffer, Error> {
    compact_copy_aligned(src, CPU_ALIGN, limit)
}

/// As [`compact_copy`], with a chosen power-of-two alignment.
pub fn compact_copy_aligned(
    src: &TensorRef<'_>,
    alignment: usize,
    limit: Option<u64>,
) -> Result<AlignedBuffer, Error> {
    if !src.device().is_host_accessible() {
        return Err(Error::Access(AccessError::NotHostAccessible {
            device: src.device(),
        }));
    }
    let bytes = compact_bytes(src.dtype(), src.shape())?;
    crate::check_alloc(bytes as u128, limit)?;
    let mut buf = AlignedBuffer::zeroed(bytes, alignment.max(CPU_ALIGN))?;
    copy_to_compact(src, buf.as_mut_slice())?;
    Ok(buf)
}

impl CpuBackend {
    /// Allocates a zeroed, compact, 64-byte-aligned host tensor.
    pub fn zeros(dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        Self::zeros_aligned(dtype, shape, CPU_ALIGN)
    }

    /// Allocates a zeroed, compact host tensor with a chosen power-of-two alignment (at least
    /// [`CPU_ALIGN`]).
    pub fn zeros_aligned(dtype: DataType, shape: &[i64], align: usize) -> Result<Tensor, Error> {
        let bytes = compact_bytes(dtype, shape)?;
        let buf = AlignedBuffer::zeroed(bytes, align.max(CPU_ALIGN))?;
        Tensor::new(
            Buffer::new(Box::new(buf)),
            Self::NAME,
            dtype,
            shape,
            None,
            0,
            0,
        )
    }

    /// Copies any host-accessible tensor into a new compact, 64-byte-aligned one marked
    /// IS_COPIED (sub-byte elements packed, whether the source was packed or padded).
    ///
    /// Not checked against an allocation limit (the registry checks the limit in force before
    /// it asks a backend for a copy); [`compact_copy`] checks one.
    pub fn compact(src: &TensorRef<'_>) -> Result<Tensor, Error> {
        let buf = compact_copy(src, Some(u64::MAX))?;
        Tensor::new(
            Buffer::new(Box::new(buf)),
            Self::NAME,
            src.dtype(),
            src.shape(),
            None,
            0,
            FLAG_IS_COPIED,
        )
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::CPU]
    }

    fn can_access(&self, memory: Device) -> bool {
        memory.is_host_accessible()
    }

    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        if device.device_type != DeviceType::CPU {
            return Err(Error::Backend(BackendError::unsupported(
                Self::NAME,
                "allocation on a device other than cpu",
            )));
        }
        Self::zeros(dtype, shape)
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        if target.device_type != DeviceType::CPU {
            return Ok(None);
        }
        if !src.device().is_host_accessible() {
            // The source's backend has to bring it to the host.
            return Ok(None);
        }
        // The registry checked the size against the caller's limit before asking for the copy.
        Self::compact(src).map(Some)
    }
}
