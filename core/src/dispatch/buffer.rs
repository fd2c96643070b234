//! Backend tensors: shared buffers with explicit ownership states, and the views and DLPack
//! references taken from them.
//!
//! A [`Buffer`] is one range of memory on one device, owned either by a backend allocation or
//! by an imported DLPack tensor (whose deleter runs when the last user drops it: XLA's *view of
//! external memory*). [`Tensor`]s are cheap handles (a [`SharedBuffer`] plus metadata) onto a buffer.
//! [`Tensor::acquire_external`] exports a DLPack tensor that holds a counted reference (XLA's
//! *external reference*); [`Tensor::release_ownership`] hands the memory itself to a consumer,
//! after which every handle's access returns [`AccessError::BufferReleased`], never a dangling
//! read.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{self, Ordering};

use crate::abi::{FLAG_IS_COPIED, FLAG_READ_ONLY};
use crate::device::Device;
use crate::dtype::{DataType, Element};
use crate::error::{AccessError, Error};
use crate::export::{self, Form, TensorStorage};
use crate::layout::{Contiguity, Layout};
use crate::managed::{Access, ManagedTensor};
use crate::tensor::TensorRef;

/// One range of memory on one device, with one atomic word counting the handles onto it and
/// its active users.
///
/// A buffer lives behind [`SharedBuffer`] handles (what a [`Tensor`] holds) and is read
/// through counted *uses* (a [`TensorView`], or a DLPack reference exported from a tensor).
/// Both are counted in one word, so taking a use (an export) and giving it back (the consumer's
/// deleter) are one atomic operation each, where a separate reference count (an `Arc`) beside
/// the users' count took two.
pub struct Buffer {
    ptr: *mut c_void,
    len: usize,
    device: Device,
    /// The `RELEASED` bit (the top one), the number of uses (the rest of the upper half) and of
    /// handles (the lower half). The buffer is freed by whoever takes the word to no handles and
    /// no uses.
    state: AtomicWord,
    /// What frees the memory. Touched only with exclusive access: when the buffer is freed, or
    /// by the one caller that set `RELEASED` while it saw no uses.
    owner: UnsafeCell<Option<Owner>>,
}

// The state word: 64 bits where the target has 64-bit atomics (every target dlport ships for:
// x86_64, aarch64, wasm32), else 32 (thumbv7em and other small targets), with lower limits.
// `--cfg dlport_word32` picks the 32-bit word anywhere, so that the host's tests check it.
#[cfg(all(target_has_atomic = "64", not(dlport_word32)))]
type Word = u64;
#[cfg(all(target_has_atomic = "64", not(dlport_word32)))]
type AtomicWord = core::sync::atomic::AtomicU64;
#[cfg(any(not(target_has_atomic = "64"), dlport_word32))]
type Word = u32;
#[cfg(any(not(target_has_atomic = "64"), dlport_word32))]
type AtomicWord = core::sync::atomic::AtomicU32;

/// Set once the memory was released to a DLPack consumer; never cleared.
const RELEASED: Word = 1 << (Word::BITS - 1);
/// One use (a view or an exported reference).
const USE: Word = 1 << (Word::BITS / 2);
/// One handle (a [`SharedBuffer`]).
const HANDLE: Word = 1;
/// The uses field.
const USES: Word = !RELEASED & !(USE - 1);
/// The handles field.
const HANDLES: Word = USE - 1;
/// Counts refused before a field could carry into the next one (2^30 uses and 2^31 handles in
/// a 64-bit word, 2^14 and 2^15 in a 32-bit one): beyond any real program (each export
/// allocates a block; a view borrows its tensor), reachable only by leaking uses or handles on
/// purpose, which then panics (as `Arc` aborts) instead of corrupting the count.
const MAX_USES: Word = 1 << (Word::BITS / 2 - 2);
const MAX_HANDLES: Word = 1 << (Word::BITS / 2 - 1);

/// What keeps a buffer's memory alive: an imported DLPack tensor, held inline (an import
/// allocates only the buffer itself), or any other storage.
enum Owner {
    /// An import: its deleter runs when the buffer drops.
    Imported(export::Reexport),
    /// Memory a backend allocated or a Rust value the tensor wraps.
    Storage(Box<dyn TensorStorage>),
}

// SAFETY: `ptr` is only handed out under a counted borrow; `owner` is accessed exclusively (see
// the field's comment); the owner itself is `Send`, and DLPack lets deleters run on any thread.
unsafe impl Send for Buffer {}
// SAFETY: shared access only reads immutable fields and uses atomics.
unsafe impl Sync for Buffer {}

impl core::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Buffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("device", &self.device)
            .field("released", &self.is_released())
            .field("users", &self.users())
            .finish()
    }
}

impl Buffer {
    /// Wraps owned storage. Its pointer is taken once, here. A buffer only ever exists behind
    /// its counted handles, so it is made as one (as `Arc::new` makes an `Arc`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(storage: Box<dyn TensorStorage>) -> SharedBuffer {
        let device = storage.device();
        Self::on_device(storage, device)
    }

    /// Wraps owned storage whose memory is of a more specific class than the storage says (an
    /// import whose capsule says `cpu` while the producer advertised pinned memory): the one
    /// device every query, describe and export then reports.
    fn on_device(mut storage: Box<dyn TensorStorage>, device: Device) -> SharedBuffer {
        let ptr = storage.data_ptr();
        SharedBuffer::new(Self {
            ptr,
            len: storage.byte_len(),
            device,
            state: AtomicWord::new(HANDLE),
            owner: UnsafeCell::new(Some(Owner::Storage(storage))),
        })
    }

    /// Wraps an imported tensor whose data pointer and length are `ptr` and `len` (see
    /// [`on_device`](Self::on_device) for `device`).
    fn imported(
        import: export::Reexport,
        ptr: *mut c_void,
        len: usize,
        device: Device,
    ) -> SharedBuffer {
        SharedBuffer::new(Self {
            ptr,
            len,
            device,
            state: AtomicWord::new(HANDLE),
            owner: UnsafeCell::new(Some(Owner::Imported(import))),
        })
    }

    /// The base pointer or handle.
    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// Bytes behind [`ptr`](Self::ptr).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device of the memory.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether the memory was released to a DLPack consumer.
    pub fn is_released(&self) -> bool {
        self.state.load(Ordering::Acquire) & RELEASED != 0
    }

    /// Active users: read guards and outstanding DLPack references.
    pub fn users(&self) -> usize {
        ((self.state.load(Ordering::Acquire) & USES) / USE) as usize
    }

    /// Handles onto the buffer (tensors sharing it).
    pub fn handles(&self) -> usize {
        (self.state.load(Ordering::Acquire) & HANDLES) as usize
    }

    /// Moves the owner out, marking the buffer released. Fails if anyone uses it.
    fn release(&self) -> Result<Box<dyn TensorStorage>, Error> {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & RELEASED != 0 {
                return Err(Error::Access(AccessError::BufferReleased));
            }
            if s & USES != 0 {
                return Err(Error::Access(AccessError::BufferInUse {
                    users: ((s & USES) / USE) as usize,
                }));
            }
            // Other handles may come and go meanwhile (they only read the immutable fields):
            // the exchange succeeds only if no use began.
            match self.state.compare_exchange_weak(
                s,
                s | RELEASED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        // SAFETY: we set RELEASED while no use existed, so no other thread can start using the
        // buffer or release it again; it cannot be freed while `&self` (a handle) exists.
        match unsafe { (*self.owner.get()).take() } {
            Some(Owner::Storage(storage)) => Ok(storage),
            Some(Owner::Imported(import)) => Ok(Box::new(import)),
            None => Err(Error::Access(AccessError::BufferReleased)),
        }
    }
}

/// A handle onto a [`Buffer`], counted in its state word; it dereferences to the buffer.
/// Cloning is one atomic increment. The memory is freed (or an imported tensor's deleter
/// called) when the last handle and the last use are gone.
pub struct SharedBuffer(NonNull<Buffer>);

// SAFETY: a handle only reads the buffer (which is `Send + Sync`) and counts atomically; the
// buffer is freed by whichever thread drops the last handle or use, which `Buffer: Send` allows.
unsafe impl Send for SharedBuffer {}
// SAFETY: shared handles only read the buffer (`Sync`); cloning counts atomically.
unsafe impl Sync for SharedBuffer {}

impl SharedBuffer {
    fn new(buffer: Buffer) -> Self {
        Self(NonNull::from(Box::leak(Box::new(buffer))))
    }

    /// Takes a counted use of the buffer: while it lives, the memory cannot be released.
    fn try_use(&self) -> Result<Use, Error> {
        let before = self.state.fetch_add(USE, Ordering::Acquire);
        if before & RELEASED != 0 || before & USES >= MAX_USES * USE {
            // Undone: this handle keeps the count above zero, so nothing is freed here.
            self.state.fetch_sub(USE, Ordering::Relaxed);
            if before & RELEASED != 0 {
                return Err(Error::Access(AccessError::BufferReleased));
            }
            panic!("more than {MAX_USES} uses of one buffer: views or exports are being leaked");
        }
        Ok(Use(self.0))
    }
}

impl core::ops::Deref for SharedBuffer {
    type Target = Buffer;

    fn deref(&self) -> &Buffer {
        // SAFETY: this handle is counted in the buffer's state, so the buffer is not freed
        // while it lives.
        unsafe { self.0.as_ref() }
    }
}

impl Clone for SharedBuffer {
    fn clone(&self) -> Self {
        let before = self.state.fetch_add(HANDLE, Ordering::Relaxed);
        if before & HANDLES >= MAX_HANDLES {
            // Undone: `self` keeps the count above zero.
            self.state.fetch_sub(HANDLE, Ordering::Relaxed);
            panic!("more than {MAX_HANDLES} handles onto one buffer: tensors are being leaked");
        }
        Self(self.0)
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        // The only handle and no use: nobody else can reach the word (a new use or handle is
        // only made through a handle), so no atomic exchange is needed. The acquire load
        // synchronises with the release of every earlier use and handle.
        let only = self.state.load(Ordering::Acquire) & !RELEASED == HANDLE;
        // SAFETY: counted in the state word (this handle); `only` means nothing else is.
        if only || unsafe { drop_count(self.0, HANDLE) } {
            // SAFETY: no handle and no use is left, so nothing can reach the buffer again.
            unsafe { free(self.0) };
        }
    }
}

impl core::fmt::Debug for SharedBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&**self, f)
    }
}

/// Takes `one` (a handle or a use) off the buffer's count; true if it was the last of both.
///
/// # Safety
/// `buffer` is live and `one` of its counts belongs to the caller, who gives it up here.
unsafe fn drop_count(buffer: NonNull<Buffer>, one: Word) -> bool {
    // SAFETY: live while the caller's count is held (contract).
    let state = unsafe { &buffer.as_ref().state };
    if state.fetch_sub(one, Ordering::Release) & !RELEASED != one {
        return false;
    }
    // Every other handle and use gave up its count with release ordering: whatever they did
    // with the buffer happens before it is freed.
    atomic::fence(Ordering::Acquire);
    true
}

/// Frees a buffer, running its owner's drop (the memory's release or an import's deleter).
///
/// # Safety
/// `buffer` came from [`SharedBuffer::new`], and no handle or use of it is left.
unsafe fn free(buffer: NonNull<Buffer>) {
    // SAFETY: boxed by `SharedBuffer::new` and reachable from nothing else any more (contract),
    // so dropped once: its owner's drop runs the memory's release or the import's deleter, and
    // the box's memory is freed also when that drop unwinds.
    drop(unsafe { Box::from_raw(buffer.as_ptr()) });
}

/// A counted use of a buffer: while it lives, the memory cannot be released, nor freed.
struct Use(NonNull<Buffer>);

// SAFETY: as `SharedBuffer`: a use only reads the buffer and counts atomically.
unsafe impl Send for Use {}
// SAFETY: as `SharedBuffer`.
unsafe impl Sync for Use {}

impl Use {
    fn buffer(&self) -> &Buffer {
        // SAFETY: this use is counted in the buffer's state, so it is not freed while it lives.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for Use {
    fn drop(&mut self) {
        // SAFETY: this use is counted in the buffer's state; it is given up here.
        if unsafe { drop_count(self.0, USE) } {
            // SAFETY: that was the last handle or use.
            unsafe { free(self.0) };
        }
    }
}

/// A tensor's `shape` followed by its `strides`: inline up to [`Dims::INLINE`] dimensions, so
/// that an import allocates nothing for them; shared beyond (a clone stays cheap). Not
/// `export::Dims`, the export builder's scratch (8 inline, boxed beyond): these travel with
/// every handle and every clone, so they stay small inline and are shared, not copied, beyond.
#[derive(Clone)]
enum Dims {
    Inline {
        ndim: u8,
        buf: [i64; 2 * Dims::INLINE],
    },
    Shared(Arc<[i64]>),
}

impl Dims {
    /// Dimensions kept inline: the tensors most programs exchange (up to 4-d, NCHW) fit.
    const INLINE: usize = 4;

    /// From a checked shape and its strides (as many).
    fn new(shape: &[i64], strides: impl ExactSizeIterator<Item = i64>) -> Self {
        let ndim = shape.len();
        if ndim <= Self::INLINE {
            let mut buf = [0; 2 * Self::INLINE];
            // A fixed number of guarded stores: a copy of a length known only at run time is a
            // call to `memcpy`, dearer than the one to four stores it makes here.
            for (i, to) in buf[..Self::INLINE].iter_mut().enumerate() {
                if let Some(&extent) = shape.get(i) {
                    *to = extent;
                }
            }
            for (to, from) in buf[ndim..2 * ndim].iter_mut().zip(strides) {
                *to = from;
            }
            Self::Inline {
                ndim: ndim as u8,
                buf,
            }
        } else {
            Self::Shared(shape.iter().copied().chain(strides).collect())
        }
    }

    /// `shape` then `strides`.
    fn all(&self) -> &[i64] {
        match self {
            Self::Inline { ndim, buf } => &buf[..2 * usize::from(*ndim)],
            Self::Shared(all) => all,
        }
    }

    fn shape(&self) -> &[i64] {
        let all = self.all();
        &all[..all.len() / 2]
    }

    fn strides(&self) -> &[i64] {
        let all = self.all();
        &all[all.len() / 2..]
    }
}

/// A backend's tensor: a handle onto a [`Buffer`] plus shape, strides, dtype and offset.
///
/// Cloning is cheap and shares the buffer. The memory is freed (or the DLPack deleter of an
/// imported tensor called) when the last handle and the last DLPack reference are gone.
#[derive(Clone)]
pub struct Tensor {
    buffer: SharedBuffer,
    backend: &'static str,
    dtype: DataType,
    dims: Dims,
    byte_offset: u64,
    flags: u64,
    layout: Layout,
    device: Device,
}

impl core::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tensor")
            .field("backend", &self.backend)
            .field("device", &self.device)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("byte_offset", &self.byte_offset)
            .field("flags", &self.flags)
            .finish()
    }
}

impl Tensor {
    /// A tensor over `buffer`, checked against the buffer's size: `byte_offset + span` must lie
    /// inside it. `device` is the device as the backend numbers it (usually the buffer's).
    pub fn new(
        buffer: SharedBuffer,
        backend: &'static str,
        dtype: DataType,
        shape: &[i64],
        strides: Option<&[i64]>,
        byte_offset: u64,
        flags: u64,
    ) -> Result<Self, Error> {
        let (dims, layout) = export::checked_dims(
            dtype,
            shape,
            strides,
            byte_offset,
            flags,
            buffer.len() as u64,
        )?;
        let device = buffer.device();
        Ok(Self {
            buffer,
            backend,
            dtype,
            dims: Dims::new(dims.shape(), dims.strides().iter().copied()),
            byte_offset,
            flags,
            layout,
            device,
        })
    }

    /// A compact row-major CPU tensor over `data`, without a copy (the CPU backend's tensor;
    /// the vector is freed when the last handle and the last DLPack reference are gone).
    /// `shape` must fit in `data`
    /// ([`LayoutError::DataTooShort`](crate::LayoutError::DataTooShort) otherwise, counted in
    /// elements).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Self, Error> {
        Self::new(
            Buffer::new(Box::new(data)),
            "cpu",
            T::DTYPE,
            shape,
            None,
            0,
            0,
        )
        .map_err(|e| export::in_elements(e, size_of::<T>()))
    }

    /// Imports a DLPack tensor as a view of its memory (no copy). The DLPack deleter runs when
    /// the last handle onto the view, and the last reference re-exported from it, are dropped.
    ///
    /// `memory` is where the memory really is: the capsule's device, or the more specific
    /// host-accessible class the producer advertised (see
    /// [`reconcile_device`](crate::dispatch::reconcile_device)); anything that contradicts the
    /// capsule is refused with [`DispatchError::DeviceMismatch`] (and the tensor released). It
    /// becomes the buffer's device, the one source of truth for describe, device queries and
    /// export. `device` is the tensor's device as the holding backend numbers it (usually
    /// `memory`; a backend with its own device ids translates it).
    pub(crate) fn from_external(
        managed: ManagedTensor,
        backend: &'static str,
        memory: Device,
        device: Device,
    ) -> Result<Self, Error> {
        // Everything is read from one view: the tensor was validated when `managed` was made.
        let view = managed.view();
        let memory = crate::dispatch::reconcile_device(view.device(), Some(memory))?;
        // Read-only memory stays read-only in every later export, also when the import's own
        // form could not say so (a legacy wrapper of read-only storage).
        let read_only = if managed.is_read_only() {
            FLAG_READ_ONLY
        } else {
            0
        };
        let (dtype, byte_offset, flags, layout) = (
            view.dtype(),
            view.byte_offset(),
            view.flags() | read_only,
            view.layout(),
        );
        let dims = Dims::new(view.shape(), view.strides());
        let (ptr, len) = (view.data(), export::Reexport::byte_len_of(&view));
        let buffer = Buffer::imported(export::Reexport::new(managed), ptr, len, memory);
        Ok(Self {
            buffer,
            backend,
            dtype,
            dims,
            byte_offset,
            flags,
            layout,
            device,
        })
    }

    /// The name of the backend that holds it.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The buffer.
    pub fn buffer(&self) -> &SharedBuffer {
        &self.buffer
    }

    /// The device, as the holding backend numbers it.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The same tensor with its device renumbered (after a device-id translation).
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Extents.
    pub fn shape(&self) -> &[i64] {
        self.dims.shape()
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[i64] {
        self.dims.strides()
    }

    /// Bytes from the buffer's start to the first element.
    pub fn byte_offset(&self) -> u64 {
        self.byte_offset
    }

    /// Flags (READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED).
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// The tensor is a copy made for this import or export.
    pub fn is_copied(&self) -> bool {
        self.flags & FLAG_IS_COPIED != 0
    }

    /// The producer forbade writes.
    pub fn is_read_only(&self) -> bool {
        self.flags & FLAG_READ_ONLY != 0
    }

    /// The same tensor with IS_COPIED set or cleared.
    pub fn with_copied(mut self, copied: bool) -> Self {
        if copied {
            self.flags |= FLAG_IS_COPIED
        } else {
            self.flags &= !FLAG_IS_COPIED
        }
        self
    }

    /// Layout summary.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// C / F / permuted / strided.
    pub fn contiguity(&self) -> Contiguity {
        self.layout.contiguity
    }

    /// Address of the first element for host-accessible memory (`None` for device memory or a
    /// released buffer).
    pub fn first_element_address(&self) -> Option<usize> {
        if !self.buffer.device.is_host_accessible() || self.buffer.is_released() {
            return None;
        }
        Some((self.buffer.ptr as usize).wrapping_add(self.byte_offset as usize))
    }

    /// A validated view of the tensor, like [`ManagedTensor::view`]: shape, strides, dtype,
    /// and typed access (`as_slice`, `to_vec`) where the host can read the memory. The view
    /// holds a counted use of the buffer, so the memory cannot be released to a consumer while
    /// it lives. Fails with [`AccessError::BufferReleased`] once it was.
    pub fn view(&self) -> Result<TensorView<'_>, Error> {
        let guard = self.buffer.try_use()?;
        // SAFETY: the tensor's layout was validated against the buffer (or came from a
        // validated import), and the counted use held by the returned value keeps the buffer
        // unreleased and alive for as long as the view (which borrows `self`) lives.
        let view = unsafe {
            TensorRef::from_parts(
                self.buffer.ptr,
                self.buffer.device,
                self.dtype,
                self.byte_offset,
                self.dims.shape(),
                self.dims.strides(),
                self.flags,
                self.layout,
            )
        };
        Ok(TensorView { view, _use: guard })
    }

    /// Copies the elements out in row-major order (host-accessible memory only).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        self.view()?.to_vec()
    }

    /// Exports a DLPack tensor that keeps the buffer alive by a counted reference (XLA's
    /// external reference). The buffer cannot be released while it exists. `form` picks a
    /// versioned (1.3) or legacy struct. `device` is the DLPack device to write (after any
    /// device-id translation by the backend).
    pub(crate) fn acquire_external(
        &self,
        versioned: bool,
        device: Device,
    ) -> Result<ManagedTensor, Error> {
        let guard = self.buffer.try_use()?;
        self.export(ExternalRef { guard }, versioned, device)
    }

    /// Hands the memory itself to a DLPack consumer. Afterwards every handle onto this buffer
    /// gets [`AccessError::BufferReleased`]. Fails with [`AccessError::BufferInUse`] while views or
    /// external references exist.
    pub(crate) fn release_ownership(
        &self,
        versioned: bool,
        device: Device,
    ) -> Result<ManagedTensor, Error> {
        let owner = self.buffer.release()?;
        self.export(owner, versioned, device)
    }

    /// Wraps `storage` (which keeps the memory alive) in a DLPack tensor with this metadata.
    fn export(
        &self,
        storage: impl TensorStorage,
        versioned: bool,
        device: Device,
    ) -> Result<ManagedTensor, Error> {
        let form = if versioned {
            Form::Versioned
        } else {
            Form::Legacy
        };
        if form == Form::Legacy {
            export::legacy_representable(self.flags)?;
        }
        let access = storage.access();
        let raw = export::assemble(storage, self.parts(device), form);
        #[cfg(debug_assertions)]
        {
            // SAFETY: a fresh, owned export; ownership is given back below (a failure would
            // have released it, and the assertion then stops here).
            let checked = unsafe { ManagedTensor::from_raw(raw) };
            let same = checked
                .as_ref()
                .ok()
                .map(|m| m.view().layout() == self.layout);
            let _ = checked.map(ManagedTensor::into_raw);
            debug_assert_eq!(
                same,
                Some(true),
                "a held tensor's export validates to its layout"
            );
        }
        // SAFETY: a fresh, owned block built by `export::assemble` from this tensor's metadata,
        // which was validated against its buffer (or came from a validated import) with this
        // layout: the same fields validate to the same layout as DLPack 1.3 (versioned, with
        // these flags) or legacy (`legacy_representable` refused the flags legacy cannot
        // carry, the only ones that change a layout); the data pointer and offset are the
        // buffer's, already checked. Nobody else holds it.
        Ok(unsafe { ManagedTensor::from_raw_validated(raw, self.layout, access) })
    }

    fn parts(&self, device: Device) -> export::Parts<'_> {
        export::Parts {
            device,
            dtype: self.dtype,
            byte_offset: self.byte_offset,
            flags: self.flags,
            dims: self.dims.all(),
        }
    }
}

/// A validated view of a [`Tensor`] that keeps its memory from being released while it lives;
/// it dereferences to [`TensorRef`].
pub struct TensorView<'a> {
    view: TensorRef<'a>,
    _use: Use,
}

impl<'a> core::ops::Deref for TensorView<'a> {
    type Target = TensorRef<'a>;

    fn deref(&self) -> &TensorRef<'a> {
        &self.view
    }
}

impl core::fmt::Debug for TensorView<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.view, f)
    }
}

/// The storage of an external reference: holds a counted use of the buffer.
struct ExternalRef {
    guard: Use,
}

// SAFETY: the counted use keeps the buffer alive and unreleased for as long as this value
// lives; the pointer and length are the buffer's, fixed at its creation.
unsafe impl TensorStorage for ExternalRef {
    fn data_ptr(&mut self) -> *mut c_void {
        self.guard.buffer().ptr
    }
    fn byte_len(&self) -> usize {
        self.guard.buffer().len
    }
    fn device(&self) -> Device {
        self.guard.buffer().device
    }
    fn access(&self) -> Access {
        // The tensor's other handles, and other external references, keep reading (and their
        // consumers writing) the same bytes: never exclusive.
        Access::Shared
    }
}
