//! A candle CPU tensor becomes a DLPack tensor of the same memory, kept alive by the export.

use alloc::format;
use core::ffi::c_void;

use candle_core::{CpuStorage, Storage, Tensor};

use crate::access::Access;
use crate::dims::Dims;
use crate::error::{AccessError, DispatchError, ValueRule};
use crate::storage::TensorStorage;
use crate::{DataType, Error, ExportBuilder, ManagedTensor};

/// The DLPack type of a candle dtype.
pub(super) fn dlpack_dtype(dtype: candle_core::DType) -> Result<DataType, Error> {
    use candle_core::DType as D;
    Ok(match dtype {
        D::U8 => DataType::UINT8,
        D::U32 => DataType::UINT32,
        D::I16 => DataType::INT16,
        D::I32 => DataType::INT32,
        D::I64 => DataType::INT64,
        D::BF16 => DataType::BFLOAT16,
        D::F16 => DataType::FLOAT16,
        D::F32 => DataType::FLOAT32,
        D::F64 => DataType::FLOAT64,
        D::F8E4M3 => DataType::FLOAT8_E4M3FN,
        D::F8E8M0 => DataType::FLOAT8_E8M0FNU,
        D::F6E2M3 => DataType::FLOAT6_E2M3FN,
        D::F6E3M2 => DataType::FLOAT6_E3M2FN,
        D::F4 => DataType::FLOAT4_E2M1FN,
        // A dtype added to candle after this adapter was written.
        other => {
            return Err(Error::Dispatch(DispatchError::invalid_input(
                &ValueRule {
                    field: "candle tensor dtype",
                    expected: "one with a DLPack type (u8, u32, i16, i32, i64, bf16, f16, f32, \
                               f64, f8e4m3, f8e8m0, f6e2m3, f6e3m2, f4)",
                },
                other.as_str(),
            )));
        }
    })
}

/// The start and the byte length of a CPU storage's vector.
fn storage_bytes(storage: &CpuStorage) -> (*const u8, usize) {
    fn raw<T>(v: &[T]) -> (*const u8, usize) {
        (v.as_ptr().cast(), size_of_val(v))
    }
    match storage {
        CpuStorage::U8(v) => raw(v),
        CpuStorage::U32(v) => raw(v),
        CpuStorage::I16(v) => raw(v),
        CpuStorage::I32(v) => raw(v),
        CpuStorage::I64(v) => raw(v),
        CpuStorage::BF16(v) => raw(v),
        CpuStorage::F16(v) => raw(v),
        CpuStorage::F32(v) => raw(v),
        CpuStorage::F64(v) => raw(v),
        CpuStorage::F8E4M3(v) => raw(v),
        CpuStorage::F6E2M3(v)
        | CpuStorage::F6E3M2(v)
        | CpuStorage::F4(v)
        | CpuStorage::F8E8M0(v) => raw(v),
    }
}

/// A candle tensor owned by an export: the [`TensorStorage`] behind
/// [`ExportBuilder::from_candle`]. Holding the tensor holds its storage, whose vector neither
/// moves nor shrinks while any handle to it lives.
#[derive(Debug)]
pub struct CandleStorage {
    tensor: Tensor,
    /// The vector's start (an address, so that the storage stays `Send`).
    base: usize,
    bytes: usize,
}

impl CandleStorage {
    /// The tensor back.
    pub fn into_inner(self) -> Tensor {
        self.tensor
    }
}

// SAFETY: `base` is the start of the CPU storage's vector and `bytes` its length, read under
// candle's lock; the vector lives in an `Arc` that `tensor` holds, and candle never reallocates
// a storage's vector (in-place writes, `Var::set` and `slice_set`, write into it), so the
// pointer stays valid and unmoved while the export lives. Other candle handles may read and
// write the storage, so the access is shared.
unsafe impl TensorStorage for CandleStorage {
    fn data_ptr(&mut self) -> *mut c_void {
        self.base as *mut c_void
    }
    fn byte_len(&self) -> usize {
        self.bytes
    }
    fn access(&self) -> Access {
        Access::Shared
    }
}

const CPU_ONLY: &ValueRule = &ValueRule {
    field: "candle tensor device",
    expected: "the CPU (move it with `to_device(&Device::Cpu)` first)",
};

impl ExportBuilder<CandleStorage> {
    /// Exports a candle CPU tensor without a copy: its storage's memory with the tensor's
    /// shape, strides and offset. The export holds the tensor (a cheap clone of a handle keeps
    /// the caller's) until its deleter runs.
    ///
    /// Errors: a tensor on another device ([`DispatchError::InvalidInput`] naming it); a
    /// packed sub-byte tensor (`f4`, `f6*`) that is not compact or does not start at a byte
    /// ([`AccessError::NotContiguous`] / [`DispatchError::InvalidInput`]).
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use dlport_core::ExportBuilder;
    ///
    /// let x = Tensor::new(&[[1u8, 2], [3, 4]], &Device::Cpu)?;
    /// let t = ExportBuilder::from_candle(x.clone())?.read_only(true).build()?;
    /// assert!(t.is_read_only());
    /// assert_eq!(t.as_slice::<u8>()?, [1, 2, 3, 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn from_candle(tensor: Tensor) -> Result<Self, Error> {
        let dtype = dlpack_dtype(tensor.dtype())?;
        let (base, bytes) = {
            let (storage, _) = tensor.storage_and_layout();
            let Storage::Cpu(cpu) = &*storage else {
                return Err(Error::Dispatch(DispatchError::invalid_input(
                    CPU_ONLY,
                    &format!("{:?}", tensor.device().location()),
                )));
            };
            let (base, bytes) = storage_bytes(cpu);
            (base as usize, bytes)
        };
        let layout = tensor.layout();
        let offset_bits = layout.start_offset() as u64 * u64::from(dtype.storage_bits(false));
        if dtype.is_sub_byte() {
            if !layout.is_contiguous() {
                return Err(Error::Access(AccessError::NotContiguous {
                    contiguity: crate::layout::Contiguity::Strided,
                }));
            }
            if offset_bits % 8 != 0 {
                return Err(Error::Dispatch(DispatchError::invalid_input(
                    &ValueRule {
                        field: "candle layout start_offset",
                        expected: "at a whole byte for a packed sub-byte dtype",
                    },
                    &format!("{} ({dtype})", layout.start_offset()),
                )));
            }
        }
        let strided = !layout.is_contiguous();
        let dims = Dims::collect(
            layout.dims().len(),
            layout.dims().iter().map(|&d| d as i64),
            strided.then(|| layout.stride().iter().map(|&s| s as i64)),
        );
        let storage = CandleStorage {
            tensor,
            base,
            bytes,
        };
        Ok(ExportBuilder::with_dims(storage, dtype, dims, strided).byte_offset(offset_bits / 8))
    }
}

/// For candle-core 0.11 (`candle-core = "0.11.1"`: >= 0.11.1, < 0.12). A `Tensor` of another
/// candle-core version is another type to the compiler, which then says the trait bound
/// `ManagedTensor: TryFrom<Tensor>` is not satisfied (expected `candle_core::…::Tensor`, found
/// `Tensor`): `cargo tree -i candle-core` shows the two versions; take the range above (the adapter
/// table of the crate's README names every adapter's range).
impl TryFrom<Tensor> for ManagedTensor {
    type Error = Error;

    /// [`ExportBuilder::from_candle`], built as DLPack 1.3.
    #[inline]
    fn try_from(tensor: Tensor) -> Result<Self, Error> {
        ExportBuilder::from_candle(tensor)?.build()
    }
}
