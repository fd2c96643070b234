//! [`TensorStorage`]: the memory behind a buffer or an export, its implementations for Rust's
//! owned buffers, and [`ImportStorage`], an imported tensor held as storage.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ffi::c_void;

use crate::access::Access;
use crate::device::Device;
use crate::dtype::Element;
use crate::managed::ManagedTensor;
use crate::view::TensorRef;

/// Memory that can back an exported tensor: a host buffer or a backend allocation.
///
/// # Safety
/// Implementors promise, for as long as the value lives (it is moved into the export and
/// dropped by the deleter):
/// - [`data_ptr`](Self::data_ptr) returns the same pointer (or opaque handle, on devices where
///   `data` is one) every time, and moving the value does not move the memory behind it;
/// - at least [`byte_len`](Self::byte_len) bytes are valid behind it on [`device`](Self::device);
/// - [`access`](Self::access) tells the truth: [`Access::Exclusive`] only if nothing else reads
///   or writes those bytes while the value lives (whoever holds the export may take `&mut`),
///   [`Access::ReadOnly`] if others may read them (nobody may write), [`Access::Shared`] if
///   others may read and write them.
pub unsafe trait TensorStorage: Send + 'static {
    /// The pointer or handle that becomes `data`. Called once, after the value is in its final
    /// place, with exclusive access.
    fn data_ptr(&mut self) -> *mut c_void;
    /// Bytes valid behind [`data_ptr`](Self::data_ptr).
    fn byte_len(&self) -> usize;
    /// Where the memory lives; host memory by default. It obeys [the rule of device
    /// ids](crate::Device#the-rule-of-device-ids): the builder refuses anything else with
    /// [`DispatchError::InvalidDevice`](crate::error::DispatchError::InvalidDevice).
    fn device(&self) -> Device {
        Device::cpu()
    }
    /// Who else may touch the memory (see [`Access`]). Exclusive by default; a read-only
    /// storage makes the export READ_ONLY whatever the builder says.
    fn access(&self) -> Access {
        Access::Exclusive
    }
}

// SAFETY: a Vec's heap buffer does not move when the Vec moves; `as_mut_ptr` from `&mut self`
// grants write access; len * size_of::<T>() bytes are initialised; the Vec is owned by the
// export alone, so nobody else touches the elements.
unsafe impl<T: Element> TensorStorage for Vec<T> {
    fn data_ptr(&mut self) -> *mut c_void {
        self.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        core::mem::size_of_val(self.as_slice())
    }
}

// SAFETY: as for Vec: a boxed slice's buffer does not move with the box, and it is owned alone.
unsafe impl<T: Element> TensorStorage for Box<[T]> {
    fn data_ptr(&mut self) -> *mut c_void {
        self.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        core::mem::size_of_val(&**self)
    }
}

// SAFETY: the Arc's slice does not move; other clones may read it concurrently, so the storage
// reports read-only and nobody gets write access through the export.
unsafe impl<T: Element> TensorStorage for Arc<[T]> {
    fn data_ptr(&mut self) -> *mut c_void {
        Arc::as_ptr(self) as *const T as *mut c_void
    }
    fn byte_len(&self) -> usize {
        core::mem::size_of_val(&**self)
    }
    fn access(&self) -> Access {
        Access::ReadOnly
    }
}

// SAFETY: forwards to the boxed storage, which upholds the contract itself.
unsafe impl TensorStorage for Box<dyn TensorStorage> {
    fn data_ptr(&mut self) -> *mut c_void {
        (**self).data_ptr()
    }
    fn byte_len(&self) -> usize {
        (**self).byte_len()
    }
    fn device(&self) -> Device {
        (**self).device()
    }
    fn access(&self) -> Access {
        (**self).access()
    }
}

/// An imported tensor held as storage: what keeps a foreign tensor's memory alive under a
/// buffer (a backend's view of external memory) or a re-export (legacy ↔ versioned, or with a
/// guard). Its producer's deleter runs when it drops.
pub(crate) struct ImportStorage(pub(crate) ManagedTensor);

impl ImportStorage {
    pub(crate) fn new(managed: ManagedTensor) -> Self {
        Self(managed)
    }

    /// Bytes from `data` to the end of the validated span of `view` (informational:
    /// re-exports reuse the validated layout).
    pub(crate) fn byte_len_of(view: &TensorRef<'_>) -> usize {
        let end = i128::from(view.byte_offset()) + i128::from(view.byte_span().hi);
        usize::try_from(end.max(0)).unwrap_or(usize::MAX)
    }
}

// SAFETY: `data_ptr` returns the imported tensor's own `data`, which its producer keeps valid
// until the inner deleter runs, i.e. until this value drops. The access is the import's own
// (read-only, shared or exclusive), so a re-export never promises more than its source.
unsafe impl TensorStorage for ImportStorage {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.view().data()
    }
    fn byte_len(&self) -> usize {
        Self::byte_len_of(&self.0.view())
    }
    fn device(&self) -> Device {
        self.0.view().device()
    }
    fn access(&self) -> Access {
        if self.0.is_read_only() {
            Access::ReadOnly
        } else {
            self.0.access()
        }
    }
}
