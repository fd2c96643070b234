//! [`ExportBuilder`]: storage plus dtype, shape, strides, offset and flags, checked against the
//! storage's size, becomes a DLPack tensor.

use alloc::vec::Vec;
use core::mem::MaybeUninit;

use crate::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, FLAG_IS_COPIED,
    FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY,
};
use crate::access::Access;
use crate::dtype::{DataType, Element, Fp4Convention};
use crate::error::{AccessError, Error, Flag, LayoutError};
use crate::layout;
use crate::managed::ManagedTensor;

use super::block::{Header, NewBlock, tensor_at};
use crate::dims::Dims;
use crate::storage::TensorStorage;

/// Builds an exported tensor from owned storage: a DLPack tensor whose deleter drops the
/// storage (any [`TensorStorage`](crate::backend::TensorStorage): a `Vec`, a `Box<[T]>`, an
/// `Arc<[T]>`, memory of your own). [`build`](Self::build) makes the versioned (1.3) form,
/// [`build_legacy`](Self::build_legacy) the legacy one.
///
/// # Examples
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
// The builder is about 200 bytes (an inline list of dimensions). Its constructors (the adapters'
// included), its plain setters and `build` are `#[inline]`: a builder returned from a call that
// is not inlined goes through memory, and the caller's wide loads of what the callee has just
// stored stall the export.
#[derive(Debug)]
pub struct ExportBuilder<S: TensorStorage> {
    storage: S,
    dtype: DataType,
    /// The shape, then the strides the caller set (zeros until then).
    dims: Dims,
    /// How many strides the caller set (`None`: compact row-major, written by the build); the
    /// values are in `dims` when they are as many as the axes, a `StridesLength` error
    /// otherwise.
    strides: Option<usize>,
    byte_offset: u64,
    flags: u64,
    /// The size of the vector's element for [`from_vec`](ExportBuilder::from_vec), so that
    /// a vector too short for the shape is counted in elements; 0 for untyped storage.
    elem_size: usize,
}

impl<T: Element> ExportBuilder<Vec<T>> {
    /// Exports a vector with the given shape (compact row-major unless strides are set).
    #[inline]
    pub fn from_vec(data: Vec<T>, shape: &[i64]) -> Self {
        let mut builder = ExportBuilder::new(data, T::DTYPE, shape);
        builder.elem_size = size_of::<T>();
        builder
    }
}

impl<S: TensorStorage> ExportBuilder<S> {
    /// Exports `storage` as `dtype` with `shape`. The storage's size is checked at build time.
    #[inline]
    pub fn new(storage: S, dtype: DataType, shape: &[i64]) -> Self {
        Self::with_dims(storage, dtype, Dims::with_shape(shape), false)
    }

    /// As [`new`](Self::new), and [`strides`](Self::strides) when `strides` is set, for the
    /// adapters: the shape and strides they collected from their container, taken without
    /// another copy.
    #[inline]
    pub(crate) fn with_dims(storage: S, dtype: DataType, dims: Dims, strides: bool) -> Self {
        Self {
            storage,
            dtype,
            strides: strides.then(|| dims.ndim()),
            dims,
            byte_offset: 0,
            flags: 0,
            elem_size: 0,
        }
    }

    /// Sets strides in elements (default: compact row-major, always written out explicitly as
    /// DLPack 1.2+ requires).
    #[inline]
    pub fn strides(mut self, strides: &[i64]) -> Self {
        let to = self.dims.strides_mut();
        if to.len() == strides.len() {
            to.copy_from_slice(strides);
        }
        self.strides = Some(strides.len());
        self
    }

    /// Sets `byte_offset`.
    #[inline]
    pub fn byte_offset(mut self, byte_offset: u64) -> Self {
        self.byte_offset = byte_offset;
        self
    }

    #[inline]
    fn flag(mut self, bit: u64, on: bool) -> Self {
        if on {
            self.flags |= bit
        } else {
            self.flags &= !bit
        }
        self
    }

    /// Marks the tensor READ_ONLY. Shared storage (`Arc<[T]>`) is read-only regardless.
    #[inline]
    pub fn read_only(self, on: bool) -> Self {
        self.flag(FLAG_READ_ONLY, on)
    }

    /// Marks the tensor IS_COPIED: set it only when the storage is a copy made for this export,
    /// so the consumer owns it alone.
    #[inline]
    pub fn copied(self, on: bool) -> Self {
        self.flag(FLAG_IS_COPIED, on)
    }

    /// Marks sub-byte elements as padded to whole bytes (IS_SUBBYTE_TYPE_PADDED).
    #[inline]
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
        let axis = self.dims.ndim().saturating_sub(1);
        let last = self.dims.shape_mut().last_mut();
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
    #[inline]
    pub fn build(self) -> Result<ManagedTensor, Error> {
        self.build_into::<DLManagedTensorVersioned>()
    }

    /// Validates and builds a legacy `DLManagedTensor` (for JAX and other legacy-only
    /// consumers). The legacy form has no flags: a read-only storage or READ_ONLY, and
    /// IS_SUBBYTE_TYPE_PADDED, are refused with [`AccessError::FlagNotRepresentable`] (a legacy
    /// consumer would write into read-only memory, or misread padded elements as packed);
    /// IS_COPIED is dropped (it only grants rights, so losing it is safe).
    #[inline]
    pub fn build_legacy(self) -> Result<ManagedTensor, Error> {
        self.build_into::<DLManagedTensor>()
    }

    /// One allocation, checks on the way, no re-validation: the metadata is validated in the
    /// block itself (the shape copied in, the strides computed or copied next to it), the
    /// storage moved in, its real pointer checked, the header written once. Every rule of
    /// [`ManagedTensor::from_raw`] holds by construction; debug builds re-validate to prove it.
    #[inline]
    fn build_into<H: Header>(self) -> Result<ManagedTensor, Error> {
        let Self {
            storage,
            dtype,
            dims,
            strides,
            byte_offset,
            mut flags,
            elem_size,
        } = self;
        let access = storage.access();
        if access == Access::ReadOnly {
            flags |= FLAG_READ_ONLY;
        }
        if H::LEGACY {
            legacy_representable(flags)?;
        }
        let device = storage.device().check(crate::device::DeviceField::Tensor)?;
        let available = storage.byte_len() as u64;
        let (shape, ndim) = (dims.shape(), dims.ndim());
        if ndim > layout::MAX_NDIM {
            return Err(ndim_out_of_range(ndim));
        }
        let strides = match strides {
            None => None,
            Some(len) if len == ndim => Some(dims.strides()),
            Some(len) => return Err(strides_length(len, ndim)),
        };
        let block = NewBlock::<H, S>::new(2 * ndim);
        let values = block.dims();
        // SAFETY: the block holds 2 × ndim values: the shape, then the strides, whose half is
        // handed out as uninitialised values.
        let stride_half = unsafe {
            core::ptr::copy_nonoverlapping(shape.as_ptr(), values, ndim);
            core::slice::from_raw_parts_mut(values.add(ndim).cast::<MaybeUninit<i64>>(), ndim)
        };
        let fast = match strides {
            None => layout::compact_fast(dtype, shape, stride_half, flags)
                .filter(|l| storage_fits(*l, byte_offset, available)),
            Some(_) => None,
        };
        let layout = match fast {
            Some(layout) => layout,
            None => {
                let checked = strides_slow(
                    dtype,
                    shape,
                    strides,
                    stride_half,
                    byte_offset,
                    flags,
                    available,
                );
                match checked {
                    Ok(layout) => layout,
                    Err(e) => {
                        block.free();
                        // A vector's length is in elements, and so is its error, unless the
                        // caller moved its start by a byte offset (then bytes are its unit).
                        return Err(if byte_offset == 0 {
                            in_elements(e, elem_size)
                        } else {
                            e
                        });
                    }
                }
            }
        };
        // Both halves are written now: the fast path writes every stride when it answers, the
        // slow one always.
        let (block, data) = block.put_storage(storage);
        // What is left of validation depends on the real data pointer, known only now.
        let placed = layout.numel == 0
            || (!data.is_null()
                && (!device.is_host_accessible()
                    || layout::address_fits(data as usize, byte_offset, layout.span)));
        if !placed {
            let e = data_error(data, byte_offset, layout);
            block.discard();
            return Err(e);
        }
        let tensor = tensor_at(data, device, dtype, ndim, block.dims(), byte_offset);
        #[cfg(debug_assertions)]
        {
            let (version, flags) = if H::LEGACY {
                (None, 0)
            } else {
                (Some(DLPackVersion::CURRENT), flags)
            };
            // SAFETY: the tensor's arrays and storage live in the block, not yet released.
            let revalidated = unsafe { crate::view::TensorRef::from_raw(&tensor, version, flags) };
            debug_assert_eq!(revalidated.map(|t| t.layout()), Ok(layout));
        }
        let raw = block.finish(tensor, flags);
        // SAFETY: owned, fully initialised, and valid with exactly this layout by
        // construction (the metadata passed `validate_metadata`'s rules above, the pointer the
        // address rule); `access` is the storage's own promise.
        Ok(unsafe { ManagedTensor::from_raw_validated(raw, layout, access) })
    }
}

#[cold]
#[inline(never)]
fn ndim_out_of_range(ndim: usize) -> Error {
    Error::Layout(LayoutError::NdimOutOfRange { ndim: ndim as i64 })
}

#[cold]
#[inline(never)]
fn strides_length(strides: usize, ndim: usize) -> Error {
    Error::Layout(LayoutError::StridesLength { strides, ndim })
}

/// `byte_offset + span` lies inside `available` bytes (what [`check_storage`] accepts).
#[inline(always)]
fn storage_fits(checked: layout::Layout, byte_offset: u64, available: u64) -> bool {
    checked.numel == 0
        || (byte_offset as i128 + checked.span.lo as i128 >= 0
            && byte_offset as i128 + checked.span.hi as i128 <= available as i128)
}

/// The strides and the layout by the full rules: explicit strides, or whatever the compact
/// fast path did not answer. Writes every stride of `out`.
#[cold]
#[inline(never)]
fn strides_slow(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    out: &mut [MaybeUninit<i64>],
    byte_offset: u64,
    flags: u64,
    available: u64,
) -> Result<layout::Layout, Error> {
    for v in out.iter_mut() {
        v.write(0);
    }
    // SAFETY: every value was just initialised.
    let out = unsafe { &mut *(out as *mut [MaybeUninit<i64>] as *mut [i64]) };
    match strides {
        Some(s) => out.copy_from_slice(s),
        None => layout::compact_row_major(shape, out)?,
    }
    let checked =
        layout::validate_metadata(dtype, shape, Some(out), Some(DLPackVersion::CURRENT), flags)?;
    check_storage(checked, byte_offset, available)?;
    Ok(checked)
}

/// The error of a non-empty export whose data pointer is NULL or outside user space.
#[cold]
#[inline(never)]
fn data_error(data: *mut core::ffi::c_void, byte_offset: u64, layout: layout::Layout) -> Error {
    if data.is_null() {
        return Error::Layout(LayoutError::NullData {
            numel: layout.numel,
        });
    }
    match layout::check_address(data as usize, byte_offset, layout.span) {
        Err(e) => e,
        Ok(()) => unreachable!("address_fits and check_address agree"),
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
/// DLPack 1.3 tensor with `flags` and checked to lie inside `available` bytes of storage: the
/// dimensions a [`Tensor`](crate::Tensor) keeps, filled in place (the strides written next to
/// the shape, the whole moved into the tensor, never copied into another list).
pub(crate) fn checked_dims(
    dtype: DataType,
    shape: &[i64],
    strides: Option<&[i64]>,
    byte_offset: u64,
    flags: u64,
    available: u64,
) -> Result<(Dims, layout::Layout), Error> {
    let ndim = layout::check_ndim(shape.len() as i64)?;
    if let Some(s) = strides.filter(|s| s.len() != ndim) {
        return Err(strides_length(s.len(), ndim));
    }
    let mut dims = Dims::new(shape, strides.into_iter().flatten().copied());
    if strides.is_none() {
        let (sh, st) = dims.split_mut();
        // SAFETY: `compact_fast` writes only initialised values.
        let st = unsafe { &mut *(st as *mut [i64] as *mut [MaybeUninit<i64>]) };
        if let Some(checked) = layout::compact_fast(dtype, sh, st, flags) {
            check_storage(checked, byte_offset, available)?;
            return Ok((dims, checked));
        }
        let (sh, st) = dims.split_mut();
        layout::compact_row_major(sh, st)?;
    }
    let checked = layout::validate_metadata(
        dtype,
        dims.shape(),
        Some(dims.strides()),
        Some(DLPackVersion::CURRENT),
        flags,
    )?;
    check_storage(checked, byte_offset, available)?;
    Ok((dims, checked))
}

/// A [`StorageTooSmall`](LayoutError::StorageTooSmall) of a typed vector, recounted in the
/// vector's elements of `elem_size` bytes ([`DataTooShort`](LayoutError::DataTooShort)): the
/// caller gave elements, so the error counts elements. Any other error passes unchanged.
#[cold]
pub(crate) fn in_elements(e: Error, elem_size: usize) -> Error {
    match e {
        Error::Layout(LayoutError::StorageTooSmall { needed, available }) if elem_size > 0 => {
            let size = elem_size as u64;
            Error::Layout(LayoutError::DataTooShort {
                needed: needed.div_ceil(size),
                available: available / size,
            })
        }
        e => e,
    }
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
