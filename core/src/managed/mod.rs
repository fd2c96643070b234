//! [`ManagedTensor`]: the one owner of an imported `DLManagedTensorVersioned` or legacy
//! `DLManagedTensor`.
//!
//! Ownership is taken the moment a non-NULL pointer is handed over: from then on every path
//! (success and drop, any validation error, a wrong major version) calls the deleter exactly
//! once, unless [`ManagedTensor::into_raw`] hands ownership back.

use core::ptr::NonNull;

#[cfg(feature = "alloc")]
mod convert;

use crate::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLPackVersion, DLTensor,
    FLAG_IS_COPIED, FLAG_READ_ONLY, RawManaged,
};
use crate::access::Access;
use crate::dtype::Element;
use crate::error::{AccessError, Error, LayoutError};
use crate::layout::Layout;
use crate::view::TensorRef;

// The pointer's release and its validation without ownership: the owner's rules, applied here.
impl RawManaged {
    /// Calls the deleter (if any) of the pointed-to tensor.
    ///
    /// # Safety
    /// The pointer must be an owned, not-yet-released managed tensor whose version field (for
    /// the versioned form) and deleter field are readable; afterwards it must not be used.
    #[inline]
    pub unsafe fn release(self) {
        match self {
            Self::Versioned(ptr) => {
                // SAFETY: the caller owns a live tensor; `deleter` sits in the part of the
                // struct that DLPack keeps stable across versions.
                if let Some(deleter) = unsafe { (*ptr.as_ptr()).deleter } {
                    // SAFETY: the deleter is called once, with the pointer it belongs to.
                    unsafe { deleter(ptr.as_ptr()) }
                }
            }
            Self::Legacy(ptr) => {
                // SAFETY: as above, for the legacy layout.
                if let Some(deleter) = unsafe { (*ptr.as_ptr()).deleter } {
                    // SAFETY: the deleter is called once, with the pointer it belongs to.
                    unsafe { deleter(ptr.as_ptr()) }
                }
            }
        }
    }

    /// Validates the pointed-to managed tensor without taking ownership: the rules
    /// [`ManagedTensor::from_raw`] applies (for the versioned form the major version first,
    /// reading nothing past `flags` for another one; then every layout rule), returning the
    /// borrowed view. Nothing is released on any path: the tensor stays the caller's, so a
    /// caller that keeps the tensor when it refuses it (as the exchange API's
    /// `managed_tensor_to_py_object_no_sync` does) checks here before it takes ownership.
    ///
    /// # Safety
    /// As [`ManagedTensor::from_raw`] for the form, except that ownership is not handed over:
    /// the header (version and flags for the versioned form) is readable, and for a tensor of
    /// major version 1 or a legacy one the `dl_tensor` satisfies [`TensorRef::from_raw`]'s
    /// contract for all of `'a`.
    pub unsafe fn validate<'a>(self) -> Result<TensorRef<'a>, Error> {
        match self {
            Self::Versioned(ptr) => {
                let ptr = ptr.as_ptr();
                // SAFETY: the stable header is readable (contract).
                let (version, flags) = unsafe { ((*ptr).version, (*ptr).flags) };
                crate::layout::check_version(version)?;
                // SAFETY: major version 1, so the DLTensor follows at its 1.x offset and
                // satisfies TensorRef::from_raw's contract for 'a (contract).
                unsafe { TensorRef::from_raw(&(*ptr).dl_tensor, Some(version), flags) }
            }
            // SAFETY: a readable legacy tensor whose DLTensor satisfies TensorRef::from_raw's
            // contract for 'a (contract).
            Self::Legacy(ptr) => unsafe {
                TensorRef::from_raw(&(*ptr.as_ptr()).dl_tensor, None, 0)
            },
        }
    }
}

/// The layout of a legacy tensor by the full rules, naming the exact error.
///
/// # Safety
/// As [`ManagedTensor::from_raw_legacy`].
#[cold]
#[inline(never)]
unsafe fn legacy_slow(ptr: NonNull<DLManagedTensor>) -> Result<Layout, Error> {
    // SAFETY: forwarded contract.
    Ok(unsafe { TensorRef::from_raw(&(*ptr.as_ptr()).dl_tensor, None, 0) }?.layout())
}

#[cold]
#[inline(never)]
fn null_managed_tensor() -> Error {
    Error::Layout(LayoutError::NullManagedTensor)
}

/// Calls the deleter when dropped: the guard held from the moment ownership is taken.
struct Releaser(RawManaged);

impl Drop for Releaser {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a Releaser is only built from an owned, unreleased pointer (the `from_raw_*`
        // contracts) and is dropped at most once; `into_raw` forgets it instead.
        unsafe { self.0.release() }
    }
}

/// The owner of an imported DLPack tensor, legacy or versioned.
///
/// Validated once on construction; [`view`](Self::view) then hands out [`TensorRef`]s without
/// further checks. Dropping it calls the producer's deleter exactly once (a NULL deleter is
/// legal and means nothing to call). It is `Send`: DLPack lets the deleter run on any thread.
///
/// # Examples
///
/// ```
/// use dlport_core::{ExportBuilder, ManagedTensor};
///
/// let exported = ExportBuilder::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).build()?;
/// let raw = exported.into_raw(); // hand this pointer to any DLPack consumer …
/// // … or take it back:
/// let imported = unsafe { ManagedTensor::from_raw(raw) }?;
/// assert_eq!(imported.view().as_slice::<f32>()?, &[1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), dlport_core::Error>(())
/// ```
pub struct ManagedTensor {
    owner: Releaser,
    layout: Layout,
    access: Access,
    /// dlport built this tensor's block itself (an export or a re-export, see
    /// `export::block`): a legacy one can become versioned in place.
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    own_block: bool,
    // The version and the flags are read from the header when asked: they cannot change while
    // we own the tensor (the `from_raw_*` contracts), and an owner three words smaller is
    // cheaper to return from every import.
}

impl core::fmt::Debug for ManagedTensor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ManagedTensor")
            .field("owner", &self.owner)
            .field("layout", &self.layout)
            .field("version", &self.version())
            .field("flags", &self.flags())
            .field("access", &self.access)
            .finish()
    }
}

impl core::fmt::Debug for Releaser {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

// SAFETY: DLPack states the deleter may be called from any thread, and the owner gives out
// only shared views through `&self` and exclusive access through `&mut self`.
unsafe impl Send for ManagedTensor {}
// SAFETY: `&ManagedTensor` only reads immutable metadata and hands out read-only views.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
    /// Takes ownership of a `DLManagedTensorVersioned` and validates it.
    ///
    /// A major version other than 1 releases the tensor and returns
    /// [`LayoutError::UnsupportedVersion`] without reading any field past `flags`. Every other
    /// error also releases it. A NULL pointer returns [`LayoutError::NullManagedTensor`].
    ///
    /// # Safety
    /// `ptr` is NULL or a managed tensor the caller owns and hands over (nobody else calls its
    /// deleter); its version, deleter and flags are readable; if the major version is 1, the
    /// whole struct follows the DLPack 1.x layout and satisfies [`TensorRef::from_raw`]'s
    /// contract until the deleter runs.
    #[inline]
    pub unsafe fn from_raw_versioned(ptr: *mut DLManagedTensorVersioned) -> Result<Self, Error> {
        let Some(ptr) = NonNull::new(ptr) else {
            return Err(null_managed_tensor());
        };
        let owner = Releaser(RawManaged::Versioned(ptr));
        // SAFETY: the caller guarantees the stable header is readable.
        let (version, flags) = unsafe { ((*ptr.as_ptr()).version, (*ptr.as_ptr()).flags) };
        if version.major == DLPACK_MAJOR_VERSION {
            // SAFETY: major version 1, so the DLTensor follows at its 1.x offset; the caller
            // guarantees it satisfies TensorRef::from_raw's contract while we own it.
            let fast =
                unsafe { TensorRef::layout_fast(&(*ptr.as_ptr()).dl_tensor, Some(version), flags) };
            if let Some(layout) = fast {
                return Ok(Self {
                    owner,
                    layout,
                    access: Access::from_flags(flags),
                    own_block: false,
                });
            }
        }
        // SAFETY: forwarded contract.
        unsafe { Self::versioned_slow(owner, version, flags) }
    }

    /// The rest of [`from_raw_versioned`](Self::from_raw_versioned): every rule one by one,
    /// naming the exact error (the owner releases the tensor on every error).
    ///
    /// # Safety
    /// `owner` holds a versioned tensor under `from_raw_versioned`'s contract, whose header
    /// says `version` and `flags`.
    #[cold]
    #[inline(never)]
    unsafe fn versioned_slow(
        owner: Releaser,
        version: DLPackVersion,
        flags: u64,
    ) -> Result<Self, Error> {
        let RawManaged::Versioned(ptr) = owner.0 else {
            unreachable!("versioned_slow takes a versioned owner")
        };
        crate::layout::check_version(version)?;
        // SAFETY: major version 1, so the DLTensor follows at its 1.x offset; the caller
        // guarantees it satisfies TensorRef::from_raw's contract while we own it.
        let layout =
            unsafe { TensorRef::from_raw(&(*ptr.as_ptr()).dl_tensor, Some(version), flags) }?
                .layout();
        Ok(Self {
            owner,
            layout,
            access: Access::from_flags(flags),
            own_block: false,
        })
    }

    /// Takes ownership of a legacy `DLManagedTensor` and validates it. Every error releases it.
    ///
    /// # Safety
    /// `ptr` is NULL or a legacy managed tensor the caller owns and hands over, readable, whose
    /// `dl_tensor` satisfies [`TensorRef::from_raw`]'s contract until the deleter runs.
    #[inline]
    pub unsafe fn from_raw_legacy(ptr: *mut DLManagedTensor) -> Result<Self, Error> {
        let Some(ptr) = NonNull::new(ptr) else {
            return Err(null_managed_tensor());
        };
        let owner = Releaser(RawManaged::Legacy(ptr));
        // SAFETY: the caller guarantees the struct is readable and the tensor valid.
        let layout = match unsafe { TensorRef::layout_fast(&(*ptr.as_ptr()).dl_tensor, None, 0) } {
            Some(layout) => layout,
            // SAFETY: as above.
            None => unsafe { legacy_slow(ptr) }?,
        };
        Ok(Self {
            owner,
            layout,
            // A legacy tensor carries no flags, so nothing proves exclusivity.
            access: Access::Shared,
            own_block: false,
        })
    }

    /// Wraps a tensor this crate just built and validated.
    ///
    /// # Safety
    /// `raw` is owned, is the header of a block built by `export::block::NewBlock`, and its
    /// fields passed
    /// [`layout::validate`](crate::layout::validate) with the result `layout` (version 1.3 and
    /// its flags for the versioned form, legacy otherwise); `access` is what its storage
    /// guarantees.
    #[cfg(feature = "alloc")]
    pub(crate) unsafe fn from_raw_validated(
        raw: RawManaged,
        layout: Layout,
        access: Access,
    ) -> Self {
        let flags = match raw {
            // SAFETY: a live tensor (contract).
            RawManaged::Versioned(p) => unsafe { (*p.as_ptr()).flags },
            RawManaged::Legacy(_) => 0,
        };
        let access = if flags & FLAG_READ_ONLY != 0 {
            Access::ReadOnly
        } else {
            access
        };
        Self {
            owner: Releaser(raw),
            layout,
            access,
            own_block: true,
        }
    }

    /// Takes ownership of either form.
    ///
    /// # Safety
    /// As [`from_raw_versioned`](Self::from_raw_versioned) or
    /// [`from_raw_legacy`](Self::from_raw_legacy), by form.
    pub unsafe fn from_raw(raw: RawManaged) -> Result<Self, Error> {
        match raw {
            // SAFETY: forwarded contract.
            RawManaged::Versioned(p) => unsafe { Self::from_raw_versioned(p.as_ptr()) },
            // SAFETY: forwarded contract.
            RawManaged::Legacy(p) => unsafe { Self::from_raw_legacy(p.as_ptr()) },
        }
    }

    /// Whether dlport built this tensor's block itself (see `export::block`).
    #[cfg(feature = "alloc")]
    pub(crate) fn is_own_block(&self) -> bool {
        self.own_block
    }

    /// The same tensor, owned as `raw` (its header rewritten in place by the caller).
    #[cfg(feature = "alloc")]
    pub(crate) fn with_raw(self, raw: RawManaged) -> Self {
        let (layout, access, own_block) = (self.layout, self.access, self.own_block);
        core::mem::forget(self);
        Self {
            owner: Releaser(raw),
            layout,
            access,
            own_block,
        }
    }

    /// Gives ownership back without calling the deleter: the caller must release the pointer
    /// (or hand it to a consumer that will).
    pub fn into_raw(self) -> RawManaged {
        let raw = self.owner.0;
        core::mem::forget(self);
        raw
    }

    /// The raw pointer, still owned by `self`.
    pub fn as_raw(&self) -> RawManaged {
        self.owner.0
    }

    #[inline]
    pub(crate) fn dl_tensor(&self) -> &DLTensor {
        match self.owner.0 {
            // SAFETY: we own the tensor until drop; it was readable at construction and DLPack
            // producers do not change it while a consumer holds it.
            RawManaged::Versioned(p) => unsafe { &(*p.as_ptr()).dl_tensor },
            // SAFETY: as above.
            RawManaged::Legacy(p) => unsafe { &(*p.as_ptr()).dl_tensor },
        }
    }

    /// A validated view; no checks are repeated.
    #[inline]
    pub fn view(&self) -> TensorRef<'_> {
        let tensor = self.dl_tensor();
        // SAFETY: the same tensor passed TensorRef::from_raw at construction, its memory is
        // kept alive and unchanged by our ownership for the borrow of `self`.
        unsafe {
            TensorRef::from_raw_prevalidated(tensor, self.version(), self.flags(), self.layout)
        }
    }

    /// The DLPack version (`None` for legacy).
    #[inline]
    pub fn version(&self) -> Option<DLPackVersion> {
        match self.owner.0 {
            // SAFETY: we own the tensor until drop; its header does not change meanwhile.
            RawManaged::Versioned(p) => Some(unsafe { (*p.as_ptr()).version }),
            RawManaged::Legacy(_) => None,
        }
    }

    /// Whether this is the versioned form.
    #[inline]
    pub fn is_versioned(&self) -> bool {
        matches!(self.owner.0, RawManaged::Versioned(_))
    }

    /// The flags (0 for legacy).
    #[inline]
    pub fn flags(&self) -> u64 {
        match self.owner.0 {
            // SAFETY: we own the tensor until drop; its header does not change meanwhile.
            RawManaged::Versioned(p) => unsafe { (*p.as_ptr()).flags },
            RawManaged::Legacy(_) => 0,
        }
    }

    /// `READ_ONLY` is set, or the memory is read-only for another reason (an export of shared
    /// storage such as `Arc<[T]>`, also after a conversion to the legacy form):
    /// [`as_mut_slice`](Self::as_mut_slice) refuses.
    #[inline]
    pub fn is_read_only(&self) -> bool {
        self.flags() & FLAG_READ_ONLY != 0 || self.access == Access::ReadOnly
    }

    /// Who else may touch the memory: see [`Access`].
    #[inline]
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether nobody else reads or writes the memory: the condition of
    /// [`as_mut_slice`](Self::as_mut_slice).
    #[inline]
    pub fn is_exclusive(&self) -> bool {
        self.access == Access::Exclusive
    }

    /// Declares that nobody else reads or writes this tensor's memory until it is dropped, so
    /// [`as_mut_slice`](Self::as_mut_slice) may hand out `&mut`. Refused with
    /// [`AccessError::ReadOnly`] when the tensor is read-only.
    ///
    /// # Safety
    /// Until this owner is dropped or handed back with [`into_raw`](Self::into_raw), no other
    /// handle (the producer's own tensor, another export of the same memory, another thread or
    /// process) reads or writes the bytes of this tensor.
    pub unsafe fn assume_exclusive(&mut self) -> Result<(), Error> {
        if self.is_read_only() {
            return Err(Error::Access(AccessError::ReadOnly));
        }
        self.access = Access::Exclusive;
        Ok(())
    }

    /// Declares the memory read-only: nobody may write it through this tensor or any later
    /// export of it, whatever the producer's flags say. For producers whose arrays are
    /// immutable but whose capsule cannot say so (a `jax.Array` sent as a legacy capsule,
    /// which carries no flags). It only takes rights away, so it is safe.
    pub fn set_read_only(&mut self) {
        self.access = Access::ReadOnly;
    }

    /// `IS_COPIED` is set: this consumer owns the data alone until the deleter runs.
    #[inline]
    pub fn is_copied(&self) -> bool {
        self.flags() & FLAG_IS_COPIED != 0
    }

    /// The elements as a slice; see [`TensorRef::as_slice`].
    #[inline]
    pub fn as_slice<T: Element>(&self) -> Result<&[T], Error> {
        self.view().as_slice()
    }

    /// The elements as a mutable slice, only with proof of exclusivity ([`Access`]): refused
    /// with [`AccessError::ReadOnly`] for read-only memory, with [`AccessError::NotExclusive`] when
    /// other handles may touch the memory, and for the same reasons as [`TensorRef::as_slice`].
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], Error> {
        match self.access {
            _ if self.is_read_only() => return Err(Error::Access(AccessError::ReadOnly)),
            Access::Exclusive => {}
            access => return Err(Error::Access(AccessError::NotExclusive { access })),
        }
        let view = self.view();
        let len = view.as_slice::<T>()?.len();
        // Derived from the raw `data` pointer, not from the shared slice, so writes through it
        // keep the producer's provenance.
        let ptr = view.first_element_ptr().cast::<T>();
        if len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: the slice covers exactly the tensor's elements; `Access::Exclusive` (checked
        // above) means nobody else reads or writes them while this owner lives, and `&mut self`
        // makes this the only borrow through the owner; and
        // a row-major contiguous layout has no overlapping elements.
        Ok(unsafe { core::slice::from_raw_parts_mut(ptr, len) })
    }
}
