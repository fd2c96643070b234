//! Tensors past one machine, through Apache Arrow (feature `arrow`): a host tensor becomes an
//! `arrow.fixed_shape_tensor` column (Arrow's canonical extension type) and an Arrow column
//! becomes DLPack tensors, without a copy in either direction where the layout allows.
//!
//! A tensor of shape `[n, d1, …, dk]` is `n` tensors of shape `[d1, …, dk]`: a
//! `FixedSizeList<value>[d1 × … × dk]` array of length `n` whose field carries
//! `ARROW:extension:name = arrow.fixed_shape_tensor` and `{"shape": [d1, …, dk]}` (pyarrow's
//! `FixedShapeTensorArray.from_numpy_ndarray` convention).
//! - **To Arrow**: a row-major tensor is viewed in place: the Arrow buffer owns the DLPack
//!   tensor, whose deleter runs when Arrow drops the last reference to the buffer. A tensor
//!   whose inner axes are dense in another order (column-major matrices) is viewed in place too,
//!   with the extension's `permutation`. Anything else (or `CopyPolicy::Always`) is one compact
//!   copy, as the copy policy allows.
//! - **From Arrow**: the values buffer is viewed in place; the tensor holds the Arrow buffer (a
//!   reference count) and is READ_ONLY, since Arrow buffers are immutable. A `permutation`
//!   becomes strides.
//! - Element types: `int8`–`int64`, `uint8`–`uint64`, `float16`, `float32`, `float64`. Others are
//!   refused by name (Arrow has no bfloat16, complex, 8-bit float or sub-byte types, and its
//!   boolean is bit-packed where DLPack's is a byte).
//!
//! [`write_ipc_stream`] and [`read_ipc_stream`] carry tensors through the Arrow IPC stream
//! format, which pyarrow, Flight and the engines built on Arrow read.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray, RecordBatch, make_array};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType as ArrowType, Field, Schema};
use dlport_core::{BackendError, BackendReport, DispatchError, ValueRule};
use dlport_core::{
    CopyPolicy, CopyReason, DataType, Error, ExportBuilder, ManagedTensor, MemoryClass, TensorRef,
    TensorStorage,
};

/// The canonical extension's name.
pub const EXTENSION_NAME: &str = "arrow.fixed_shape_tensor";
/// The field metadata keys of an extension type.
pub const NAME_KEY: &str = "ARROW:extension:name";
/// See [`NAME_KEY`].
pub const METADATA_KEY: &str = "ARROW:extension:metadata";

/// The name in this module's errors.
const NAME: &str = "arrow";

// ── The constructors of this module's errors ──

fn refused(what: &'static str) -> Error {
    BackendError::unsupported(NAME, what).into()
}

fn bad(rule: &'static ValueRule, value: u64) -> Error {
    DispatchError::InvalidValue { rule, value }.into()
}

fn arrow_error(operation: &'static str, e: ArrowError) -> Error {
    let (code, detail) = match &e {
        ArrowError::IoError(_, io) => (
            io.raw_os_error().unwrap_or(0),
            "reading or writing the stream failed (the code is errno)",
        ),
        ArrowError::ParseError(_) | ArrowError::IpcError(_) | ArrowError::SchemaError(_) => {
            (0, "the bytes are not a valid Arrow IPC stream")
        }
        _ => (
            0,
            "Arrow refused the array (its layout or type is inconsistent)",
        ),
    };
    Error::Backend(BackendError::Failed {
        code,
        report: BackendReport::new(NAME, operation, detail).with_source(e),
    })
}

// ── Element types ──

/// The Arrow type of a DLPack element type, or the refusal naming it.
pub fn arrow_type(dtype: DataType) -> Result<ArrowType, Error> {
    use dlport_core::TypeCode as C;
    if dtype.lanes != 1 {
        return Err(refused(
            "vector element types (lanes > 1): Arrow has none; make the lanes an axis",
        ));
    }
    Ok(match (dtype.code, dtype.bits) {
        (C::INT, 8) => ArrowType::Int8,
        (C::INT, 16) => ArrowType::Int16,
        (C::INT, 32) => ArrowType::Int32,
        (C::INT, 64) => ArrowType::Int64,
        (C::UINT, 8) => ArrowType::UInt8,
        (C::UINT, 16) => ArrowType::UInt16,
        (C::UINT, 32) => ArrowType::UInt32,
        (C::UINT, 64) => ArrowType::UInt64,
        (C::FLOAT, 16) => ArrowType::Float16,
        (C::FLOAT, 32) => ArrowType::Float32,
        (C::FLOAT, 64) => ArrowType::Float64,
        (C::INT | C::UINT, _) => {
            return Err(refused(
                "sub-byte integers (int1-int7, uint1-uint7): Arrow has no such types",
            ));
        }
        (C::BFLOAT, _) => return Err(refused("bfloat16: Arrow has no bfloat16 type")),
        (C::BOOL, _) => {
            return Err(refused(
                "bool: Arrow's boolean is bit-packed, DLPack's a byte per element; cast to \
                 uint8 first",
            ));
        }
        (C::COMPLEX | C::BCOMPLEX, _) => {
            return Err(refused("complex and bcomplex: Arrow has no complex type"));
        }
        (C::OPAQUE_HANDLE, _) => return Err(refused("opaque handles: not data Arrow can hold")),
        _ => {
            return Err(refused(
                "8-, 6- and 4-bit floats (float8_*, float6_*, float4_e2m1fn): Arrow has no \
                 such types",
            ));
        }
    })
}

/// The DLPack element type of an Arrow value type.
fn dlpack_type(t: &ArrowType) -> Result<DataType, Error> {
    Ok(match t {
        ArrowType::Int8 => DataType::INT8,
        ArrowType::Int16 => DataType::INT16,
        ArrowType::Int32 => DataType::INT32,
        ArrowType::Int64 => DataType::INT64,
        ArrowType::UInt8 => DataType::UINT8,
        ArrowType::UInt16 => DataType::UINT16,
        ArrowType::UInt32 => DataType::UINT32,
        ArrowType::UInt64 => DataType::UINT64,
        ArrowType::Float16 => DataType::FLOAT16,
        ArrowType::Float32 => DataType::FLOAT32,
        ArrowType::Float64 => DataType::FLOAT64,
        ArrowType::Boolean => {
            return Err(refused(
                "Arrow booleans as tensor values (bit-packed; DLPack's bool is a byte)",
            ));
        }
        _ => {
            return Err(refused(
                "this Arrow value type: tensors hold Int8-Int64, UInt8-UInt64 and \
                 Float16-Float64 values",
            ));
        }
    })
}

// ── DLPack → Arrow ──

/// The DLPack tensor that owns an Arrow buffer's memory (dropped when Arrow drops the buffer;
/// the mutex only makes it `RefUnwindSafe`, as Arrow asks of an owner).
struct Owner {
    _tensor: std::sync::Mutex<ManagedTensor>,
}

/// For a tensor whose first axis is outermost and whose inner axes are dense in some order, the
/// physical (row-major) order of the inner axes, outermost first; `None` otherwise.
fn physical_order(view: &TensorRef<'_>) -> Option<Vec<usize>> {
    let shape = view.shape();
    let inner = shape.len() - 1;
    if view.contiguity().is_row_major() {
        return Some((0..inner).collect());
    }
    let strides: Vec<i64> = view.strides().collect();
    let mut order: Vec<usize> = (1..shape.len()).collect();
    // Outermost first; among equal strides (extent-1 axes) keep the logical order.
    order.sort_by_key(|&a| std::cmp::Reverse(strides[a]));
    let mut expected = 1i64;
    for &a in order.iter().rev() {
        if shape[a] > 1 && strides[a] != expected {
            return None;
        }
        expected = expected.checked_mul(shape[a])?;
    }
    if shape[0] > 1 && strides[0] != expected {
        return None;
    }
    Some(order.into_iter().map(|a| a - 1).take(inner).collect())
}

/// A host tensor as an `arrow.fixed_shape_tensor` column named `name`: the field (with the
/// extension's metadata) and the array. See the module documentation for what is viewed in
/// place and what is copied.
pub fn to_arrow(
    tensor: ManagedTensor,
    name: &str,
    copy: CopyPolicy,
) -> Result<(Field, FixedSizeListArray), Error> {
    let view = tensor.view();
    if !view.device().is_host_accessible() {
        return Err(Error::Access(dlport_core::AccessError::NotHostAccessible {
            device: view.device(),
        }));
    }
    if view.device().memory_class() == MemoryClass::Managed {
        crate::sync_managed()?;
    }
    let value = arrow_type(view.dtype())?;
    let shape = view.shape().to_vec();
    if shape.is_empty() {
        return Err(bad(
            &ValueRule {
                field: "ndim",
                expected: "at least 1: the first axis becomes the Arrow array's length",
            },
            0,
        ));
    }
    let size = view.dtype().size_bytes();
    let numel = usize::try_from(view.numel()).map_err(|_| {
        bad(
            &ValueRule {
                field: "numel",
                expected: "at most usize::MAX",
            },
            view.numel(),
        )
    })?;
    let list_size = shape[1..].iter().try_fold(1i64, |a, &d| a.checked_mul(d));
    let list_size = list_size.and_then(|s| i32::try_from(s).ok()).ok_or(bad(
        &ValueRule {
            field: "elements per tensor",
            expected: "at most i32::MAX: an Arrow FixedSizeList holds at most 2^31 - 1 values",
        },
        shape[1..]
            .iter()
            .fold(1u64, |a, &d| a.saturating_mul(d as u64)),
    ))?;
    let aligned = view.first_element_address().is_none_or(|a| a % size == 0);
    let order = physical_order(&view);
    let mut permutation = None;
    let values = match (&order, copy) {
        (Some(order), CopyPolicy::Never | CopyPolicy::IfNeeded) if aligned && numel != 0 => {
            if order.windows(2).any(|w| w[0] > w[1]) {
                // permutation[i] = the physical position of logical inner axis i.
                let mut p = vec![0usize; order.len()];
                for (k, &i) in order.iter().enumerate() {
                    p[i] = k;
                }
                permutation = Some(p);
            }
            // `data + byte_offset`, keeping `data`'s provenance (the range was validated).
            let first = view
                .data()
                .cast::<u8>()
                .wrapping_add(view.byte_offset() as usize);
            let ptr =
                NonNull::new(first).ok_or(Error::Layout(dlport_core::LayoutError::NullData {
                    numel: numel as u64,
                }))?;
            // SAFETY: the tensor is host memory, dense from its first element (strides checked
            // by `physical_order`, all positive), so `numel * size` bytes are valid from `ptr`;
            // the owner keeps them alive until Arrow drops the buffer, and Arrow never writes
            // through a buffer it did not allocate.
            unsafe {
                Buffer::from_custom_allocation(
                    ptr,
                    numel * size,
                    Arc::new(Owner {
                        _tensor: std::sync::Mutex::new(tensor),
                    }),
                )
            }
        }
        (_, CopyPolicy::Never) if numel != 0 => {
            return Err(Error::Dispatch(dlport_core::DispatchError::CopyRequired {
                reason: if aligned {
                    CopyReason::Layout {
                        contiguity: view.contiguity(),
                    }
                } else {
                    CopyReason::Alignment {
                        address: view.first_element_address().unwrap_or(0).into(),
                        required: size as u32,
                    }
                },
            }));
        }
        _ => {
            let bytes = numel * size;
            dlport_core::check_alloc(bytes as u128, None)?;
            let mut buf = MutableBuffer::from_len_zeroed(bytes);
            dlport_core::backend::copy_to_compact(&view, buf.as_slice_mut())?;
            buf.into()
        }
    };
    let physical: Vec<i64> = match (&order, &permutation) {
        (Some(order), Some(_)) => order.iter().map(|&i| shape[i + 1]).collect(),
        _ => shape[1..].to_vec(),
    };
    let values = make_array(
        ArrayData::try_new(value.clone(), numel, None, 0, vec![values], vec![])
            .map_err(|e| arrow_error("ArrayData::try_new", e))?,
    );
    let item = Arc::new(Field::new("item", value, true));
    let array =
        FixedSizeListArray::try_new_with_length(item, list_size, values, None, shape[0] as usize)
            .map_err(|e| arrow_error("FixedSizeListArray::try_new", e))?;
    let mut meta = serde_json::json!({ "shape": physical });
    if let Some(p) = permutation {
        meta["permutation"] = serde_json::json!(p);
    }
    let field = Field::new(name, array.data_type().clone(), false).with_metadata(HashMap::from([
        (NAME_KEY.to_owned(), EXTENSION_NAME.to_owned()),
        (METADATA_KEY.to_owned(), meta.to_string()),
    ]));
    Ok((field, array))
}

/// A one-column record batch holding the tensor (see [`to_arrow`]).
pub fn to_record_batch(
    tensor: ManagedTensor,
    name: &str,
    copy: CopyPolicy,
) -> Result<RecordBatch, Error> {
    let (field, array) = to_arrow(tensor, name, copy)?;
    RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![Arc::new(array)])
        .map_err(|e| arrow_error("RecordBatch::try_new", e))
}

// ── Arrow → DLPack ──

/// An Arrow buffer as the storage of a DLPack tensor (read-only: Arrow buffers are immutable).
struct ArrowStorage(Buffer);

// SAFETY: a Buffer's bytes do not move and stay valid while it lives (it holds a reference
// count); other Arrow arrays may read them, nobody writes them: ReadOnly.
unsafe impl TensorStorage for ArrowStorage {
    fn data_ptr(&mut self) -> *mut std::ffi::c_void {
        self.0.as_ptr().cast_mut().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len()
    }
    fn access(&self) -> dlport_core::Access {
        dlport_core::Access::ReadOnly
    }
}

/// The shape and permutation an `arrow.fixed_shape_tensor` field declares.
fn extension(field: &Field) -> Result<(Vec<i64>, Option<Vec<usize>>), Error> {
    if field.metadata().get(NAME_KEY).map(String::as_str) != Some(EXTENSION_NAME) {
        return Err(refused(
            "columns that are not arrow.fixed_shape_tensor (the field's ARROW:extension:name)",
        ));
    }
    let text = field
        .metadata()
        .get(METADATA_KEY)
        .map_or("", String::as_str);
    let meta: serde_json::Value = serde_json::from_str(text).map_err(|_| {
        bad(
            &ValueRule {
                field: "ARROW:extension:metadata length",
                expected: "a JSON object such as {\"shape\": [2, 3]}: the metadata is not JSON",
            },
            text.len() as u64,
        )
    })?;
    // The metadata's integer arrays: `not_array` and `not_int` name the key.
    let ints = |key: &'static str,
                not_array: &'static ValueRule,
                not_int: &'static ValueRule|
     -> Result<Option<Vec<u64>>, Error> {
        let Some(v) = meta.get(key) else {
            return Ok(None);
        };
        let items = v.as_array().ok_or_else(|| bad(not_array, 0))?;
        items
            .iter()
            .map(|x| {
                x.as_u64()
                    .filter(|&n| n <= i64::MAX as u64)
                    .ok_or_else(|| bad(not_int, 0))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    };
    let shape = ints(
        "shape",
        &ValueRule {
            field: "shape",
            expected: "an array of non-negative integers",
        },
        &ValueRule {
            field: "shape",
            expected: "an array of non-negative integers below 2^63",
        },
    )?
    .ok_or(bad(
        &ValueRule {
            field: "shape",
            expected: "present in the extension's metadata",
        },
        0,
    ))?;
    dlport_core::layout::check_ndim(shape.len() as i64 + 1)?;
    let permutation = ints(
        "permutation",
        &ValueRule {
            field: "permutation",
            expected: "an array of non-negative integers",
        },
        &ValueRule {
            field: "permutation",
            expected: "an array of non-negative integers below 2^63",
        },
    )?
    .map(|p| {
        let mut seen = vec![false; shape.len()];
        for &i in &p {
            match seen.get_mut(i as usize) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(bad(
                        &ValueRule {
                            field: "permutation",
                            expected: "a permutation of 0..ndim",
                        },
                        i,
                    ));
                }
            }
        }
        if p.len() != shape.len() {
            return Err(bad(
                &ValueRule {
                    field: "permutation length",
                    expected: "the shape's length",
                },
                p.len() as u64,
            ));
        }
        Ok(p.into_iter().map(|i| i as usize).collect())
    })
    .transpose()?;
    Ok((shape.into_iter().map(|d| d as i64).collect(), permutation))
}

/// A DLPack tensor over an `arrow.fixed_shape_tensor` column (`field` and its `array`), without
/// a copy: shape `[array.len()]` followed by the logical tensor shape, strides from the
/// `permutation` if any, READ_ONLY. The tensor keeps the Arrow buffer alive.
pub fn from_arrow(field: &Field, array: &dyn Array) -> Result<ManagedTensor, Error> {
    let (physical, permutation) = extension(field)?;
    let list = array
        .as_any()
        .downcast_ref::<FixedSizeListArray>()
        .ok_or(refused(
            "a fixed_shape_tensor column whose storage is not a FixedSizeList",
        ))?;
    let per = dlport_core::layout::element_count(&physical)? as i64;
    if i64::from(list.value_length()) != per {
        return Err(bad(
            &ValueRule {
                field: "FixedSizeList size",
                expected: "the product of the extension's shape",
            },
            list.value_length().max(0) as u64,
        ));
    }
    if list.null_count() != 0 || list.values().null_count() != 0 {
        return Err(bad(
            &ValueRule {
                field: "null_count",
                expected: "0: a DLPack tensor has no nulls; fill or drop them first",
            },
            (list.null_count() + list.values().null_count()) as u64,
        ));
    }
    let values: &ArrayRef = list.values();
    let dtype = dlpack_type(values.data_type())?;
    let size = dtype.size_bytes();
    let data = values.to_data();
    let buffer = data
        .buffers()
        .first()
        .ok_or(refused("a values array without a data buffer"))?
        .slice_with_length(data.offset() * size, data.len() * size);
    // Row-major strides of the physical tensor, then in logical order.
    let mut phys_strides = vec![0i64; physical.len()];
    dlport_core::layout::compact_row_major(&physical, &mut phys_strides)?;
    let (mut shape, mut strides) = (vec![list.len() as i64], vec![per]);
    match &permutation {
        Some(p) => {
            shape.extend(p.iter().map(|&k| physical[k]));
            strides.extend(p.iter().map(|&k| phys_strides[k]));
        }
        None => {
            shape.extend_from_slice(&physical);
            strides.extend_from_slice(&phys_strides);
        }
    }
    ExportBuilder::new(ArrowStorage(buffer), dtype, &shape)
        .strides(&strides)
        .build()
}

/// The tensor in column `column` of a record batch (see [`from_arrow`]).
pub fn from_record_batch(batch: &RecordBatch, column: &str) -> Result<ManagedTensor, Error> {
    let i = batch
        .schema()
        .index_of(column)
        .map_err(|_| refused("a column name the record batch does not have"))?;
    from_arrow(batch.schema().field(i), batch.column(i))
}

// ── Arrow IPC ──

/// Writes the tensor as an Arrow IPC stream: one record batch with one
/// `arrow.fixed_shape_tensor` column named `name` (pyarrow reads it back with `pa.ipc`).
pub fn write_ipc_stream(
    writer: impl Write,
    tensor: ManagedTensor,
    name: &str,
    copy: CopyPolicy,
) -> Result<(), Error> {
    let batch = to_record_batch(tensor, name, copy)?;
    let mut w = arrow_ipc::writer::StreamWriter::try_new(writer, &batch.schema())
        .map_err(|e| arrow_error("StreamWriter::try_new", e))?;
    w.write(&batch)
        .map_err(|e| arrow_error("StreamWriter::write", e))?;
    w.finish()
        .map_err(|e| arrow_error("StreamWriter::finish", e))
}

/// Reads an Arrow IPC stream and returns every `arrow.fixed_shape_tensor` column of every batch,
/// in order, with its name; other columns are skipped. Each tensor views the stream's decoded
/// buffers (no copy after decoding).
pub fn read_ipc_stream(reader: impl Read) -> Result<Vec<(String, ManagedTensor)>, Error> {
    let r = arrow_ipc::reader::StreamReader::try_new(reader, None)
        .map_err(|e| arrow_error("StreamReader::try_new", e))?;
    let mut out = Vec::new();
    for batch in r {
        let batch = batch.map_err(|e| arrow_error("StreamReader::next", e))?;
        let schema = batch.schema();
        for (i, field) in schema.fields().iter().enumerate() {
            if field.metadata().get(NAME_KEY).map(String::as_str) == Some(EXTENSION_NAME) {
                out.push((field.name().clone(), from_arrow(field, batch.column(i))?));
            }
        }
    }
    Ok(out)
}
