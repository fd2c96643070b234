//! The allocation block: one heap allocation holds the managed header, the storage and the
//! shape and strides arrays (exactly as many values as the tensor needs, after the storage);
//! `manager_ctx` points at the block and the deleter frees it at once.

use core::alloc::Layout as AllocLayout;
use core::ffi::c_void;
use core::ptr::NonNull;

use crate::abi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, RawManaged};
use crate::device::Device;
use crate::dtype::DataType;
use crate::storage::TensorStorage;

/// Which struct to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Versioned,
    Legacy,
}

/// The metadata of an export, already checked.
pub(crate) struct Parts<'a> {
    pub(crate) device: Device,
    pub(crate) dtype: DataType,
    pub(crate) byte_offset: u64,
    pub(crate) flags: u64,
    /// `shape` followed by `strides` (`2 × ndim` values), copied straight into the block.
    pub(crate) dims: &'a [i64],
}

/// The two managed headers, for the code that builds blocks once for both.
pub(crate) trait Header: Sized + 'static {
    /// The legacy form (no version, no flags).
    const LEGACY: bool;

    /// The header of a block holding storage `S`: its deleter frees that block.
    fn new<S: TensorStorage>(dl_tensor: DLTensor, manager_ctx: *mut c_void, flags: u64) -> Self;

    /// `manager_ctx` of a live header.
    ///
    /// # Safety
    /// `header` points to a live header.
    unsafe fn manager_ctx(header: *mut Self) -> *mut c_void;

    /// The owned pointer, as either form.
    fn raw(header: NonNull<Self>) -> RawManaged;
}

impl Header for DLManagedTensorVersioned {
    const LEGACY: bool = false;

    #[inline(always)]
    fn new<S: TensorStorage>(dl_tensor: DLTensor, manager_ctx: *mut c_void, flags: u64) -> Self {
        Self {
            version: DLPackVersion::CURRENT,
            manager_ctx,
            deleter: Some(delete::<Self, S>),
            flags,
            dl_tensor,
        }
    }

    #[inline(always)]
    unsafe fn manager_ctx(header: *mut Self) -> *mut c_void {
        // SAFETY: live (contract).
        unsafe { (*header).manager_ctx }
    }

    #[inline(always)]
    fn raw(header: NonNull<Self>) -> RawManaged {
        RawManaged::Versioned(header)
    }
}

impl Header for DLManagedTensor {
    const LEGACY: bool = true;

    #[inline(always)]
    fn new<S: TensorStorage>(dl_tensor: DLTensor, manager_ctx: *mut c_void, _flags: u64) -> Self {
        Self {
            dl_tensor,
            manager_ctx,
            deleter: Some(delete::<Self, S>),
        }
    }

    #[inline(always)]
    unsafe fn manager_ctx(header: *mut Self) -> *mut c_void {
        // SAFETY: live (contract).
        unsafe { (*header).manager_ctx }
    }

    #[inline(always)]
    fn raw(header: NonNull<Self>) -> RawManaged {
        RawManaged::Legacy(header)
    }
}

/// The heap block behind `manager_ctx`: the [`Head`] first (so a pointer to the block is a
/// pointer to the header), then the storage, then the `i64` values the head counts (shape and
/// strides, or strides only for a re-export that reuses its source's shape).
#[repr(C)]
pub(crate) struct Block<S> {
    head: Head,
    storage: S,
}

/// The part of every block that does not depend on the storage type.
#[repr(C)]
pub(crate) struct Head {
    /// Either header: room for the larger, so a legacy export can become a versioned one in
    /// place ([`convert_in_place`]).
    header: HeaderRoom,
    /// How many `i64` values follow the block.
    dims: usize,
    /// The versioned deleter of this block's storage type, which a legacy export converted in
    /// place takes.
    versioned_deleter: crate::abi::DLManagedTensorVersionedDeleter,
}

#[repr(C)]
union HeaderRoom {
    legacy: core::mem::ManuallyDrop<DLManagedTensor>,
    versioned: core::mem::ManuallyDrop<DLManagedTensorVersioned>,
}

/// The allocation of a block followed by `dims` values, and the offset of the first value.
#[inline(always)]
fn block_layout<S>(dims: usize) -> (AllocLayout, usize) {
    const I64: AllocLayout = AllocLayout::new::<i64>();
    let block = AllocLayout::new::<Block<S>>();
    let align = if block.align() > I64.align() {
        block.align()
    } else {
        I64.align()
    };
    // The values start at the block's size rounded up to an i64; the whole is rounded up to
    // the alignment. At most 2 × MAX_NDIM values follow a block of a few hundred bytes (the
    // storage's size is a type's, below isize::MAX - 4096 by far for any storage dlport
    // holds), so nothing overflows, and the alignment is a power of two.
    debug_assert!(dims <= 2 * crate::layout::MAX_NDIM);
    let offset = block.size().next_multiple_of(I64.align());
    let size = (offset + dims * I64.size()).next_multiple_of(align);
    // SAFETY: `align` is the larger of two type alignments (a power of two), and `size`,
    // rounded up to it, is far below isize::MAX (above).
    (
        unsafe { AllocLayout::from_size_align_unchecked(size, align) },
        offset,
    )
}

/// Turns a legacy header that dlport wrote into a block into a DLPack 1.3 versioned header of
/// the same tensor, in place: same `dl_tensor` (whose strides a block always writes out),
/// `manager_ctx` and block, flags 0 (the legacy form has none), and the versioned deleter of
/// the block's storage. No allocation, no copy of the arrays.
///
/// # Safety
/// `legacy` is the header of a live block built by [`NewBlock`] (`H = DLManagedTensor`), owned
/// by the caller, who from now on owns it as the returned versioned tensor.
pub(crate) unsafe fn convert_in_place(
    legacy: NonNull<DLManagedTensor>,
) -> NonNull<DLManagedTensorVersioned> {
    let head = legacy.as_ptr().cast::<Head>();
    // SAFETY: the block's head is at its start; the header room holds either header, and the
    // legacy one is read out before the versioned one overwrites it.
    unsafe {
        let old = core::ptr::read(legacy.as_ptr());
        let new = DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: old.manager_ctx,
            deleter: Some((*head).versioned_deleter),
            flags: 0,
            dl_tensor: old.dl_tensor,
        };
        let versioned = legacy.cast::<DLManagedTensorVersioned>();
        versioned.as_ptr().write(new);
        versioned
    }
}

/// A block allocated for `dims` values, with nothing in it yet: the values are written
/// through [`dims`](Self::dims), then [`finish`](Self::finish) moves the storage in and
/// writes the header, or [`free`](Self::free) gives the memory back.
pub(crate) struct NewBlock<H, S> {
    block: NonNull<Block<S>>,
    _header: core::marker::PhantomData<H>,
    dims: usize,
}

impl<H: Header, S: TensorStorage> NewBlock<H, S> {
    /// Allocates a block for `dims` values (the allocation error handler runs on failure, as
    /// for `Box::new`).
    #[inline(always)]
    pub(crate) fn new(dims: usize) -> Self {
        let (layout, _) = block_layout::<S>(dims);
        // SAFETY: not zero-sized: the layout holds a header.
        let ptr = unsafe { alloc::alloc::alloc(layout) };
        let Some(block) = NonNull::new(ptr.cast::<Block<S>>()) else {
            alloc::alloc::handle_alloc_error(layout)
        };
        Self {
            block,
            _header: core::marker::PhantomData,
            dims,
        }
    }

    /// The `dims` values after the block (uninitialised until written).
    #[inline(always)]
    pub(crate) fn dims(&self) -> *mut i64 {
        let (_, offset) = block_layout::<S>(self.dims);
        // SAFETY: the allocation holds `dims` values from `offset` on.
        unsafe { self.block.as_ptr().cast::<u8>().add(offset).cast::<i64>() }
    }

    /// Gives the memory back (no storage was moved in).
    #[inline]
    pub(crate) fn free(self) {
        let (layout, _) = block_layout::<S>(self.dims);
        // SAFETY: allocated by `new` with this layout; nothing in it needs dropping.
        unsafe { alloc::alloc::dealloc(self.block.as_ptr().cast(), layout) }
    }

    /// Moves `storage` into the block and returns the pointer it gives for `data` (asked once,
    /// in the storage's final place, as [`TensorStorage::data_ptr`] requires).
    #[inline(always)]
    pub(crate) fn put_storage(self, storage: S) -> (Filled<H, S>, *mut c_void) {
        let block = self.block.as_ptr();
        // SAFETY: fresh allocation of a block; the storage field is written once, here, and
        // then borrowed mutably once.
        let data = unsafe {
            core::ptr::addr_of_mut!((*block).head.dims).write(self.dims);
            core::ptr::addr_of_mut!((*block).head.versioned_deleter)
                .write(delete::<DLManagedTensorVersioned, S>);
            core::ptr::addr_of_mut!((*block).storage).write(storage);
            (*core::ptr::addr_of_mut!((*block).storage)).data_ptr()
        };
        (Filled { new: self }, data)
    }
}

/// A block holding its storage, the header not yet written.
pub(crate) struct Filled<H, S> {
    new: NewBlock<H, S>,
}

impl<H: Header, S: TensorStorage> Filled<H, S> {
    /// Drops the storage and gives the memory back (an export that failed its last checks).
    #[cold]
    #[inline(never)]
    pub(crate) fn discard(self) {
        // SAFETY: the storage was written by `put_storage` and is dropped once, here.
        unsafe {
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*self.new.block.as_ptr()).storage))
        };
        self.new.free();
    }

    /// The values after the block.
    #[inline(always)]
    pub(crate) fn dims(&self) -> *mut i64 {
        self.new.dims()
    }

    /// Writes the header (`manager_ctx` = the block, the deleter that frees it) and hands the
    /// tensor out.
    #[inline(always)]
    pub(crate) fn finish(self, dl_tensor: DLTensor, flags: u64) -> RawManaged {
        let block = self.new.block.as_ptr();
        // SAFETY: the header room is the block's first field (repr(C)) and holds either
        // header; written once, here.
        unsafe {
            core::ptr::addr_of_mut!((*block).head.header)
                .cast::<H>()
                .write(H::new::<S>(dl_tensor, block.cast(), flags))
        };
        H::raw(self.new.block.cast())
    }
}

/// `data` and `byte_offset` as an export writes them: for host-accessible memory the offset
/// folded into the pointer (`data + byte_offset`, offset 0), since some consumers (Paddle 3.3)
/// ignore `byte_offset`; for device memory unchanged, as `data` may be an opaque handle. An
/// offset that does not fit the address space stays where it is (only an empty tensor, which
/// is never read, can have one).
#[inline(always)]
pub fn host_address(data: *mut c_void, device: Device, byte_offset: u64) -> (*mut c_void, u64) {
    let fits = usize::try_from(byte_offset)
        .ok()
        .filter(|&o| (data as usize).checked_add(o).is_some());
    match fits {
        Some(offset) if offset != 0 && device.is_host_accessible() => {
            (data.wrapping_byte_add(offset), 0)
        }
        _ => (data, byte_offset),
    }
}

/// The `dl_tensor` of a block whose values are `shape ++ strides` from `dims` (for a 0-d
/// tensor both point at no values: never NULL), with [`host_address`]'s `data` and
/// `byte_offset`.
#[inline(always)]
pub(crate) fn tensor_at(
    data: *mut c_void,
    device: Device,
    dtype: DataType,
    ndim: usize,
    dims: *mut i64,
    byte_offset: u64,
) -> DLTensor {
    // SAFETY: `dims` holds 2 × ndim values, so the offset stays inside them (or at the start of
    // no values, for ndim 0).
    let (shape, strides) = (dims, unsafe { dims.add(ndim) });
    let (data, byte_offset) = host_address(data, device, byte_offset);
    DLTensor {
        data,
        device,
        ndim: ndim as i32,
        dtype,
        shape,
        strides,
        byte_offset,
    }
}

/// A block of `storage` with already checked metadata (a backend tensor's, or a re-export's).
pub(crate) fn assemble<S: TensorStorage>(storage: S, parts: Parts<'_>, form: Form) -> RawManaged {
    match form {
        Form::Versioned => assemble_as::<DLManagedTensorVersioned, S>(storage, parts),
        Form::Legacy => assemble_as::<DLManagedTensor, S>(storage, parts),
    }
}

fn assemble_as<H: Header, S: TensorStorage>(storage: S, parts: Parts<'_>) -> RawManaged {
    let all = parts.dims;
    let ndim = all.len() / 2;
    let block = NewBlock::<H, S>::new(all.len());
    // SAFETY: the block holds exactly `all.len()` values.
    unsafe { core::ptr::copy_nonoverlapping(all.as_ptr(), block.dims(), all.len()) };
    let (block, data) = block.put_storage(storage);
    let tensor = tensor_at(
        data,
        parts.device,
        parts.dtype,
        ndim,
        block.dims(),
        parts.byte_offset,
    );
    block.finish(tensor, parts.flags)
}

/// The deleter of every export: drops the storage and frees the whole block.
///
/// # Safety
/// Called once, by DLPack's contract, with a tensor whose block was built for this `H` and `S`.
pub(crate) unsafe extern "C" fn delete<H: Header, S: TensorStorage>(managed: *mut H) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `manager_ctx` was set by `finish` to the block, released only here.
    unsafe {
        let block = H::manager_ctx(managed).cast::<Block<S>>();
        let (layout, _) = block_layout::<S>((*block).head.dims);
        core::ptr::drop_in_place(core::ptr::addr_of_mut!((*block).storage));
        alloc::alloc::dealloc(block.cast(), layout);
    }
}
