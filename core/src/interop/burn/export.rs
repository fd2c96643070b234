//! A burn `TensorData` becomes a DLPack tensor of its own bytes, kept alive by the export.

use alloc::format;
use core::ffi::c_void;

use burn_std::{BoolStore, Bytes, DType, Reader, TensorData, Writer};

use crate::access::Access;
use crate::dims::Dims;
use crate::error::{DispatchError, ValueRule};
use crate::storage::TensorStorage;
use crate::{DataType, Error, ExportBuilder, ManagedTensor};

/// The DLPack type of a burn dtype.
fn dlpack_dtype(dtype: DType) -> Result<DataType, Error> {
    Ok(match dtype {
        DType::F64 => DataType::FLOAT64,
        // flex32 is stored as the bits of an f32.
        DType::F32 | DType::Flex32 => DataType::FLOAT32,
        DType::F16 => DataType::FLOAT16,
        DType::BF16 => DataType::BFLOAT16,
        DType::I64 => DataType::INT64,
        DType::I32 => DataType::INT32,
        DType::I16 => DataType::INT16,
        DType::I8 => DataType::INT8,
        DType::U64 => DataType::UINT64,
        DType::U32 => DataType::UINT32,
        DType::U16 => DataType::UINT16,
        DType::U8 => DataType::UINT8,
        // One byte of 0 or 1 per element, DLPack's bool.
        DType::Bool(BoolStore::Native | BoolStore::U8) => DataType::BOOL,
        other => {
            return Err(Error::Dispatch(DispatchError::invalid_input(
                &ValueRule {
                    field: "burn TensorData dtype",
                    expected: "one with a DLPack type (f64, f32, flex32, f16, bf16, i64, i32, \
                               i16, i8, u64, u32, u16, u8, bool stored as bytes); dequantize a \
                               quantized tensor, or convert a u32-stored bool, first",
                },
                &format!("{other:?}"),
            )));
        }
    })
}

/// The bytes of a burn `TensorData` owned by an export: the [`TensorStorage`] behind
/// [`ExportBuilder::from_burn`] (the shape and dtype are the tensor's).
#[derive(Debug)]
pub struct BurnStorage {
    bytes: Bytes,
    access: Access,
}

// SAFETY: `data_ptr` is the start of the bytes' initialised `[0, len)`, and `byte_len` their
// length. burn's `Bytes` keeps its memory behind a boxed controller, so moving the value does
// not move it, and nothing resizes it while the export holds it. An exclusive storage's
// pointer comes from a write access that needed no copy (the bytes are this value's alone);
// any other comes from a read access and is READ_ONLY: other handles share the bytes and burn
// expects them never to change.
unsafe impl TensorStorage for BurnStorage {
    fn data_ptr(&mut self) -> *mut c_void {
        let bytes = match self.access {
            Access::Exclusive => self
                .bytes
                .write(Writer::new().no_copy())
                .map(|b| b.as_mut_ptr()),
            _ => self
                .bytes
                .read(Reader::new())
                .map(|b| b.as_ptr().cast_mut()),
        };
        // A failure was ruled out by `from_burn`, which made the same access; a NULL pointer
        // is refused by the builder.
        bytes.map_or(core::ptr::null_mut(), |p| p.cast())
    }
    fn byte_len(&self) -> usize {
        self.bytes.len()
    }
    fn access(&self) -> Access {
        self.access
    }
}

impl ExportBuilder<BurnStorage> {
    /// Exports a burn `TensorData` without a copy: its bytes, compact row-major, with its
    /// shape. The export holds the data until its deleter runs. Bytes the data owns alone are
    /// exclusive; shared bytes (burn copies those before writing) make the export READ_ONLY.
    ///
    /// Errors: [`DispatchError::InvalidInput`] naming a dtype DLPack cannot carry (quantized,
    /// a `u32`-stored bool), a dimension over `i64::MAX`, or bytes the host cannot read.
    ///
    /// ```
    /// use burn_std::TensorData;
    /// use dlport_core::{DataType, ExportBuilder};
    ///
    /// let data = TensorData::new(vec![true, false, true], [3]);
    /// let t = ExportBuilder::from_burn(data)?.build()?;
    /// assert_eq!(t.view().dtype(), DataType::BOOL);
    /// assert!(t.is_exclusive()); // the bytes were the data's alone
    ///
    /// let shared = TensorData::new(vec![1u16, 2], [2]).into_bytes().shared();
    /// let t = ExportBuilder::from_burn(TensorData::from_bytes(shared, [2], burn_std::DType::U16))?
    ///     .build()?;
    /// assert!(t.is_read_only()); // burn expects shared bytes never to change
    /// # Ok::<(), dlport_core::Error>(())
    /// ```
    #[inline]
    pub fn from_burn(data: TensorData) -> Result<Self, Error> {
        let dtype = dlpack_dtype(data.dtype())?;
        let (mut bytes, shape, _) = data.into_parts();
        let dims = shape.as_slice();
        if let Some(&d) = dims.iter().find(|&&d| i64::try_from(d).is_err()) {
            return Err(Error::Dispatch(DispatchError::invalid_input(
                &ValueRule {
                    field: "burn TensorData shape",
                    expected: "dimensions of at most i64::MAX",
                },
                &format!("{d}"),
            )));
        }
        let extents = Dims::collect(
            dims.len(),
            dims.iter().map(|&d| d as i64),
            None::<core::iter::Empty<i64>>,
        );
        let access = if bytes.write(Writer::new().no_copy()).is_ok() {
            Access::Exclusive
        } else {
            bytes.read(Reader::new()).map_err(|e| {
                Error::Dispatch(DispatchError::invalid_input(
                    &ValueRule {
                        field: "burn TensorData bytes",
                        expected: "bytes the host can read",
                    },
                    &format!("{e:?}"),
                ))
            })?;
            Access::ReadOnly
        };
        let storage = BurnStorage { bytes, access };
        Ok(ExportBuilder::with_dims(storage, dtype, extents, false))
    }
}

/// For burn 0.22 (`burn-std = "0.22.1"`: >= 0.22.1, < 0.23). A `TensorData` of another burn-std
/// version is another type to the compiler, which then says the trait bound `ManagedTensor:
/// TryFrom<TensorData>` is not satisfied (expected `burn_std::…::TensorData`, found
/// `TensorData`): `cargo tree -i burn-std` shows the two versions; take the range above (the
/// adapter table of the crate's README names every adapter's range).
impl TryFrom<TensorData> for ManagedTensor {
    type Error = Error;

    /// [`ExportBuilder::from_burn`], built as DLPack 1.3.
    #[inline]
    fn try_from(data: TensorData) -> Result<Self, Error> {
        ExportBuilder::from_burn(data)?.build()
    }
}
