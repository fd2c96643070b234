//! The CPU backend of the core (alloc only): aligned host allocations, zero-copy views of every
//! host-accessible memory class, and strided → compact copies.

use alloc::boxed::Box;
use core::ffi::c_void;
use core::ptr::NonNull;

use super::api::Backend;
use crate::abi::{DeviceType, FLAG_IS_COPIED};
use crate::device::Device;
use crate::dispatch::{Buffer, Tensor};
use crate::dtype::DataType;
use crate::error::Error;
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

/// Bytes of a compact tensor of `dtype` and `shape` (sub-byte elements packed). A size past
/// `isize::MAX` is [`Error::AllocationLimit`] with the exact byte count, never a wrapped number.
pub fn compact_bytes(dtype: DataType, shape: &[i64]) -> Result<usize, Error> {
    dtype.validate()?;
    let numel = layout::element_count(shape)?;
    let bits = u128::from(numel) * u128::from(dtype.storage_bits(false));
    let bytes = bits.div_ceil(8);
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(Error::AllocationLimit {
            bytes: bytes.into(),
            limit: isize::MAX as u64,
        })
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
        return Err(Error::NotHostAccessible {
            device: src.device(),
        });
    }
    let bytes = compact_bytes(src.dtype(), src.shape())?;
    crate::check_alloc(bytes as u128, limit)?;
    let mut buf = AlignedBuffer::zeroed(bytes, alignment.max(CPU_ALIGN))?;
    copy_to_compact(src, buf.as_mut_slice())?;
    Ok(buf)
}

/// Copies the elements of a host-accessible tensor, in row-major order, into `dst`, which must
/// hold exactly the compact size ([`compact_bytes`]). Any strides (negative, zero, permuted)
/// and any element size. Sub-byte elements, packed or padded (IS_SUBBYTE_TYPE_PADDED), come
/// out packed: the compact form every consumer reads, legacy ones included.
pub fn copy_to_compact(src: &TensorRef<'_>, dst: &mut [u8]) -> Result<(), Error> {
    if !src.device().is_host_accessible() {
        return Err(Error::NotHostAccessible {
            device: src.device(),
        });
    }
    let needed = u128::from(src.numel()) * u128::from(src.dtype().storage_bits(false));
    if needed.div_ceil(8) != dst.len() as u128 {
        return Err(Error::DestinationSize {
            needed: u64::try_from(needed.div_ceil(8)).unwrap_or(u64::MAX),
            available: dst.len() as u64,
        });
    }
    if src.numel() == 0 {
        return Ok(());
    }
    if src.dtype().is_sub_byte() {
        copy_subbyte(src, dst);
        return Ok(());
    }
    if src.contiguity().is_row_major() {
        let bytes = src.as_bytes()?;
        dst.copy_from_slice(&bytes[..dst.len()]);
        return Ok(());
    }
    let elem = (src.layout().element_bits / 8) as usize;
    let ndim = src.ndim();
    let base = src.first_element_ptr().cast_const();
    let mut strides = [0isize; MAX_NDIM];
    for (axis, s) in src.strides().enumerate() {
        // Within the validated span, so the byte stride fits.
        strides[axis] = (s as isize).wrapping_mul(elem as isize);
    }
    let shape = src.shape();
    let mut out = dst.chunks_exact_mut(elem);
    for_each_offset(shape, &strides[..ndim], |at| {
        let chunk = out.next().unwrap_or_default();
        // SAFETY: the index is in bounds, so `base + at .. + elem` lies inside the span that
        // validation checked and the caller's view keeps readable; `chunk` is a distinct
        // `elem`-byte piece of `dst`, which cannot overlap foreign memory we only read.
        unsafe { core::ptr::copy_nonoverlapping(base.offset(at), chunk.as_mut_ptr(), chunk.len()) };
    });
    Ok(())
}

/// Calls `f` with the offset (in `strides`' unit) of every index of `shape`, in row-major
/// order. `shape` has no zero extent.
fn for_each_offset(shape: &[i64], strides: &[isize], mut f: impl FnMut(isize)) {
    let ndim = shape.len();
    if ndim == 0 {
        f(0);
        return;
    }
    let (inner_extent, inner_stride) = (shape[ndim - 1] as usize, strides[ndim - 1]);
    let rows: usize = shape[..ndim - 1].iter().map(|&e| e as usize).product();
    let mut index = [0usize; MAX_NDIM];
    for _ in 0..rows {
        let mut offset: isize = 0;
        for axis in 0..ndim - 1 {
            offset += index[axis] as isize * strides[axis];
        }
        for i in 0..inner_extent {
            f(offset + i as isize * inner_stride);
        }
        for axis in (0..ndim - 1).rev() {
            index[axis] += 1;
            if (index[axis] as i64) < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// The sub-byte gather: reads each element's `bits × lanes` bits (packed: at bit
/// `offset × bits` past the first element, little bit-endian; padded: the low bits of its own
/// byte) and packs them into `dst` (exactly the packed size, overwritten).
fn copy_subbyte(src: &TensorRef<'_>, dst: &mut [u8]) {
    let value_bits = src.dtype().storage_bits(false) as usize;
    let storage_bits = src.layout().element_bits as isize;
    let mask: u16 = (1u16 << value_bits) - 1;
    let base = src.first_element_ptr().cast_const();
    let ndim = src.ndim();
    let mut strides = [0isize; MAX_NDIM];
    for (axis, s) in src.strides().enumerate() {
        // Within the validated span (computed in bits), so the bit stride fits.
        strides[axis] = (s as isize).wrapping_mul(storage_bits);
    }
    dst.fill(0);
    let mut out_bit = 0usize;
    for_each_offset(src.shape(), &strides[..ndim], |bit| {
        let (byte, shift) = (bit.div_euclid(8), bit.rem_euclid(8) as u32);
        let last = (bit + value_bits as isize - 1).div_euclid(8);
        // SAFETY: the element's bits lie inside the validated span, rounded outwards to whole
        // bytes, which the view keeps readable: both `byte` and `last` are inside it.
        let lo = u16::from(unsafe { *base.offset(byte) });
        let hi = if last != byte {
            // SAFETY: as above.
            u16::from(unsafe { *base.offset(last) })
        } else {
            0
        };
        let value = (((hi << 8) | lo) >> shift) & mask;
        let (at, sh) = (out_bit / 8, out_bit % 8);
        let placed = value << sh;
        dst[at] |= placed as u8;
        if sh + value_bits > 8 {
            dst[at + 1] |= (placed >> 8) as u8;
        }
        out_bit += value_bits;
    });
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
        // The registry checked the size against the caller's limit before asking for the copy.
        let buf = compact_copy(src, Some(u64::MAX))?;
        let tensor = Tensor::new(
            Buffer::new(Box::new(buf)),
            Self::NAME,
            src.dtype(),
            src.shape(),
            None,
            0,
            FLAG_IS_COPIED,
        )?;
        Ok(Some(tensor))
    }
}
