//! [`Buffer`]: one range of memory on one device, with one atomic word counting the handles
//! onto it ([`SharedBuffer`]) and its uses (views and exported references), and the states of
//! its ownership: owned by storage, or released to a DLPack consumer.
//!
//! The memory is owned either by a backend allocation or by an imported DLPack tensor (whose
//! deleter runs when the last handle and use are gone: XLA's *view of external memory*). After
//! a release every use is refused with [`AccessError::BufferReleased`], never a dangling read.

use alloc::boxed::Box;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{self, Ordering};

use crate::device::Device;
use crate::error::{AccessError, Error};
use crate::storage::{ImportStorage, TensorStorage};

/// One range of memory on one device, with one atomic word counting the handles onto it and
/// its active users.
///
/// A buffer lives behind [`SharedBuffer`] handles (what a [`Tensor`](crate::Tensor) holds) and is read
/// through counted *uses* (a [`TensorView`](crate::TensorView), or a DLPack reference exported from a tensor).
/// Both are counted in one word, so taking a use (an export) and giving it back (the consumer's
/// deleter) are one atomic operation each, not one on the users' count and one on a reference
/// count beside it.
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
    Imported(ImportStorage),
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
    pub(crate) fn on_device(mut storage: Box<dyn TensorStorage>, device: Device) -> SharedBuffer {
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
    pub(crate) fn imported(
        import: ImportStorage,
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
    pub(crate) fn release(&self) -> Result<Box<dyn TensorStorage>, Error> {
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
    pub(crate) fn try_use(&self) -> Result<Use, Error> {
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
pub(crate) struct Use(NonNull<Buffer>);

// SAFETY: as `SharedBuffer`: a use only reads the buffer and counts atomically.
unsafe impl Send for Use {}
// SAFETY: as `SharedBuffer`.
unsafe impl Sync for Use {}

impl Use {
    pub(crate) fn buffer(&self) -> &Buffer {
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
