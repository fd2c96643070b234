//! A DLPack tensor becomes a burn `TensorData`: in place when burn can read it as it is,
//! copied once otherwise.

use alloc::format;
use alloc::vec::Vec;

use burn_std::{AllocationProperty, BoolStore, Bytes, DType, TensorData};
use bytemuck::NoUninit;
use half::{bf16, f16};

use crate::abi::DeviceType;
use crate::dtype::{Bool8, Element};
use crate::error::{AccessError, DispatchError, ValueRule};
use crate::{DataType, Error, ManagedTensor, TensorRef};

const BURN_DTYPES: &ValueRule = &ValueRule {
    field: "dtype",
    expected: "one of burn's: float64, float32, float16, bfloat16, int64, int32, int16, int8, \
               uint64, uint32, uint16, uint8, bool",
};

/// The burn dtype of a DLPack type.
fn burn_dtype(dtype: DataType) -> Result<DType, Error> {
    Ok(match dtype {
        DataType::FLOAT64 => DType::F64,
        DataType::FLOAT32 => DType::F32,
        DataType::FLOAT16 => DType::F16,
        DataType::BFLOAT16 => DType::BF16,
        DataType::INT64 => DType::I64,
        DataType::INT32 => DType::I32,
        DataType::INT16 => DType::I16,
        DataType::INT8 => DType::I8,
        DataType::UINT64 => DType::U64,
        DataType::UINT32 => DType::U32,
        DataType::UINT16 => DType::U16,
        DataType::UINT8 => DType::U8,
        DataType::BOOL => DType::Bool(BoolStore::Native),
        other => {
            return Err(Error::Dispatch(DispatchError::invalid_input(
                BURN_DTYPES,
                &alloc::string::ToString::to_string(&other),
            )));
        }
    })
}

/// The tensor's shape as burn's dimensions (validated DLPack extents are never negative).
fn dims(src: &TensorRef<'_>) -> Vec<usize> {
    src.shape().iter().map(|&e| e as usize).collect()
}

/// `TensorData` of checked parts: its own check cannot fail, and would be reported if it did.
fn tensor_data(bytes: Bytes, dims: Vec<usize>, dtype: DType) -> Result<TensorData, Error> {
    TensorData::try_from_bytes(bytes, dims, dtype).map_err(|e| {
        Error::Dispatch(DispatchError::invalid_input(
            &ValueRule {
                field: "burn TensorData",
                expected: "bytes of the shape's size",
            },
            &format!("{e}"),
        ))
    })
}

/// The elements of `src` as `T`s, row-major, in bytes burn owns with `T`'s alignment.
fn copied<T: Element + NoUninit + Send + Sync>(src: &TensorRef<'_>) -> Result<Bytes, Error> {
    Ok(Bytes::from_elems(src.to_vec::<T>()?))
}

/// The bool elements of `src` as burn reads them, row-major, in bytes burn owns: each byte
/// normalised to 0 or 1. DLPack's bool is a byte where any non-zero value is true ([`Bool8`]);
/// burn reads its bytes as Rust `bool`s, for which only 0 and 1 are valid values (2 or 255
/// would be undefined behaviour in burn's `iter::<bool>()`).
fn copied_bools(src: &TensorRef<'_>) -> Result<Bytes, Error> {
    let mut elems = src.to_vec::<Bool8>()?;
    for b in &mut elems {
        *b = Bool8::from(b.get());
    }
    Ok(Bytes::from_elems(elems))
}

/// Whether every byte is a valid Rust `bool` (0 or 1): burn can read them in place.
fn valid_bools(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b <= 1)
}

/// A DLPack tensor held by burn's bytes: the deleter runs when the last handle is dropped.
struct Held(ManagedTensor);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        // `into_burn` checked that the bytes are readable, so the empty slice is never used.
        self.0.view().as_bytes().unwrap_or(&[])
    }
}

impl TensorRef<'_> {
    /// A burn `TensorData` holding a copy of this tensor's elements: exactly one copy, any
    /// layout (compacted on the way), into bytes burn owns. Bool bytes are normalised on the
    /// way (any non-zero byte becomes 1, as DLPack reads it), since burn reads them as Rust
    /// `bool`s.
    ///
    /// Errors: [`AccessError::NotHostAccessible`]; [`DispatchError::InvalidInput`] for a dtype
    /// burn does not have (naming it); [`DispatchError::AllocationLimit`] past the
    /// process-wide allocation limit.
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    ///
    /// // A transposed matrix (strides (1, 2)) becomes compact burn data.
    /// let t = ExportBuilder::from_vec(vec![1i32, 4, 2, 5, 3, 6], &[2, 3]).strides(&[1, 2]).build()?;
    /// let data = t.view().to_burn()?;
    /// assert_eq!(data.shape().as_slice(), [2, 3]);
    /// assert_eq!(data.as_slice::<i32>().unwrap(), [1, 2, 3, 4, 5, 6]);
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn to_burn(&self) -> Result<TensorData, Error> {
        if !self.device().is_host_accessible() {
            return Err(Error::Access(AccessError::NotHostAccessible {
                device: self.device(),
            }));
        }
        let dtype = burn_dtype(self.dtype())?;
        let bytes = match dtype {
            DType::F64 => copied::<f64>(self)?,
            DType::F32 => copied::<f32>(self)?,
            DType::F16 => copied::<f16>(self)?,
            DType::BF16 => copied::<bf16>(self)?,
            DType::I64 => copied::<i64>(self)?,
            DType::I32 => copied::<i32>(self)?,
            DType::I16 => copied::<i16>(self)?,
            DType::I8 => copied::<i8>(self)?,
            DType::U64 => copied::<u64>(self)?,
            DType::U32 => copied::<u32>(self)?,
            DType::U16 => copied::<u16>(self)?,
            DType::U8 => copied::<u8>(self)?,
            DType::Bool(_) => copied_bools(self)?,
            // `burn_dtype` makes none of burn's other dtypes.
            other => {
                return Err(Error::Dispatch(DispatchError::invalid_input(
                    BURN_DTYPES,
                    &format!("{other:?}"),
                )));
            }
        };
        tensor_data(bytes, dims(self), dtype)
    }
}

impl ManagedTensor {
    /// This tensor as a burn `TensorData`, without a copy when burn can read the memory as it
    /// is: host memory, compact row-major, the first element aligned for its type, and for
    /// bools every byte 0 or 1 (others are normalised by the copy, as in
    /// [`TensorRef::to_burn`]). burn then
    /// shares the memory with the producer, as any DLPack consumer does, reads it in place
    /// and copies it before it writes; the tensor's deleter runs when burn drops the last
    /// handle. Pinned host memory (`kDLCUDAHost`, `kDLROCMHost`) is marked as pinned for
    /// burn's GPU backends. Otherwise: one copy, as [`TensorRef::to_burn`].
    ///
    /// Errors: as [`TensorRef::to_burn`]. The tensor is consumed either way.
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    ///
    /// let t = ExportBuilder::from_vec(vec![1.5f64, 2.5], &[2]).build()?;
    /// let address = t.view().as_bytes()?.as_ptr();
    /// let data = t.into_burn()?;
    /// assert_eq!(data.as_slice::<f64>().unwrap(), [1.5, 2.5]);
    /// assert_eq!(data.as_bytes().as_ptr(), address); // the same memory
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    pub fn into_burn(self) -> Result<TensorData, Error> {
        let view = self.view();
        let dtype = burn_dtype(view.dtype())?;
        let aligned = |bytes: &[u8]| (bytes.as_ptr() as usize) % dtype.size() == 0;
        // Bools are read in place only where every byte is 0 or 1; otherwise the copy
        // normalises them (any non-zero byte is true).
        let bools_ok = |bytes: &[u8]| !matches!(dtype, DType::Bool(_)) || valid_bools(bytes);
        let in_place = view.device().is_host_accessible()
            && !view.is_subbyte_padded()
            && view
                .as_bytes()
                .is_ok_and(|bytes| aligned(bytes) && bools_ok(bytes));
        if !in_place {
            return view.to_burn();
        }
        let property = match view.device().device_type {
            DeviceType::CUDA_HOST | DeviceType::ROCM_HOST => AllocationProperty::Pinned,
            _ => AllocationProperty::Other,
        };
        let dims = dims(&view);
        let bytes = Bytes::from_shared(bytes::Bytes::from_owner(Held(self)), property);
        tensor_data(bytes, dims, dtype)
    }
}
