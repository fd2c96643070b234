//! Export: owned storage becomes a DLPack managed tensor whose deleter drops it.
//!
//! One heap block holds the `DLManagedTensorVersioned` (or legacy `DLManagedTensor`) header,
//! the shape and strides arrays, and the storage itself; `manager_ctx` points at that block and
//! the deleter frees all of it at once. Every exported tensor passes
//! [`ManagedTensor::from_raw`]'s validation before it is returned.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ffi::c_void;

use crate::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, FLAG_IS_COPIED,
    FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY,
};
use crate::device::Device;
use crate::dtype::{DataType, Element, Fp4Convention};
use crate::error::{AccessError, Error, Flag, LayoutError};
use crate::layout;
use crate::managed::{Access, ManagedTensor, RawManaged};

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
    /// Where the memory lives; host memory by default.
    fn device(&self) -> Device {
        Device::CPU
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

/// Builds an exported tensor from owned storage.
///
/// ```
/// use dlport_core::{DataType, ExportBuilder};
///
/// // A 2×3 float32 matrix exported column-major, read-only, as DLPack 1.3.
/// let data: Vec<f32> = vec![1., 4., 2., 5., 3., 6.];
/// let t = ExportBuilder::from_vec(data, &[2, 3]).strides(&[1, 2]).read_only(true).build()?;
/// let view = t.view();
/// assert_eq!(view.get::<f32>(&[1, 2])?, Some(6.0));
/// assert!(t.is_read_only());
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Debug)]
pub struct ExportBuilder<S: TensorStorage> {
    storage: S,
    dtype: DataType,
    /// The shape (its stride half is filled at build time).
    shape: Dims,
    strides: Option<Vec<i64>>,
    byte_offset: u64,
    flags: u64,
}

impl<T: Element> ExportBuilder<Vec<T>> {
    /// Exports a vector with the given shape (compact row-major unless strides are set).
    pub fn from_vec(data: Vec<T>, shape: &[i64]) -> Self {
        ExportBuilder::new(data, T::DTYPE, shape)
    }
}

impl<S: TensorStorage> ExportBuilder<S> {
    /// Exports `storage` as `dtype` with `shape`. The storage's size is checked at build time.
    pub fn new(storage: S, dtype: DataType, shape: &[i64]) -> Self {
        Self {
            storage,
            dtype,
            shape: Dims::with_shape(shape),
            strides: None,
            byte_offset: 0,
            flags: 0,
        }
    }

    /// Sets strides in elements (default: compact row-major, always written out explicitly as
    /// DLPack 1.2+ requires).
    pub fn strides(mut self, strides: &[i64]) -> Self {
        self.strides = Some(strides.to_vec());
        self
    }

    /// Sets `byte_offset`.
    pub fn byte_offset(mut self, byte_offset: u64) -> Self {
        self.byte_offset = byte_offset;
        self
    }

    fn flag(mut self, bit: u64, on: bool) -> Self {
        if on {
            self.flags |= bit
        } else {
            self.flags &= !bit
        }
        self
    }

    /// Marks the tensor READ_ONLY. Shared storage (`Arc<[T]>`) is read-only regardless.
    pub fn read_only(self, on: bool) -> Self {
        self.flag(FLAG_READ_ONLY, on)
    }

    /// Marks the tensor IS_COPIED: set it only when the storage is a copy made for this export,
    /// so the consumer owns it alone.
    pub fn copied(self, on: bool) -> Self {
        self.flag(FLAG_IS_COPIED, on)
    }

    /// Marks sub-byte elements as padded to whole bytes (IS_SUBBYTE_TYPE_PADDED).
    pub fn subbyte_padded(self, on: bool) -> Self {
        self.flag(FLAG_IS_SUBBYTE_TYPE_PADDED, on)
    }

    /// Re-expresses a compact fp4 tensor in the given convention: JAX's packed `(17, 4, 1)`,
    /// where the shape counts fp4 values, or PyTorch's `(17, 4, 2)`, where the last axis counts
    /// bytes of two values. The bytes do not change. Errors if the dtype is not fp4, explicit
    /// strides were set, or the last axis is odd when going to `X2`.
    pub fn fp4_convention(mut self, convention: Fp4Convention) -> Result<Self, Error> {
        let current =
            self.dtype
                .fp4_convention()
                .ok_or(Error::Layout(LayoutError::InvalidLanes {
                    dtype: self.dtype,
                    reason: "an fp4 convention applies only to float4_e2m1fn",
                }))?;
        if self.strides.is_some() || self.flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0 {
            return Err(Error::Layout(LayoutError::InvalidLanes {
                dtype: self.dtype,
                reason: "fp4 conventions convert only compact, packed tensors",
            }));
        }
        let ndim = self.shape.ndim();
        let axis = ndim.saturating_sub(1);
        let last = self.shape.as_mut_slice()[..ndim].last_mut();
        match (current, convention, last) {
            (a, b, _) if a == b => {}
            (Fp4Convention::Packed, Fp4Convention::X2, Some(extent)) if *extent % 2 == 0 => {
                *extent /= 2;
            }
            (Fp4Convention::X2, Fp4Convention::Packed, Some(extent)) => {
                let value = *extent;
                *extent = value.checked_mul(2).ok_or(Error::Layout(
                    LayoutError::ElementCountOverflow {
                        axis: axis as u32,
                        extent: value,
                    },
                ))?;
            }
            _ => {
                return Err(Error::Layout(LayoutError::InvalidLanes {
                    dtype: self.dtype,
                    reason: "float4_e2m1fn_x2 needs a last axis of even length in fp4 values",
                }));
            }
        }
        self.dtype = DataType::float4_e2m1fn(convention);
        Ok(self)
    }

    /// Validates and builds a DLPack 1.3 `DLManagedTensorVersioned`.
    pub fn build(self) -> Result<ManagedTensor, Error> {
        self.build_as(Form::Versioned)
    }

    /// Validates and builds a legacy `DLManagedTensor` (for JAX and other legacy-only
    /// consumers). The legacy form has no flags: a read-only storage or READ_ONLY, and
    /// IS_SUBBYTE_TYPE_PADDED, are refused with [`AccessError::FlagNotRepresentable`] (a legacy
    /// consumer would write into read-only memory, or misread padded elements as packed);
    /// IS_COPIED is dropped (it only grants rights, so losing it is safe).
    pub fn build_legacy(self) -> Result<ManagedTensor, Error> {
        self.build_as(Form::Legacy)
    }

    fn build_as(self, form: Form) -> Result<ManagedTensor, Error> {
        let Self {
            storage,
            dtype,
            shape,
            strides,
            byte_offset,
            mut flags,
        } = self;
        let access = storage.access();
        if access == Access::ReadOnly {
            flags |= FLAG_READ_ONLY;
        }
        if form == Form::Legacy {
            legacy_representable(flags)?;
        }
        let device = storage.device();
        let mut dims = shape;
        let layout = checked_dims_in_place(
            dtype,
            &mut dims,
            strides.as_deref(),
            byte_offset,
            flags,
            storage.byte_len() as u64,
        )?;
        let parts = Parts {
            device,
            dtype,
            byte_offset,
            flags,
            dims,
        };
        let raw = assemble(storage, parts, form);
        // The metadata passed the validator above; what is left of it depends on the real data
        // pointer, known only now.
        // SAFETY: `assemble` returns an owned, fully initialised managed tensor.
        let data = unsafe { raw_data(raw) };
        let checked = if layout.numel == 0 {
            Ok(())
        } else if data.is_null() {
            Err(Error::Layout(LayoutError::NullData {
                numel: layout.numel,
            }))
        } else if device.is_host_accessible() {
            layout::check_address(data as usize, byte_offset, layout.span)
        } else {
            Ok(())
        };
        if let Err(e) = checked {
            // SAFETY: owned by us, released once.
            unsafe { raw.release() };
            return Err(e);
        }
        // SAFETY: owned, fully initialised, and validated exactly as `from_raw` would; `access`
        // is the storage's own promise.
        Ok(unsafe { ManagedTensor::from_raw_validated(raw, layout, access) })
    }
}

/// Refuses flags that the legacy form cannot carry: READ_ONLY (a legacy consumer would write)
/// and IS_SUBBYTE_TYPE_PADDED (it would read padded elements as packed). IS_COPIED only grants
/// rights, so dropping it is safe.
pub(crate) fn legacy_representable(flags: u64) -> Result<(), Error> {
    if flags & FLAG_READ_ONLY != 0 {
        return Err(Error::Access(AccessError::FlagNotRepresentable {
            flag: Flag::ReadOnly,
        }));
    }
    if flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0 {
        return Err(Error::Access(AccessError::FlagNotRepresentable {
            flag: Flag::IsSubbyteTypePadded,
        }));
    }
    Ok(())
}

/// Shape followed by strides (compact row-major when `strides` is `None`), validated as a
/// DLPack 1.3 tensor with `flags` and checked to lie inside `available` bytes of storage.
pub(crate) fn checked_dims(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    byte_offset: u64,
    flags: u64,
    available: u64,
) -> Result<(Dims, layout::Layout), Error> {
    layout::check_ndim(shape.len() as i64)?;
    let mut dims = Dims::with_shape(shape);
    let layout = checked_dims_in_place(dtype, &mut dims, strides, byte_offset, flags, available)?;
    Ok((dims, layout))
}

/// As [`checked_dims`], filling the stride half of `dims` in place (no 136-byte moves of the
/// dimensions on the export path).
fn checked_dims_in_place(
    dtype: DataType,
    dims: &mut Dims,
    strides: Option<&[i64]>,
    byte_offset: u64,
    flags: u64,
    available: u64,
) -> Result<layout::Layout, Error> {
    let ndim = layout::check_ndim(dims.ndim() as i64)?;
    if strides.is_none() {
        let (sh, st) = dims.as_mut_slice().split_at_mut(ndim);
        if let Some(checked) = layout::compact_fast(dtype, sh, st, flags) {
            check_storage(checked, byte_offset, available)?;
            return Ok(checked);
        }
    }
    {
        let (sh, st) = dims.as_mut_slice().split_at_mut(ndim);
        match strides {
            Some(s) if s.len() != ndim => {
                return Err(Error::Layout(LayoutError::StridesLength {
                    strides: s.len(),
                    ndim,
                }));
            }
            Some(s) => st.copy_from_slice(s),
            None => layout::compact_row_major(sh, st)?,
        }
    }
    let checked = layout::validate_metadata(
        dtype,
        dims.shape(),
        Some(dims.strides()),
        Some(DLPackVersion::CURRENT),
        flags,
    )?;
    check_storage(checked, byte_offset, available)?;
    Ok(checked)
}

/// Checks that `byte_offset + span` lies inside `available` bytes of storage.
pub(crate) fn check_storage(
    checked: layout::Layout,
    byte_offset: u64,
    available: u64,
) -> Result<(), Error> {
    if checked.numel == 0 {
        return Ok(());
    }
    let lo = i128::from(byte_offset) + i128::from(checked.span.lo);
    let hi = i128::from(byte_offset) + i128::from(checked.span.hi);
    if lo < 0 || hi > i128::from(available) {
        return Err(Error::Layout(LayoutError::StorageTooSmall {
            needed: u64::try_from(hi.max(0)).unwrap_or(u64::MAX),
            available,
        }));
    }
    Ok(())
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

/// Shape followed by strides: inline up to [`Dims::INLINE`] dimensions (no allocation), on the
/// heap beyond.
#[derive(Clone, Debug)]
pub(crate) enum Dims {
    Inline {
        ndim: u8,
        buf: [i64; 2 * Dims::INLINE],
    },
    Heap(Box<[i64]>),
}

impl Dims {
    /// Dimensions kept inline.
    pub(crate) const INLINE: usize = 8;

    /// `shape` followed by `ndim` zeroed strides.
    pub(crate) fn with_shape(shape: &[i64]) -> Self {
        let ndim = shape.len();
        if ndim <= Self::INLINE {
            let mut buf = [0i64; 2 * Self::INLINE];
            buf[..ndim].copy_from_slice(shape);
            Self::Inline {
                ndim: ndim as u8,
                buf,
            }
        } else {
            let mut v = Vec::with_capacity(2 * ndim);
            v.extend_from_slice(shape);
            v.resize(2 * ndim, 0);
            Self::Heap(v.into_boxed_slice())
        }
    }

    /// From a `shape ++ strides` slice.
    pub(crate) fn from_slice(all: &[i64]) -> Self {
        let n = all.len() / 2;
        let mut d = Self::with_shape(&all[..n]);
        d.as_mut_slice()[n..].copy_from_slice(&all[n..]);
        d
    }

    pub(crate) fn ndim(&self) -> usize {
        match self {
            Self::Inline { ndim, .. } => usize::from(*ndim),
            Self::Heap(b) => b.len() / 2,
        }
    }

    pub(crate) fn as_slice(&self) -> &[i64] {
        match self {
            Self::Inline { ndim, buf } => &buf[..2 * usize::from(*ndim)],
            Self::Heap(b) => b,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [i64] {
        match self {
            Self::Inline { ndim, buf } => &mut buf[..2 * usize::from(*ndim)],
            Self::Heap(b) => b,
        }
    }

    pub(crate) fn shape(&self) -> &[i64] {
        &self.as_slice()[..self.ndim()]
    }

    pub(crate) fn strides(&self) -> &[i64] {
        &self.as_slice()[self.ndim()..]
    }

    /// Shape and strides of a view.
    pub(crate) fn of_view(view: &crate::tensor::TensorRef<'_>) -> Self {
        let mut d = Self::with_shape(view.shape());
        let n = d.ndim();
        for (slot, s) in d.as_mut_slice()[n..].iter_mut().zip(view.strides()) {
            *slot = s;
        }
        d
    }
}

/// The `data` field of a managed tensor.
///
/// # Safety
/// `raw` points to a live, initialised managed tensor.
unsafe fn raw_data(raw: RawManaged) -> *mut c_void {
    match raw {
        // SAFETY: live and initialised (contract).
        RawManaged::Versioned(p) => unsafe { (*p.as_ptr()).dl_tensor.data },
        // SAFETY: as above.
        RawManaged::Legacy(p) => unsafe { (*p.as_ptr()).dl_tensor.data },
    }
}

/// Which struct to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Versioned,
    Legacy,
}

/// The metadata of an export, already checked.
pub(crate) struct Parts {
    pub(crate) device: Device,
    pub(crate) dtype: DataType,
    pub(crate) byte_offset: u64,
    pub(crate) flags: u64,
    /// `shape` followed by `strides`.
    pub(crate) dims: Dims,
}

/// The heap block behind `manager_ctx`: header first, then the arrays and the storage.
#[repr(C)]
struct Ctx<H, S> {
    header: H,
    dims: Dims,
    storage: S,
}

pub(crate) fn assemble<S: TensorStorage>(storage: S, parts: Parts, form: Form) -> RawManaged {
    let ndim = parts.dims.ndim();
    let tensor = DLTensor {
        data: core::ptr::null_mut(),
        device: parts.device,
        ndim: ndim as i32,
        dtype: parts.dtype,
        shape: core::ptr::null_mut(),
        strides: core::ptr::null_mut(),
        byte_offset: parts.byte_offset,
    };
    match form {
        Form::Versioned => {
            let header = DLManagedTensorVersioned {
                version: DLPackVersion::CURRENT,
                manager_ctx: core::ptr::null_mut(),
                deleter: Some(delete_versioned::<S>),
                flags: parts.flags,
                dl_tensor: tensor,
            };
            let ctx = Box::into_raw(Box::new(Ctx {
                header,
                dims: parts.dims,
                storage,
            }));
            // SAFETY: `ctx` is a fresh, exclusively owned allocation; the header is its first
            // field (repr(C)), so a pointer to the block is a pointer to the header.
            unsafe { fill(ctx, |h| (&mut h.dl_tensor, &mut h.manager_ctx)) };
            RawManaged::Versioned(
                // SAFETY: Box::into_raw never returns NULL.
                unsafe { core::ptr::NonNull::new_unchecked(ctx.cast()) },
            )
        }
        Form::Legacy => {
            let header = DLManagedTensor {
                dl_tensor: tensor,
                manager_ctx: core::ptr::null_mut(),
                deleter: Some(delete_legacy::<S>),
            };
            let ctx = Box::into_raw(Box::new(Ctx {
                header,
                dims: parts.dims,
                storage,
            }));
            // SAFETY: as above.
            unsafe { fill(ctx, |h| (&mut h.dl_tensor, &mut h.manager_ctx)) };
            // SAFETY: Box::into_raw never returns NULL.
            RawManaged::Legacy(unsafe { core::ptr::NonNull::new_unchecked(ctx.cast()) })
        }
    }
}

/// Points the header's tensor at the block's own arrays and storage, and `manager_ctx` at the
/// block.
///
/// # Safety
/// `ctx` is a live, exclusively owned block from `Box::into_raw`.
unsafe fn fill<H, S: TensorStorage>(
    ctx: *mut Ctx<H, S>,
    fields: impl FnOnce(&mut H) -> (&mut DLTensor, &mut *mut c_void),
) {
    // SAFETY: exclusive access per the contract.
    let block = unsafe { &mut *ctx };
    let ndim = block.dims.ndim();
    let data = block.storage.data_ptr();
    let dims = block.dims.as_mut_slice().as_mut_ptr();
    let (tensor, manager_ctx) = fields(&mut block.header);
    tensor.data = data;
    tensor.shape = if ndim == 0 {
        core::ptr::null_mut()
    } else {
        dims
    };
    tensor.strides = if ndim == 0 {
        core::ptr::null_mut()
    } else {
        // SAFETY: `dims` holds 2 × ndim values, so the offset stays inside the array.
        unsafe { dims.add(ndim) }
    };
    *manager_ctx = ctx.cast();
}

/// The deleter of versioned exports: frees the whole block, dropping the storage.
///
/// # Safety
/// Called once, by DLPack's contract, with a tensor built by [`assemble`] for this `S`.
unsafe extern "C" fn delete_versioned<S: TensorStorage>(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `manager_ctx` was set by `fill` to the Box<Ctx<_, S>> block, released only here.
    drop(unsafe {
        Box::from_raw(
            (*managed)
                .manager_ctx
                .cast::<Ctx<DLManagedTensorVersioned, S>>(),
        )
    });
}

/// The deleter of legacy exports.
///
/// # Safety
/// As [`delete_versioned`].
unsafe extern "C" fn delete_legacy<S: TensorStorage>(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: as in `delete_versioned`.
    drop(unsafe { Box::from_raw((*managed).manager_ctx.cast::<Ctx<DLManagedTensor, S>>()) });
}

/// A re-export with a guard value dropped along with it.
struct Guarded<G> {
    inner: Reexport,
    _guard: G,
}

// SAFETY: forwards to the inner re-export; the guard does not touch the memory.
unsafe impl<G: Send + 'static> TensorStorage for Guarded<G> {
    fn data_ptr(&mut self) -> *mut c_void {
        self.inner.data_ptr()
    }
    fn byte_len(&self) -> usize {
        self.inner.byte_len()
    }
    fn device(&self) -> Device {
        self.inner.device()
    }
    fn access(&self) -> Access {
        self.inner.access()
    }
}

/// An imported tensor kept alive as the storage of a re-export (legacy ↔ versioned, or a
/// backend's view of external memory).
pub(crate) struct Reexport(ManagedTensor);

impl Reexport {
    pub(crate) fn new(managed: ManagedTensor) -> Self {
        Self(managed)
    }
}

// SAFETY: `data_ptr` returns the imported tensor's own `data`, which its producer keeps valid
// until the inner deleter runs, i.e. until this value drops. The access is the import's own
// (read-only, shared or exclusive), so a re-export never promises more than its source.
unsafe impl TensorStorage for Reexport {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.view().data()
    }
    fn byte_len(&self) -> usize {
        // Bytes from `data` to the end of the validated span (informational: re-exports reuse
        // the validated layout).
        let view = self.0.view();
        let end = i128::from(view.byte_offset()) + i128::from(view.byte_span().hi);
        usize::try_from(end.max(0)).unwrap_or(usize::MAX)
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

impl ManagedTensor {
    /// Re-exports as a DLPack 1.3 `DLManagedTensorVersioned` (a no-op if it already is one).
    /// A legacy tensor is wrapped: the new deleter drops it, calling the original deleter once.
    pub fn into_versioned(self) -> Result<ManagedTensor, Error> {
        if self.is_versioned() {
            return Ok(self);
        }
        self.rewrap(Form::Versioned)
    }

    /// Re-exports as a legacy `DLManagedTensor` (a no-op if it already is one), following
    /// `copy`. The legacy form has no flags: a read-only tensor (READ_ONLY, or read-only
    /// storage) or a padded sub-byte one (IS_SUBBYTE_TYPE_PADDED) reaches a legacy consumer
    /// only as a compact, packed host copy ([`CopyPolicy::IfNeeded`] or
    /// [`CopyPolicy::Always`]), never by dropping the flag: with [`CopyPolicy::Never`] it is
    /// refused with [`AccessError::FlagNotRepresentable`]. IS_COPIED is dropped (it only grants
    /// rights). The original is released on every path.
    ///
    /// [`CopyPolicy::IfNeeded`]: crate::CopyPolicy::IfNeeded
    /// [`CopyPolicy::Always`]: crate::CopyPolicy::Always
    /// [`CopyPolicy::Never`]: crate::CopyPolicy::Never
    pub fn into_legacy(self, copy: crate::CopyPolicy) -> Result<ManagedTensor, Error> {
        use crate::CopyPolicy;
        let carried = legacy_representable(self.flags()).and_then(|()| {
            if self.is_read_only() {
                Err(Error::Access(AccessError::FlagNotRepresentable {
                    flag: Flag::ReadOnly,
                }))
            } else {
                Ok(())
            }
        });
        match (carried, copy) {
            (Ok(()), CopyPolicy::Never | CopyPolicy::IfNeeded) if !self.is_versioned() => Ok(self),
            (Ok(()), CopyPolicy::Never | CopyPolicy::IfNeeded) => self.rewrap(Form::Legacy),
            (Err(e), CopyPolicy::Never) => Err(e),
            (_, _) => {
                let copied = crate::device::compact_copy(&self.view(), None)?;
                ExportBuilder::new(copied, self.view().dtype(), self.view().shape()).build_legacy()
            }
        }
    }

    /// Re-exports this tensor (no copy) with `guard` attached: the new deleter drops the guard,
    /// then this tensor (calling its deleter once). Useful to keep a foreign object, a stream
    /// event or a counter alive exactly as long as the consumer holds the tensor.
    ///
    /// A legacy re-export of a tensor whose flags the legacy form cannot carry is refused with
    /// [`AccessError::FlagNotRepresentable`] (see [`into_legacy`](Self::into_legacy)).
    pub fn reexport_with<G: Send + 'static>(
        self,
        guard: G,
        versioned: bool,
    ) -> Result<ManagedTensor, Error> {
        let form = if versioned {
            Form::Versioned
        } else {
            legacy_representable(self.flags())?;
            if self.is_read_only() {
                return Err(Error::Access(AccessError::FlagNotRepresentable {
                    flag: Flag::ReadOnly,
                }));
            }
            Form::Legacy
        };
        let access = self.access();
        let parts = self.parts();
        let raw = assemble(
            Guarded {
                inner: Reexport(self),
                _guard: guard,
            },
            parts,
            form,
        );
        // SAFETY: a fresh, owned export of an already validated tensor.
        Ok(unsafe { ManagedTensor::from_raw(raw) }?.with_access(access))
    }

    fn parts(&self) -> Parts {
        let view = self.view();
        Parts {
            device: view.device(),
            dtype: view.dtype(),
            byte_offset: view.byte_offset(),
            flags: view.flags(),
            dims: Dims::of_view(&view),
        }
    }

    fn rewrap(self, form: Form) -> Result<ManagedTensor, Error> {
        let access = self.access();
        let parts = self.parts();
        let raw = assemble(Reexport(self), parts, form);
        // SAFETY: a fresh, owned export of an already validated tensor.
        Ok(unsafe { ManagedTensor::from_raw(raw) }?.with_access(access))
    }
}
