//! [`TensorRef`]: a validated, borrowed view of a `DLTensor`.

use core::ffi::c_void;
use core::marker::PhantomData;

use crate::abi::{
    DLPackVersion, DLTensor, FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY,
};
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, LayoutError};
use crate::layout::{self, ByteSpan, Contiguity, Layout, RawFields};

mod elements;

/// `shape` and `strides` of a tensor as slices (`None` strides when NULL), or `NullShape`.
///
/// # Safety
/// `ndim` is `tensor.ndim`, already bounded by `MAX_NDIM`; non-NULL `shape` and `strides`
/// point to `ndim` readable `i64` values that nobody mutates while `tensor` is borrowed.
#[inline]
unsafe fn raw_dims(tensor: &DLTensor, ndim: usize) -> Result<(&[i64], Option<&[i64]>), Error> {
    if ndim != 0 && tensor.shape.is_null() {
        return Err(Error::Layout(LayoutError::NullShape { ndim: tensor.ndim }));
    }
    // SAFETY: a non-NULL shape when ndim > 0 (checked above), and the caller's contract.
    Ok(unsafe { dims(tensor, ndim) })
}

/// `shape` and `strides` of a tensor as slices (`None` strides when NULL): the one place that
/// turns the two pointers into slices (a 0-d tensor has empty slices).
///
/// # Safety
/// As [`raw_dims`], and `shape` is non-NULL when `ndim > 0`.
#[inline(always)]
unsafe fn dims(tensor: &DLTensor, ndim: usize) -> (&[i64], Option<&[i64]>) {
    if ndim == 0 {
        return (&[], Some(&[]));
    }
    // SAFETY: non-NULL, ndim values, per the contract.
    let shape = unsafe { core::slice::from_raw_parts(tensor.shape, ndim) };
    let strides = if tensor.strides.is_null() {
        None
    } else {
        // SAFETY: as for `shape`.
        Some(unsafe { core::slice::from_raw_parts(tensor.strides, ndim) })
    };
    (shape, strides)
}

/// A validated, borrowed view of a `DLTensor`.
///
/// Built once by [`TensorRef::from_raw`] (or handed out by
/// [`ManagedTensor::view`](crate::ManagedTensor::view), and lent by the guard
/// [`Tensor::view`](crate::Tensor::view) returns); afterwards every accessor is safe
/// and does no further validation. Typed access ([`as_slice`](Self::as_slice)) is allowed only
/// where the memory is host-accessible, the dtype matches, the layout is row-major contiguous
/// and the first element is aligned; otherwise the error says which of these failed. Any
/// layout is read element by element ([`get`](Self::get)), copied out typed
/// ([`to_vec`](Self::to_vec)) or compacted into bytes
/// ([`copy_to_compact`](Self::copy_to_compact)).
///
/// # Examples
///
/// ```
/// use dlport_core::abi::{DLTensor, FLAG_READ_ONLY};
/// use dlport_core::{DataType, Device, TensorRef};
///
/// // A bare DLTensor lent by C code: a 2×2 uint8 matrix, transposed.
/// let data = [1u8, 2, 3, 4];
/// let (mut shape, mut strides) = ([2i64, 2], [1i64, 2]);
/// let raw = DLTensor {
///     data: data.as_ptr().cast_mut().cast(),
///     device: Device::cpu(),
///     ndim: 2,
///     dtype: DataType::UINT8,
///     shape: shape.as_mut_ptr(),
///     strides: strides.as_mut_ptr(),
///     byte_offset: 0,
/// };
/// // SAFETY: the arrays and the four bytes outlive the view and nobody writes them.
/// let view = unsafe { TensorRef::from_raw(&raw, None, FLAG_READ_ONLY) }?;
/// assert!(view.contiguity().is_column_major());
/// assert_eq!(view.get::<u8>(&[0, 1])?, Some(3));
/// assert_eq!(view.to_vec::<u8>()?, [1, 3, 2, 4]);
/// assert!(view.as_slice::<u8>().is_err()); // not row-major: no slice
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    data: *mut c_void,
    device: Device,
    dtype: DataType,
    byte_offset: u64,
    shape: &'a [i64],
    strides: Option<&'a [i64]>,
    version: Option<DLPackVersion>,
    flags: u64,
    layout: Layout,
    _data: PhantomData<&'a [u8]>,
}

// SAFETY: a TensorRef only reads the tensor's memory, through shared references whose validity
// the constructor's caller guaranteed for 'a; DLPack allows any thread to read an imported
// tensor, so sharing or sending the view is as safe as sharing `&[u8]`.
unsafe impl Send for TensorRef<'_> {}
// SAFETY: as above: only shared, read-only access.
unsafe impl Sync for TensorRef<'_> {}

impl<'a> TensorRef<'a> {
    /// Validates `tensor` and returns a view of it.
    ///
    /// `version` is the DLPack version the tensor came with (`None` for a legacy
    /// `DLManagedTensor` or a bare `DLTensor`); `flags` the versioned flags (0 for legacy).
    ///
    /// # Safety
    /// For the lifetime `'a`:
    /// - when `tensor.ndim > 0` and `tensor.shape` (resp. `tensor.strides`) is not NULL, it must
    ///   point to `ndim` readable `i64` values (the count is checked against
    ///   [`MAX_NDIM`](crate::layout::MAX_NDIM) before any is read), which nobody mutates;
    /// - when the device is host-accessible and the tensor is not empty, every byte of
    ///   `data + byte_offset + [lo, hi)` (the span this function computes) must be readable and
    ///   not mutated by anyone else. Device memory is never dereferenced.
    #[inline]
    pub unsafe fn from_raw(
        tensor: &'a DLTensor,
        version: Option<DLPackVersion>,
        flags: u64,
    ) -> Result<Self, Error> {
        // SAFETY: forwarded contract.
        match unsafe { Self::layout_fast(tensor, version, flags) } {
            Some(layout) => {
                // SAFETY: the fast path is `validate` for the fields it answers, so the tensor
                // just passed `from_raw`'s checks with this layout.
                Ok(unsafe { Self::from_raw_prevalidated(tensor, version, flags, layout) })
            }
            // SAFETY: forwarded contract.
            None => unsafe { Self::from_raw_slow(tensor, version, flags) },
        }
    }

    /// The layout of a tensor that passes every check of [`from_raw`](Self::from_raw) in the
    /// common case ([`layout::validate_fast`]: no `Result`, no error built), or `None`, where
    /// [`from_raw`](Self::from_raw)'s full rules decide (and name the error).
    ///
    /// # Safety
    /// As [`from_raw`](Self::from_raw).
    #[inline(always)]
    pub(crate) unsafe fn layout_fast(
        tensor: &DLTensor,
        version: Option<DLPackVersion>,
        flags: u64,
    ) -> Option<Layout> {
        // A negative ndim becomes a huge unsigned one.
        if tensor.ndim as u32 > layout::MAX_NDIM as u32 {
            return None;
        }
        let ndim = tensor.ndim as usize;
        if ndim != 0 && tensor.shape.is_null() {
            return None;
        }
        // SAFETY: ndim ≤ MAX_NDIM, a non-NULL shape when ndim > 0, the caller's contract.
        let (shape, strides) = unsafe { dims(tensor, ndim) };
        // `layout::validate_fast` in two steps, so that `data`, `device` and `byte_offset` are
        // read only after the loop over the axes.
        let layout = layout::metadata_fast(tensor.dtype, shape, strides, version, flags)?;
        layout::placement_fast(
            tensor.data as usize,
            tensor.device,
            tensor.byte_offset,
            layout,
        )
    }

    /// [`from_raw`](Self::from_raw) rule by rule: the path of errors and rare layouts.
    ///
    /// # Safety
    /// As [`from_raw`](Self::from_raw).
    #[cold]
    #[inline(never)]
    unsafe fn from_raw_slow(
        tensor: &'a DLTensor,
        version: Option<DLPackVersion>,
        flags: u64,
    ) -> Result<Self, Error> {
        if let Some(version) = version {
            layout::check_version(version)?;
        }
        let ndim = layout::check_ndim(i64::from(tensor.ndim))?;
        // SAFETY: ndim is bounded; the caller guarantees the arrays for 'a.
        let (shape, strides) = unsafe { raw_dims(tensor, ndim) }?;
        let layout = layout::validate(&RawFields {
            data: tensor.data as usize,
            device: tensor.device,
            dtype: tensor.dtype,
            shape,
            strides,
            byte_offset: tensor.byte_offset,
            version,
            flags,
        })?;
        // SAFETY: the tensor just passed validation with these `version` and `flags`, giving
        // `layout`, and the caller's contract holds for 'a.
        Ok(unsafe { Self::from_raw_prevalidated(tensor, version, flags, layout) })
    }

    /// Builds a view of a tensor that already passed [`TensorRef::from_raw`] with the same
    /// `version` and `flags`, reusing its `layout`.
    ///
    /// # Safety
    /// `tensor` passed `from_raw(tensor, version, flags)` yielding `layout`, has not changed
    /// since, and still satisfies `from_raw`'s contract for `'a`.
    #[inline]
    pub(crate) unsafe fn from_raw_prevalidated(
        tensor: &'a DLTensor,
        version: Option<DLPackVersion>,
        flags: u64,
        layout: Layout,
    ) -> Self {
        // Validation read these very arrays: ndim is in 0..=64 and `shape` is non-NULL when
        // ndim > 0 (NULL strides stay `None`; a 0-d tensor has empty slices).
        // SAFETY: validated: ndim in 0..=64, a non-NULL shape when ndim > 0, the arrays
        // readable for 'a (contract).
        let (shape, strides) = unsafe { dims(tensor, tensor.ndim as usize) };
        Self {
            data: tensor.data,
            device: tensor.device,
            dtype: tensor.dtype,
            byte_offset: tensor.byte_offset,
            shape,
            strides,
            version,
            flags,
            layout,
            _data: PhantomData,
        }
    }

    /// Builds a view from fields already validated together (a backend tensor's).
    ///
    /// # Safety
    /// `layout` is what [`layout::validate`] returned for exactly these fields (with
    /// `strides = Some(strides)`), and they satisfy [`TensorRef::from_raw`]'s contract for `'a`.
    #[allow(clippy::too_many_arguments)]
    #[cfg(feature = "alloc")]
    pub(crate) unsafe fn from_parts(
        data: *mut c_void,
        device: Device,
        dtype: DataType,
        byte_offset: u64,
        shape: &'a [i64],
        strides: &'a [i64],
        flags: u64,
        layout: Layout,
    ) -> Self {
        Self {
            data,
            device,
            dtype,
            byte_offset,
            shape,
            strides: Some(strides),
            version: Some(DLPackVersion::CURRENT),
            flags,
            layout,
            _data: PhantomData,
        }
    }

    /// The raw `data` field: a pointer on host-accessible devices, possibly an opaque handle
    /// elsewhere (never do arithmetic on it there).
    #[inline]
    pub fn data(&self) -> *mut c_void {
        self.data
    }

    /// `byte_offset`: bytes from `data` to the first element.
    #[inline]
    pub fn byte_offset(&self) -> u64 {
        self.byte_offset
    }

    /// The address of the first element (`data + byte_offset`) for host-accessible memory, or
    /// `None` where `data` may be an opaque handle.
    pub fn first_element_address(&self) -> Option<usize> {
        if !self.device.is_host_accessible() {
            return None;
        }
        // Validation checked that this sum fits for non-empty host tensors; empty ones may
        // carry anything, hence the wrapping.
        Some((self.data as usize).wrapping_add(self.byte_offset as usize))
    }

    /// `data + byte_offset` as a pointer that keeps `data`'s provenance (host memory only;
    /// meaningful only for non-empty tensors).
    pub(crate) fn first_element_ptr(&self) -> *mut u8 {
        (self.data as *mut u8).wrapping_add(self.byte_offset as usize)
    }

    /// The device.
    #[inline]
    pub fn device(&self) -> Device {
        self.device
    }

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Number of dimensions.
    #[inline]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The extents.
    #[inline]
    pub fn shape(&self) -> &'a [i64] {
        self.shape
    }

    /// The strides as the producer sent them: `None` when it sent NULL (legacy compact).
    #[inline]
    pub fn raw_strides(&self) -> Option<&'a [i64]> {
        self.strides
    }

    /// The stride of `axis` in elements (computed for NULL strides). `None` if out of range.
    pub fn stride(&self, axis: usize) -> Option<i64> {
        if axis >= self.shape.len() {
            return None;
        }
        Some(match self.strides {
            Some(s) => s[axis],
            // Compact row-major: products of later extents. They fit: the element count of a
            // validated tensor fits in i64 (or an extent is 0, where max(1) keeps them small).
            None => self.shape[axis + 1..]
                .iter()
                .fold(1i64, |acc, &e| acc.saturating_mul(e.max(1))),
        })
    }

    /// Every stride in elements, explicit or computed.
    pub fn strides(&self) -> impl ExactSizeIterator<Item = i64> + '_ {
        (0..self.shape.len()).map(|axis| self.stride(axis).unwrap_or(0))
    }

    /// Number of elements.
    #[inline]
    pub fn numel(&self) -> u64 {
        self.layout.numel
    }

    /// The validated layout summary.
    #[inline]
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// C / F / permuted / strided.
    #[inline]
    pub fn contiguity(&self) -> Contiguity {
        self.layout.contiguity
    }

    /// Bytes touched, `[lo, hi)` relative to `data + byte_offset`.
    #[inline]
    pub fn byte_span(&self) -> ByteSpan {
        self.layout.span
    }

    /// The DLPack version it came with (`None` for legacy).
    #[inline]
    pub fn version(&self) -> Option<DLPackVersion> {
        self.version
    }

    /// The versioned flags (0 for legacy).
    #[inline]
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// `READ_ONLY` is set.
    #[inline]
    pub fn is_read_only(&self) -> bool {
        self.flags & FLAG_READ_ONLY != 0
    }

    /// `IS_COPIED` is set: the consumer owns the data alone until it calls the deleter.
    #[inline]
    pub fn is_copied(&self) -> bool {
        self.flags & FLAG_IS_COPIED != 0
    }

    /// `IS_SUBBYTE_TYPE_PADDED` is set.
    #[inline]
    pub fn is_subbyte_padded(&self) -> bool {
        self.flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0
    }

    /// The largest power of two (up to 4096) that divides the first element's address, or
    /// `None` for memory the host cannot address.
    pub fn alignment(&self) -> Option<usize> {
        self.first_element_address().map(layout::address_alignment)
    }
}

#[cfg(feature = "alloc")]
impl From<&TensorRef<'_>> for crate::layout::TensorInfo {
    fn from(t: &TensorRef<'_>) -> Self {
        Self {
            shape: t.shape().to_vec(),
            strides: t.strides().collect(),
            dtype: t.dtype(),
            device: t.device(),
            byte_offset: t.byte_offset(),
            flags: t.flags(),
            version: t.version(),
            numel: t.numel(),
            contiguity: t.contiguity(),
            byte_span: t.byte_span(),
        }
    }
}
