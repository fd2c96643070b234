//! Host copies into fresh memory: [`AlignedBuffer`] (a zeroed allocation of a chosen
//! alignment), [`compact_bytes`] (the size of a compact tensor) and [`compact_copy`], a strided
//! tensor copied into one in compact row-major order after its size is checked against the
//! allocation limit.

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::dtype::DataType;
use crate::error::{AccessError, BackendError, DispatchError, Error};
use crate::layout;
use crate::limit::check_alloc;
use crate::storage::TensorStorage;
use crate::view::TensorRef;

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

/// Bytes of a compact tensor of `dtype` and `shape` (sub-byte elements packed). A size past
/// `isize::MAX` is [`DispatchError::AllocationLimit`] with the exact byte count, never a wrapped
/// number.
pub fn compact_bytes(dtype: DataType, shape: &[i64]) -> Result<usize, Error> {
    let bytes = layout::compact_byte_count(dtype, shape)?;
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(Error::Dispatch(DispatchError::AllocationLimit {
            bytes: bytes.into(),
            limit: isize::MAX as u64,
        }))
}

/// Bytes of a new compact tensor of `dtype` and `shape` ([`compact_bytes`]), checked against
/// the process's allocation limit before anything is allocated, as an allocation aligned to
/// `align` bytes counts (`reserved_bytes`; 1 for memory the host does not map): what every
/// backend's own allocation sizes itself with, so that a backend called directly (not through
/// [`Registry::allocate`](crate::Registry::allocate), which checks the registry's limit too) is
/// bounded by the same limit.
pub fn allocation_bytes(dtype: DataType, shape: &[i64], align: usize) -> Result<usize, Error> {
    let bytes = compact_bytes(dtype, shape)?;
    check_alloc(reserved_bytes(bytes, align), None)?;
    Ok(bytes)
}

/// What an allocation of `bytes` aligned to `align` can take from the address space, as the
/// allocation limit counts it: `bytes`, plus `align - 1` when the alignment is above
/// [`CPU_ALIGN`], since the allocator may reserve that much more to place the block (a 2-byte
/// buffer aligned to 2^30 reserves up to 1 GiB more). An alignment up to [`CPU_ALIGN`] adds
/// nothing the allocator's own bookkeeping does not. Exact in 128 bits.
pub(crate) fn reserved_bytes(bytes: usize, align: usize) -> u128 {
    let padding = if bytes != 0 && align > CPU_ALIGN {
        align - 1
    } else {
        0
    };
    bytes as u128 + padding as u128
}

/// A fresh host copy of `src` in compact row-major order (sub-byte elements packed), 64-byte
/// aligned, after checking its size against `limit` bytes (none: the process-wide limit)
/// before anything is allocated.
pub(crate) fn compact_copy(
    src: &TensorRef<'_>,
    limit: Option<u64>,
) -> Result<AlignedBuffer, Error> {
    compact_copy_aligned(src, CPU_ALIGN, limit)
}

/// As [`compact_copy`], with a chosen power-of-two alignment (at least [`CPU_ALIGN`]), the
/// alignment counted as the limit counts it ([`reserved_bytes`]).
pub(crate) fn compact_copy_aligned(
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
    let alignment = alignment.max(CPU_ALIGN);
    check_alloc(reserved_bytes(bytes, alignment), limit)?;
    let mut buf = AlignedBuffer::zeroed(bytes, alignment)?;
    src.copy_to_compact(buf.as_mut_slice())?;
    Ok(buf)
}
