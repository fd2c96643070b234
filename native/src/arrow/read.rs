//! Arrow → DLPack: an `arrow.fixed_shape_tensor` column as a read-only DLPack tensor over the
//! Arrow buffer, without a copy.

use arrow_array::{Array, FixedSizeListArray, RecordBatch};
use arrow_buffer::Buffer;
use arrow_schema::Field;
use dlport_core::backend::TensorStorage;
use dlport_core::error::ValueRule;
use dlport_core::{Error, ExportBuilder, ManagedTensor};

use super::metadata::{element_count, tensor_metadata};
use super::{bad, bad_text, dlpack_type, refused};

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
    fn access(&self) -> dlport_core::backend::Access {
        dlport_core::backend::Access::ReadOnly
    }
}

/// A DLPack tensor over an `arrow.fixed_shape_tensor` column (`field` and its `array`), without
/// a copy: shape `[array.len()]` followed by the logical item shape, strides from the
/// `permutation` if any, READ_ONLY. The tensor keeps the Arrow buffer alive. The field's
/// `dim_names`, which a DLPack tensor cannot carry, are checked here and returned by
/// [`tensor_metadata`](super::tensor_metadata).
pub fn from_arrow(field: &Field, array: &dyn Array) -> Result<ManagedTensor, Error> {
    let meta = tensor_metadata(field)?;
    let list = array
        .as_any()
        .downcast_ref::<FixedSizeListArray>()
        .ok_or(refused(
            "a fixed_shape_tensor column whose storage is not a FixedSizeList",
        ))?;
    let per = element_count(&meta.shape)?;
    if i64::from(list.value_length()) != per {
        return Err(bad_text(
            &ValueRule {
                field: "FixedSizeList size",
                expected: "the product of the extension's shape",
            },
            &format!("{} (the shape is {:?})", list.value_length(), meta.shape),
        ));
    }
    let nulls = list.null_count() + list.values().null_count();
    if nulls != 0 {
        return Err(bad(
            &ValueRule {
                field: "null_count",
                expected: "0: a DLPack tensor has no nulls; fill or drop them first",
            },
            nulls as u64,
        ));
    }
    let dtype = dlpack_type(list.values().data_type())?;
    let size = dtype.size_bytes();
    let rows = list.len();
    // The items' values: `rows × per` elements from the values array's offset (an Arrow
    // array's buffers hold at least `(offset + len) × size` bytes: arrow-data checks it).
    let data = list.values().to_data();
    let count = usize::try_from(per)
        .ok()
        .and_then(|per| per.checked_mul(rows))
        .filter(|&n| n <= data.len())
        .ok_or_else(|| {
            bad_text(
                &ValueRule {
                    field: "FixedSizeList values length",
                    expected: "at least the list's length times its size",
                },
                &format!("{} (the list holds {rows} items of {per})", data.len()),
            )
        })?;
    let buffer = data
        .buffers()
        .first()
        .ok_or(refused("a values array without a data buffer"))?;
    let (start, bytes) = (data.offset() * size, count * size);
    if start
        .checked_add(bytes)
        .is_none_or(|end| end > buffer.len())
    {
        return Err(bad(
            &ValueRule {
                field: "values buffer length",
                expected: "at least (offset + length) x the element size",
            },
            buffer.len() as u64,
        ));
    }
    let buffer = buffer.slice_with_length(start, bytes);
    // Row-major strides of the physical item, then in logical order.
    let mut phys_strides = vec![0i64; meta.shape.len()];
    dlport_core::layout::compact_row_major(&meta.shape, &mut phys_strides)?;
    let (mut shape, mut strides) = (vec![rows as i64], vec![per]);
    match &meta.permutation {
        Some(p) => {
            shape.extend(p.iter().map(|&k| meta.shape[k]));
            strides.extend(p.iter().map(|&k| phys_strides[k]));
        }
        None => {
            shape.extend_from_slice(&meta.shape);
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
