//! Arrow IPC stream bytes → tensors, with the stream treated as untrusted input.
//!
//! The framing is read here, not by arrow-rs's `StreamReader` (which takes a message's
//! `bodyLength` at its word and allocates it zeroed before reading a byte of it): each message
//! is `0xFFFFFFFF` (absent in the pre-1.0 form), an `i32` metadata length, the flatbuffer
//! `Message` (checked by the flatbuffers verifier), then `bodyLength` bytes of body. Before
//! anything is allocated, every length is checked against the allocation limit
//! ([`dlport_core::set_alloc_limit`]); a metadata block or a body is then read in steps that grow
//! only as the reader supplies bytes (at most twice what it supplied), so a stream that
//! declares more than it holds is refused once it ends, having cost what it holds.
//!
//! A record batch is checked against the schema before any array is built from it: the number
//! of field nodes, buffers and variadic buffer counts the schema's types need, every node's
//! length and null count, every buffer's offset (8-byte aligned, as the format asks) and
//! length inside the body. Only `arrow.fixed_shape_tensor` columns are decoded, each into a
//! `FixedSizeList` whose lengths are checked again (length × list size, values length, values
//! buffer bytes) before arrow-rs validates the arrays, and then through
//! [`from_arrow`](super::from_arrow). Other columns and dictionary batches are checked and
//! skipped (a tensor column is never dictionary-encoded). Compressed bodies are refused: this
//! build carries no codec. A panic inside arrow-rs, which the checks are meant to make
//! unreachable, still becomes an `Err` (`catch_unwind`).

mod frame;
mod layout;

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};

use arrow_array::{FixedSizeListArray, make_array};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_ipc::MessageHeader;
use dlport_core::error::{BackendError, BackendReport, ValueRule};
use dlport_core::{Error, ManagedTensor};

use super::{NAME, bad, bad_signed, bad_text, from_arrow, missing};
use frame::Stream;
use layout::{Column, Plan, TensorColumn};

/// A tensor read from an IPC stream: its column's name, the extension's `dim_names` if the
/// producer sent them (a DLPack tensor has no axis names), and the tensor.
#[derive(Debug)]
pub struct StreamTensor {
    /// The column's name.
    pub name: String,
    /// The names of the item's logical axes (`dim_names`), if the producer sent them.
    pub dim_names: Option<Vec<String>>,
    /// The tensor: `[rows, item shape…]`, READ_ONLY, viewing the record batch's body.
    pub tensor: ManagedTensor,
}

/// Reads an Arrow IPC stream and returns every `arrow.fixed_shape_tensor` column of every
/// batch, in order. Other columns are checked and skipped. Each tensor views its batch's body
/// (no copy after reading). The stream is untrusted input: see the module documentation for
/// what is checked before anything is allocated. Reading stops at the end-of-stream marker
/// (the bytes after it are not read) or at the end of the reader between two messages.
pub fn read_ipc_stream(reader: impl Read) -> Result<Vec<StreamTensor>, Error> {
    let mut reader = reader;
    catch_unwind(AssertUnwindSafe(|| read_all(&mut reader))).unwrap_or_else(|_| {
        Err(Error::Backend(BackendError::Failed {
            code: 0,
            report: BackendReport::new(
                NAME,
                "decoding an IPC stream",
                "arrow-rs panicked on this stream, which passed dlport's checks; the stream is \
                 refused (please report it)",
            ),
        }))
    })
}

fn read_all(reader: &mut dyn Read) -> Result<Vec<StreamTensor>, Error> {
    let mut stream = Stream { reader };
    let Some(first) = stream.next_message()? else {
        return Err(bad(
            &ValueRule {
                field: "stream length",
                expected: "at least one message, the schema (the stream is empty)",
            },
            0,
        ));
    };
    let schema = {
        let message = first.message()?;
        if message.header_type() != MessageHeader::Schema {
            return Err(bad_text(
                &ValueRule {
                    field: "Message.header (the first message)",
                    expected: "Schema: a stream starts with its schema",
                },
                &header_name(message.header_type()),
            ));
        }
        let header = message
            .header_as_schema()
            .ok_or_else(|| missing("Message.header (the Schema table)"))?;
        Plan::new(header, message.version())?
    };
    let mut out = Vec::new();
    while let Some(next) = stream.next_message()? {
        let message = next.message()?;
        let body = &next.body;
        match message.header_type() {
            MessageHeader::RecordBatch => {
                let batch = message
                    .header_as_record_batch()
                    .ok_or_else(|| missing("Message.header (the RecordBatch table)"))?;
                let columns = schema.columns(batch, &schema.columns, body.len())?;
                for (column, at) in schema.columns.iter().zip(columns) {
                    if let Some(tensor) = &column.tensor {
                        out.push(decode_tensor(column, tensor, batch, at, body)?);
                    }
                }
            }
            MessageHeader::DictionaryBatch => {
                let dict = message
                    .header_as_dictionary_batch()
                    .ok_or_else(|| missing("Message.header (the DictionaryBatch table)"))?;
                let layout = schema.dictionaries.get(&dict.id()).ok_or_else(|| {
                    bad_signed(
                        &ValueRule {
                            field: "DictionaryBatch.id",
                            expected: "the id of a dictionary-encoded field of the schema",
                        },
                        dict.id(),
                    )
                })?;
                let data = dict.data().ok_or_else(|| missing("DictionaryBatch.data"))?;
                schema.columns(data, std::slice::from_ref(layout), body.len())?;
            }
            other => {
                return Err(bad_text(
                    &ValueRule {
                        field: "Message.header",
                        expected: "RecordBatch or DictionaryBatch after the schema (one Schema \
                                   per stream; Tensor and SparseTensor messages are not part of \
                                   the stream format)",
                    },
                    &header_name(other),
                ));
            }
        }
    }
    Ok(out)
}

fn header_name(h: MessageHeader) -> String {
    h.variant_name()
        .map_or_else(|| format!("unknown header type {}", h.0), str::to_owned)
}

/// Builds a tensor column of a checked record batch: its nodes are `at.0` (the list) and
/// `at.0 + 1` (the values), its buffers `at.1` (the list's validity), `at.1 + 1` (the values'
/// validity) and `at.1 + 2` (the values).
fn decode_tensor(
    column: &Column,
    t: &TensorColumn,
    batch: arrow_ipc::RecordBatch<'_>,
    at: (usize, usize),
    body: &Buffer,
) -> Result<StreamTensor, Error> {
    // A FixedSizeList of a leaf type (checked by `tensor_column`): two nodes, three buffers, and
    // `columns` checked that the batch holds every column's, so these indices exist.
    debug_assert_eq!((column.layout.nodes, column.layout.buffers), (2, 3));
    let nodes = batch.nodes().ok_or_else(|| missing("RecordBatch.nodes"))?;
    let buffers = batch
        .buffers()
        .ok_or_else(|| missing("RecordBatch.buffers"))?;
    let (list, values) = (nodes.get(at.0), nodes.get(at.0 + 1));
    let nulls = list.null_count().saturating_add(values.null_count());
    if nulls != 0 {
        return Err(bad_signed(
            &ValueRule {
                field: "null_count",
                expected: "0: a DLPack tensor has no nulls; fill or drop them first",
            },
            nulls,
        ));
    }
    let rows = list.length();
    let element = t.value.primitive_width().unwrap_or(1);
    let need = rows.checked_mul(i64::from(t.list_size));
    let need = need.filter(|&n| n <= values.length()).ok_or_else(|| {
        bad_text(
            &ValueRule {
                field: "FieldNode.length (a FixedSizeList's values)",
                expected: "at least the list's length times its list size",
            },
            &format!(
                "{} (the list holds {rows} items of {})",
                values.length(),
                t.list_size
            ),
        )
    })?;
    let data = buffers.get(at.1 + 2);
    let bytes = need
        .checked_mul(element as i64)
        .filter(|&b| b <= data.length())
        .ok_or_else(|| {
            bad_text(
                &ValueRule {
                    field: "Buffer.length (a FixedSizeList's values)",
                    expected: "at least the values' length times the element size",
                },
                &format!(
                    "{} (the values need {need} elements of {element} bytes)",
                    data.length()
                ),
            )
        })?;
    // Checked above: offset + length lie inside the body, and bytes <= length.
    let values_buffer = body.slice_with_length(data.offset() as usize, bytes as usize);
    let arrow = |operation, e| super::arrow_error(operation, e);
    let values = ArrayData::try_new(
        t.value.clone(),
        need as usize,
        None,
        0,
        vec![values_buffer],
        vec![],
    )
    .map_err(|e| arrow("ArrayData::try_new", e))?;
    let array = FixedSizeListArray::try_new_with_length(
        t.item.clone(),
        t.list_size,
        make_array(values),
        None,
        rows as usize,
    )
    .map_err(|e| arrow("FixedSizeListArray::try_new", e))?;
    let tensor = from_arrow(&t.field, &array)?;
    let dim_names = super::tensor_metadata(&t.field)?.dim_names;
    Ok(StreamTensor {
        name: t.field.name().clone(),
        dim_names,
        tensor,
    })
}
