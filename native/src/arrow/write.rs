//! DLPack → Arrow: a host tensor as an `arrow.fixed_shape_tensor` column, a record batch or an
//! IPC stream.

use std::collections::HashMap;
use std::io::Write;
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::{Array, FixedSizeListArray, RecordBatch, make_array};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_data::ArrayData;
use arrow_schema::{Field, Schema};
use dlport_core::backend::MemoryClass;
use dlport_core::error::{CopyReason, ValueRule};
use dlport_core::{CopyPolicy, Error, ManagedTensor, TensorRef};

use super::{EXTENSION_NAME, METADATA_KEY, NAME_KEY, arrow_error, arrow_type, bad, metadata};

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
        return Err(Error::Access(
            dlport_core::error::AccessError::NotHostAccessible {
                device: view.device(),
            },
        ));
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
            let ptr = NonNull::new(first).ok_or(Error::Layout(
                dlport_core::error::LayoutError::NullData {
                    numel: numel as u64,
                },
            ))?;
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
            return Err(Error::Dispatch(
                dlport_core::error::DispatchError::CopyRequired {
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
                },
            ));
        }
        _ => {
            let bytes = numel * size;
            dlport_core::backend::check_alloc(bytes as u128, None)?;
            let mut buf = MutableBuffer::from_len_zeroed(bytes);
            view.copy_to_compact(buf.as_slice_mut())?;
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
    let meta = metadata::to_json(&physical, permutation.as_deref());
    let field = Field::new(name, array.data_type().clone(), false).with_metadata(HashMap::from([
        (NAME_KEY.to_owned(), EXTENSION_NAME.to_owned()),
        (METADATA_KEY.to_owned(), meta),
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
