//! A DLPack tensor becomes a candle CPU tensor, copied exactly once into the vector candle
//! then owns.

use alloc::vec::Vec;

use candle_core::op::BackpropOp;
use candle_core::{CpuStorage, Storage, Tensor};
use half::{bf16, f16};

use crate::error::{AccessError, DispatchError, ValueRule};
use crate::{DataType, Error, ManagedTensor, TensorRef};

const CANDLE_DTYPES: &ValueRule = &ValueRule {
    field: "dtype",
    expected: "one of candle's: uint8, uint32, int16, int32, int64, bfloat16, float16, float32, \
               float64, float8_e4m3fn, float8_e8m0fnu, float4_e2m1fn, float6_e2m3fn, \
               float6_e3m2fn",
};

/// The bytes of `src`, compact and packed (sub-byte and byte-sized types candle stores as
/// bytes).
fn bytes(src: &TensorRef<'_>) -> Result<Vec<u8>, Error> {
    if let Ok(bytes) = src.as_bytes() {
        if !src.is_subbyte_padded() {
            return Ok(bytes.to_vec());
        }
    }
    let len = crate::copy::compact_bytes(src.dtype(), src.shape())?;
    let mut out = alloc::vec![0u8; len];
    src.copy_to_compact(&mut out)?;
    Ok(out)
}

impl TensorRef<'_> {
    /// A candle CPU tensor holding a copy of this tensor's elements: exactly one copy, any
    /// layout (compacted on the way). Candle's storage is a `Vec` candle owns, so a copy
    /// cannot be avoided; the vector copied into is the one candle keeps.
    ///
    /// Errors: [`AccessError::NotHostAccessible`]; [`DispatchError::InvalidInput`] for a dtype
    /// candle does not have (naming it); [`DispatchError::AllocationLimit`] past the
    /// process-wide allocation limit.
    ///
    /// ```
    /// use dlport_core::ExportBuilder;
    ///
    /// // A flipped vector (negative stride) becomes a compact candle tensor.
    /// let t = ExportBuilder::from_vec(vec![1i64, 2, 3], &[3]).strides(&[-1]).byte_offset(16).build()?;
    /// assert_eq!(t.view().to_candle()?.to_vec1::<i64>()?, [3, 2, 1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_candle(&self) -> Result<Tensor, Error> {
        if !self.device().is_host_accessible() {
            return Err(Error::Access(AccessError::NotHostAccessible {
                device: self.device(),
            }));
        }
        let dtype = self.dtype();
        let bytes_needed = crate::copy::compact_bytes(dtype, self.shape())?;
        crate::limit::check_alloc(bytes_needed as u128, None)?;
        let storage = match dtype {
            DataType::UINT8 => CpuStorage::U8(self.to_vec::<u8>()?),
            DataType::UINT32 => CpuStorage::U32(self.to_vec::<u32>()?),
            DataType::INT16 => CpuStorage::I16(self.to_vec::<i16>()?),
            DataType::INT32 => CpuStorage::I32(self.to_vec::<i32>()?),
            DataType::INT64 => CpuStorage::I64(self.to_vec::<i64>()?),
            DataType::BFLOAT16 => CpuStorage::BF16(self.to_vec::<bf16>()?),
            DataType::FLOAT16 => CpuStorage::F16(self.to_vec::<f16>()?),
            DataType::FLOAT32 => CpuStorage::F32(self.to_vec::<f32>()?),
            DataType::FLOAT64 => CpuStorage::F64(self.to_vec::<f64>()?),
            // float8's F8E4M3 is a transparent byte (bytemuck::Pod): the vector is reused.
            DataType::FLOAT8_E4M3FN => {
                CpuStorage::F8E4M3(bytemuck::allocation::cast_vec(bytes(self)?))
            }
            DataType::FLOAT8_E8M0FNU => CpuStorage::F8E8M0(bytes(self)?),
            DataType::FLOAT4_E2M1FN => CpuStorage::F4(bytes(self)?),
            DataType::FLOAT6_E2M3FN => CpuStorage::F6E2M3(bytes(self)?),
            DataType::FLOAT6_E3M2FN => CpuStorage::F6E3M2(bytes(self)?),
            other => {
                return Err(Error::Dispatch(DispatchError::invalid_input(
                    CANDLE_DTYPES,
                    &alloc::string::ToString::to_string(&other),
                )));
            }
        };
        let shape: Vec<usize> = self.shape().iter().map(|&e| e as usize).collect();
        Ok(Tensor::from_storage(
            Storage::Cpu(storage),
            shape,
            BackpropOp::none(),
            false,
        ))
    }
}

impl ManagedTensor {
    /// [`TensorRef::to_candle`] of this tensor: one copy into a candle CPU tensor. The
    /// DLPack tensor can be dropped (its deleter run) right after.
    pub fn to_candle(&self) -> Result<Tensor, Error> {
        self.view().to_candle()
    }
}
