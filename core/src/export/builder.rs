//! [`ExportBuilder`]: storage plus dtype, shape, strides, offset and flags, checked against the
//! storage's size, becomes a DLPack tensor.

use alloc::vec::Vec;

use crate::abi::{DLPackVersion, FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use crate::dtype::{DataType, Element, Fp4Convention};
use crate::error::{AccessError, Error, Flag, LayoutError};
use crate::layout;
use crate::managed::{Access, ManagedTensor};

use super::*;

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
pub(crate) fn checked_dims_in_place(
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
