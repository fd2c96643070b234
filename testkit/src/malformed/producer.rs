//! The producer: a [`Case`] built as a real heap managed tensor with a counting deleter.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use dlport_core::layout::MAX_NDIM;

use super::{Case, Data};

/// 64 bytes, 64-byte aligned: the unit of the data buffer.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Chunk([u8; 64]);

/// The data buffer: 4 KiB, `data` at its middle.
const CHUNKS: usize = 64;
const MIDDLE: usize = CHUNKS * 64 / 2;

/// The producer's allocation: header first, so the header pointer is the block pointer.
#[repr(C)]
struct Block<H> {
    header: H,
    // Owned only to keep the memory the header points at alive until the deleter.
    _shape: Vec<i64>,
    _strides: Vec<i64>,
    _data: Vec<Chunk>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_versioned(p: *mut DLManagedTensorVersioned) {
    // SAFETY: `p` is the header of a `Box<Block<_>>` made by `Case::produce`; DLPack calls the
    // deleter once, and a second call is what the counter is there to catch (it would be a
    // double free, which Miri and the allocator report).
    let b = unsafe { Box::from_raw(p.cast::<Block<DLManagedTensorVersioned>>()) };
    b.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(p: *mut DLManagedTensor) {
    // SAFETY: as in `delete_versioned`, for the legacy block.
    let b = unsafe { Box::from_raw(p.cast::<Block<DLManagedTensor>>()) };
    b.deleted.fetch_add(1, Ordering::SeqCst);
}

/// How many times a produced tensor's deleter has run.
#[derive(Clone, Debug)]
pub struct Deleted(Arc<AtomicUsize>);

impl Deleted {
    /// The count so far.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A produced managed tensor. Until [`hand_over`](Self::hand_over) it is the producer's:
/// dropping it calls its deleter, as a producer that keeps its tensor would.
#[derive(Debug)]
pub struct Produced {
    ptr: *mut c_void,
    versioned: bool,
    data: *mut c_void,
    deleted: Deleted,
    owned: bool,
}

impl Produced {
    /// The managed tensor, of the form [`is_versioned`](Self::is_versioned) says.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }
    /// Whether it is a `DLManagedTensorVersioned` (else a legacy `DLManagedTensor`).
    pub fn is_versioned(&self) -> bool {
        self.versioned
    }
    /// `data` as the producer wrote it.
    pub fn data(&self) -> *mut c_void {
        self.data
    }
    /// The deleter's counter.
    pub fn deleted(&self) -> Deleted {
        self.deleted.clone()
    }
    /// The `DLTensor` inside the header (whatever the version says: this producer always lays
    /// the header out as 1.x, so a future major's fields are there to be not read).
    pub fn dl_tensor(&self) -> &DLTensor {
        if self.versioned {
            // SAFETY: a live block of ours (the deleter runs in `drop` at the earliest, which
            // needs `self`), never written after `produce`.
            unsafe { &(*self.ptr.cast::<DLManagedTensorVersioned>()).dl_tensor }
        } else {
            // SAFETY: as above, legacy.
            unsafe { &(*self.ptr.cast::<DLManagedTensor>()).dl_tensor }
        }
    }
    /// Hands the tensor over to a consumer, which must call its deleter once.
    pub fn hand_over(mut self) -> *mut c_void {
        self.owned = false;
        self.ptr
    }
}

impl Drop for Produced {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: still ours (never handed over), so nobody else has called the deleter.
        unsafe {
            if self.versioned {
                let p = self.ptr.cast::<DLManagedTensorVersioned>();
                ((*p).deleter.expect("a produced tensor has a deleter"))(p);
            } else {
                let p = self.ptr.cast::<DLManagedTensor>();
                ((*p).deleter.expect("a produced tensor has a deleter"))(p);
            }
        }
    }
}

impl Case {
    /// Builds the case as a producer would: one heap block holding the managed header (1.x
    /// layout, or legacy), `shape` and `strides` arrays long enough for any `ndim` up to
    /// `MAX_NDIM + 1` the case claims (a larger or negative one is refused before any array is
    /// read, which is the rule under test), and a 4 KiB data buffer.
    ///
    /// # Panics
    /// A legacy case with flags: a `DLManagedTensor` cannot carry them.
    pub fn produce(&self) -> Produced {
        assert!(
            self.version.is_some() || self.flags == 0,
            "{}: a legacy tensor has no flags",
            self.rule
        );
        let ndim = self.ndim_value();
        let room = usize::try_from(ndim).map_or(0, |n| n.min(MAX_NDIM + 1));
        let array = |values: &Option<Vec<i64>>| {
            values.as_ref().map(|v| {
                let mut a = v.clone();
                if a.len() < room {
                    a.resize(room, 1);
                }
                a
            })
        };
        let (mut shape, mut strides) = (array(&self.shape), array(&self.strides));
        let mut buffer = vec![Chunk([0; 64]); CHUNKS];
        // A NULL array stays NULL; an empty one (ndim 0) is a valid dangling pointer.
        let ptr_of =
            |a: &mut Option<Vec<i64>>| a.as_mut().map_or(std::ptr::null_mut(), Vec::as_mut_ptr);
        let data: *mut c_void = match self.data {
            Data::Null => std::ptr::null_mut(),
            Data::Buffer => buffer.as_mut_ptr().cast::<u8>().wrapping_add(MIDDLE).cast(),
            Data::Addr(a) => std::ptr::without_provenance_mut(a),
        };
        let dl_tensor = DLTensor {
            data,
            device: self.device,
            ndim,
            dtype: self.dtype,
            shape: ptr_of(&mut shape),
            strides: ptr_of(&mut strides),
            byte_offset: self.byte_offset,
        };
        let deleted = Arc::new(AtomicUsize::new(0));
        let (_shape, _strides, _data) = (
            shape.unwrap_or_default(),
            strides.unwrap_or_default(),
            buffer,
        );
        let ptr: *mut c_void = match self.version {
            Some(version) => Box::into_raw(Box::new(Block {
                header: DLManagedTensorVersioned {
                    version,
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(delete_versioned),
                    flags: self.flags,
                    dl_tensor,
                },
                _shape,
                _strides,
                _data,
                deleted: Arc::clone(&deleted),
            }))
            .cast(),
            None => Box::into_raw(Box::new(Block {
                header: DLManagedTensor {
                    dl_tensor,
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(delete_legacy),
                },
                _shape,
                _strides,
                _data,
                deleted: Arc::clone(&deleted),
            }))
            .cast(),
        };
        Produced {
            ptr,
            versioned: self.version.is_some(),
            data,
            deleted: Deleted(deleted),
            owned: true,
        }
    }
}
