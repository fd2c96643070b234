//! [`Tensor`]: a backend's tensor, a cheap handle (a [`SharedBuffer`] plus shape, strides,
//! dtype and offset) onto a [`Buffer`], and the views and DLPack references taken from it.
//! [`Tensor::acquire_external`] exports a DLPack tensor that holds a counted use of the buffer
//! (XLA's *external reference*); [`Tensor::release_ownership`] hands the memory itself to a
//! consumer, after which every handle's access returns
//! [`AccessError::BufferReleased`](crate::error::AccessError::BufferReleased). A backend makes
//! one over its buffer with [`Tensor::builder`] (`builder.rs`).

mod builder;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ffi::c_void;

use crate::abi::{FLAG_IS_COPIED, FLAG_READ_ONLY};
use crate::access::Access;
use crate::buffer::{Buffer, SharedBuffer, Use};
use crate::device::Device;
use crate::dims::Dims;
use crate::dtype::{DataType, Element};
use crate::error::Error;
use crate::export::{self, Form};
use crate::layout::{Contiguity, Layout};
use crate::managed::ManagedTensor;
use crate::storage::{ImportStorage, TensorStorage};
use crate::view::TensorRef;

pub use builder::TensorBuilder;

/// A backend's tensor: a handle onto a [`Buffer`] plus shape, strides, dtype and offset.
///
/// Cloning is cheap and shares the buffer. The memory is freed (or the DLPack deleter of an
/// imported tensor called) when the last handle and the last DLPack reference are gone.
/// [`from_dlpack`](crate::from_dlpack) makes one; [`to_dlpack`](crate::to_dlpack) shares it.
///
/// # Examples
///
/// ```
/// use dlport_core::{DataType, Tensor};
///
/// let t = Tensor::from_vec(vec![1i16, 2, 3, 4, 5, 6], &[2, 3])?; // no copy
/// assert_eq!((t.dtype(), t.shape(), t.strides()), (DataType::INT16, &[2, 3][..], &[3, 1][..]));
/// let same = t.clone(); // another handle onto the same buffer
/// assert_eq!(same.first_element_address(), t.first_element_address());
/// assert_eq!(t.view()?.tensor_ref().get::<i16>(&[1, 2])?, Some(6));
/// # Ok::<(), dlport_core::Error>(())
/// ```
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

// A `Tensor` moves by value through every import and export (into a `Result`, into a binding's
// object); at 160 bytes on 64-bit targets those moves stay register copies (`Dims::INLINE`).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(
    size_of::<Tensor>() <= 160,
    "a Tensor outgrew 160 bytes: see Dims::INLINE"
);

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
    /// A compact row-major CPU tensor over `data`, without a copy (the CPU backend's tensor;
    /// the vector is freed when the last handle and the last DLPack reference are gone).
    /// `shape` must fit in `data`
    /// ([`LayoutError::DataTooShort`](crate::error::LayoutError::DataTooShort) otherwise,
    /// counted in elements).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Self, Error> {
        Self::builder(Buffer::new(Box::new(data)), "cpu", T::DTYPE, shape)
            .build()
            .map_err(|e| export::in_elements(e, size_of::<T>()))
    }

    /// Imports a DLPack tensor as a view of its memory (no copy). The DLPack deleter runs when
    /// the last handle onto the view, and the last reference re-exported from it, are dropped.
    ///
    /// `memory` is where the memory really is: the capsule's device, or the more specific
    /// host-accessible class the producer advertised (see
    /// [`reconcile_device`](crate::backend::reconcile_device)); anything that contradicts the
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
        // The registry decided `memory` once (its import plan); a device other than the
        // capsule's is only verified here, for a caller of the backend API that passes its own.
        let memory = if memory == view.device() {
            memory
        } else {
            crate::device::reconcile_device(view.device(), Some(memory))?
        };
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
        let (ptr, len) = (view.data(), ImportStorage::byte_len_of(&view));
        let buffer = Buffer::imported(ImportStorage::new(managed), ptr, len, memory);
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
        if !self.buffer.device().is_host_accessible() || self.buffer.is_released() {
            return None;
        }
        Some((self.buffer.ptr() as usize).wrapping_add(self.byte_offset as usize))
    }

    /// A validated view of the tensor, like [`ManagedTensor::view`]: shape, strides, dtype,
    /// and typed access (`as_slice`, `to_vec`) where the host can read the memory. The view
    /// holds a counted use of the buffer, so the memory cannot be released to a consumer while
    /// it lives. Fails with
    /// [`AccessError::BufferReleased`](crate::error::AccessError::BufferReleased) once it was.
    pub fn view(&self) -> Result<TensorView<'_>, Error> {
        let guard = self.buffer.try_use()?;
        // SAFETY: the tensor's layout was validated against the buffer (or came from a
        // validated import), and the counted use held by the returned value keeps the buffer
        // unreleased and alive for as long as the view (which borrows `self`) lives.
        let view = unsafe {
            TensorRef::from_parts(
                self.buffer.ptr(),
                self.buffer.device(),
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
        self.view()?.tensor_ref().to_vec()
    }

    /// Exports a DLPack tensor that keeps the buffer alive by a counted reference (XLA's
    /// external reference). The buffer cannot be released while it exists. `form` picks a
    /// versioned (1.3) or legacy struct. `device` is the DLPack device to write (after any
    /// device-id translation by the backend).
    pub fn acquire_external(
        &self,
        versioned: bool,
        device: Device,
    ) -> Result<ManagedTensor, Error> {
        let guard = self.buffer.try_use()?;
        self.export(ExternalRef { guard }, versioned, device)
    }

    /// Hands the memory itself to a DLPack consumer. Afterwards every handle onto this buffer
    /// gets [`AccessError::BufferReleased`](crate::error::AccessError::BufferReleased). Fails with
    /// [`AccessError::BufferInUse`](crate::error::AccessError::BufferInUse) while views or
    /// external references exist.
    pub fn release_ownership(
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
            dims: self.dims.as_slice(),
        }
    }
}

/// What [`Tensor::view`] returns: a validated view of a [`Tensor`] that keeps its memory from
/// being released while it lives.
///
/// [`tensor_ref`](Self::tensor_ref) lends the view as a [`TensorRef`] for as long as this guard
/// is borrowed, so no slice of the memory outlives the guard: once the guard is gone, the
/// memory may be released to a DLPack consumer and freed.
///
/// # Examples
///
/// ```
/// let t = dlport_core::Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
/// let view = t.view()?; // the buffer cannot be released to a consumer while `view` lives
/// assert_eq!(view.tensor_ref().as_slice::<f32>()?.iter().sum::<f32>(), 6.0);
/// # Ok::<(), dlport_core::Error>(())
/// ```
///
/// ```compile_fail,E0597
/// # use dlport_core::Tensor;
/// let tensor = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let slice: &[f32] = {
///     let view = tensor.view().unwrap();
///     view.tensor_ref().as_slice::<f32>().unwrap()
/// }; // error: `view` does not live long enough
/// # let _ = slice;
/// ```
pub struct TensorView<'a> {
    view: TensorRef<'a>,
    _use: Use,
}

impl TensorView<'_> {
    /// The view, borrowed from this guard: its slices live no longer than the guard.
    ///
    /// ```
    /// # use dlport_core::Tensor;
    /// let tensor = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
    /// let view = tensor.view()?;
    /// assert_eq!(view.tensor_ref().as_slice::<f32>()?, &[1.0, 2.0, 3.0]);
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn tensor_ref(&self) -> TensorRef<'_> {
        self.view
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
        self.guard.buffer().ptr()
    }
    fn byte_len(&self) -> usize {
        self.guard.buffer().len()
    }
    fn device(&self) -> Device {
        self.guard.buffer().device()
    }
    fn access(&self) -> Access {
        // The tensor's other handles, and other external references, keep reading (and their
        // consumers writing) the same bytes: never exclusive.
        Access::Shared
    }
}
