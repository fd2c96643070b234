//! The CPU backend of the core (alloc only): aligned host allocations, zero-copy views of every
//! host-accessible memory class, and strided → compact copies.

use alloc::boxed::Box;
use core::ffi::c_void;
use core::ptr::NonNull;

use super::backend::Backend;
use super::buffer::{Buffer, Tensor};
use crate::abi::{DeviceType, FLAG_IS_COPIED};
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{CopyReason, Error};
use crate::export::TensorStorage;
use crate::layout::{self, MAX_NDIM};
use crate::tensor::TensorRef;

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
        let fail = || Error::AllocationFailed {
            bytes: len as u64,
            align,
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

/// Bytes of a compact tensor of `dtype` and `shape`.
pub fn compact_bytes(dtype: DataType, shape: &[i64]) -> Result<usize, Error> {
    dtype.validate()?;
    let numel = layout::element_count(shape)?;
    dtype
        .bytes_for(numel, false)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or(Error::AllocationFailed {
            bytes: u64::MAX,
            align: CPU_ALIGN,
        })
}

/// Copies the elements of a host-accessible tensor, in row-major order, into `dst` (which must
/// hold exactly the compact size). Whole-byte elements may have any strides; packed sub-byte
/// elements must be row-major contiguous.
pub fn copy_to_compact(src: &TensorRef<'_>, dst: &mut [u8]) -> Result<(), Error> {
    if !src.device().is_host_accessible() {
        return Err(Error::NotHostAccessible {
            device: src.device(),
        });
    }
    if src.numel() == 0 {
        return Ok(());
    }
    if src.contiguity().is_row_major() {
        let bytes = src.as_bytes()?;
        dst.copy_from_slice(&bytes[..dst.len()]);
        return Ok(());
    }
    let bits = src.layout().element_bits;
    if bits % 8 != 0 {
        return Err(Error::NotContiguous {
            contiguity: src.contiguity(),
        });
    }
    let elem = (bits / 8) as usize;
    let ndim = src.ndim();
    let base = (src.data() as *const u8).wrapping_add(src.byte_offset() as usize);
    let mut strides = [0isize; MAX_NDIM];
    for (axis, s) in src.strides().enumerate() {
        // Within the validated span, so the byte stride fits.
        strides[axis] = (s as isize).wrapping_mul(elem as isize);
    }
    let shape = src.shape();
    let (inner_extent, inner_stride) = (shape[ndim - 1] as usize, strides[ndim - 1]);
    let mut index = [0usize; MAX_NDIM];
    let mut out = dst.chunks_exact_mut(elem);
    let rows = src.numel() as usize / inner_extent;
    for _ in 0..rows {
        let mut offset: isize = 0;
        for axis in 0..ndim - 1 {
            offset += index[axis] as isize * strides[axis];
        }
        for i in 0..inner_extent {
            let at = offset + i as isize * inner_stride;
            let chunk = out.next().unwrap_or_default();
            // SAFETY: the index is in bounds, so `base + at .. + elem` lies inside the span that
            // validation checked and the caller's view keeps readable; `chunk` is a distinct
            // `elem`-byte piece of `dst`, which cannot overlap foreign memory we only read.
            unsafe {
                core::ptr::copy_nonoverlapping(base.offset(at), chunk.as_mut_ptr(), chunk.len())
            };
        }
        for axis in (0..ndim.saturating_sub(1)).rev() {
            index[axis] += 1;
            if (index[axis] as i64) < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Ok(())
}

impl CpuBackend {
    fn new_tensor(dtype: DataType, shape: &[i64], flags: u64) -> Result<(Tensor, *mut u8), Error> {
        let bytes = compact_bytes(dtype, shape)?;
        let buf = AlignedBuffer::zeroed(bytes, CPU_ALIGN)?;
        let ptr = buf.as_ptr();
        let buffer = Buffer::new(Box::new(buf));
        let tensor = Tensor::new(buffer, Self::NAME, dtype, shape, None, 0, flags)?;
        Ok((tensor, ptr))
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
            return Err(Error::Unsupported {
                backend: Self::NAME,
                operation: "allocation on a device other than cpu",
            });
        }
        Ok(Self::new_tensor(dtype, shape, 0)?.0)
    }

    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        if target.device_type != DeviceType::CPU {
            return Ok(None);
        }
        if !src.device().is_host_accessible() {
            // The source's backend has to bring it to the host.
            return Ok(None);
        }
        if src.is_subbyte_padded() {
            return Err(Error::CopyRequired {
                reason: CopyReason::Layout {
                    contiguity: src.contiguity(),
                },
            });
        }
        let (tensor, ptr) = Self::new_tensor(src.dtype(), src.shape(), FLAG_IS_COPIED)?;
        let len = compact_bytes(src.dtype(), src.shape())?;
        if len != 0 {
            // SAFETY: `ptr` is the fresh allocation of exactly `len` bytes behind `tensor`,
            // which nobody else can reach yet.
            let dst = unsafe { core::slice::from_raw_parts_mut(ptr, len) };
            copy_to_compact(src, dst)?;
        }
        Ok(Some(tensor))
    }
}
