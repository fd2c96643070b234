//! The schema as the reader needs it: each column's field nodes, buffers and variadic buffer
//! counts (from the Arrow columnar format's buffer layouts), which columns are tensors, and the
//! checks of a record batch against them.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_ipc::{Endianness, MetadataVersion, Type};
use arrow_schema::{DataType as ArrowType, Field};
use dlport_core::Error;
use dlport_core::error::ValueRule;

use super::super::metadata::parse_field;
use super::super::{
    EXTENSION_NAME, NAME_KEY, bad, bad_signed, bad_text, dlpack_type, missing, refused,
};

/// What a column occupies in a record batch: field nodes, buffers and variadic buffer counts
/// (one per view-typed array: its data buffers follow its two fixed ones).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Layout {
    pub(super) nodes: usize,
    pub(super) buffers: usize,
    variadic: usize,
}

impl Layout {
    fn add(&mut self, o: Layout) {
        self.nodes += o.nodes;
        self.buffers += o.buffers;
        self.variadic += o.variadic;
    }
}

/// A top-level column: its layout, and if it is an `arrow.fixed_shape_tensor`, what to decode.
pub(super) struct Column {
    pub(super) layout: Layout,
    pub(super) tensor: Option<TensorColumn>,
}

/// A fixed_shape_tensor column whose storage is a `FixedSizeList<primitive>`.
pub(super) struct TensorColumn {
    pub(super) field: Field,
    pub(super) item: Arc<Field>,
    pub(super) list_size: i32,
    pub(super) value: ArrowType,
}

/// The stream's schema as the reader needs it.
pub(super) struct Plan {
    version: MetadataVersion,
    pub(super) columns: Vec<Column>,
    /// The layout of each dictionary's values, by dictionary id.
    pub(super) dictionaries: HashMap<i64, Column>,
}

impl Plan {
    pub(super) fn new(
        schema: arrow_ipc::Schema<'_>,
        version: MetadataVersion,
    ) -> Result<Self, Error> {
        if schema.endianness() != Endianness::Little || cfg!(target_endian = "big") {
            return Err(bad_text(
                &ValueRule {
                    field: "Schema.endianness",
                    expected: "Little, on a little-endian machine (dlport does not swap bytes)",
                },
                &format!("{:?}", schema.endianness()),
            ));
        }
        let mut plan = Plan {
            version,
            columns: Vec::new(),
            dictionaries: HashMap::new(),
        };
        let fields = schema.fields().ok_or_else(|| missing("Schema.fields"))?;
        for field in fields {
            let layout = plan.layout(field)?;
            let tensor = tensor_column(field)?;
            plan.columns.push(Column { layout, tensor });
        }
        Ok(plan)
    }

    /// The layout of a field in a record batch; dictionary-encoded fields (here or nested)
    /// record their values' layout in `dictionaries`.
    fn layout(&mut self, field: arrow_ipc::Field<'_>) -> Result<Layout, Error> {
        let values = self.type_layout(field)?;
        match field.dictionary() {
            None => Ok(values),
            Some(d) => {
                let column = Column {
                    layout: values,
                    tensor: None,
                };
                if self.dictionaries.insert(d.id(), column).is_some() {
                    return Err(bad_signed(
                        &ValueRule {
                            field: "DictionaryEncoding.id",
                            expected: "unique in the schema",
                        },
                        d.id(),
                    ));
                }
                // The indices: a validity buffer and the index values.
                Ok(Layout {
                    nodes: 1,
                    buffers: 2,
                    variadic: 0,
                })
            }
        }
    }

    /// The layout of the field's own type (its values, for a dictionary-encoded field), from
    /// the Arrow columnar format's buffer layouts.
    fn type_layout(&mut self, field: arrow_ipc::Field<'_>) -> Result<Layout, Error> {
        let own = |buffers| Layout {
            nodes: 1,
            buffers,
            variadic: 0,
        };
        let mut layout = match field.type_type() {
            Type::Null => own(0),
            Type::Int
            | Type::FloatingPoint
            | Type::Bool
            | Type::Decimal
            | Type::Date
            | Type::Time
            | Type::Timestamp
            | Type::Interval
            | Type::Duration
            | Type::FixedSizeBinary => own(2),
            Type::Binary | Type::Utf8 | Type::LargeBinary | Type::LargeUtf8 => own(3),
            Type::BinaryView | Type::Utf8View => Layout {
                nodes: 1,
                buffers: 2,
                variadic: 1,
            },
            Type::List | Type::LargeList | Type::Map => own(2),
            Type::ListView | Type::LargeListView => own(3),
            Type::FixedSizeList | Type::Struct_ => own(1),
            Type::RunEndEncoded => own(0),
            Type::Union => {
                let union = field
                    .type_as_union()
                    .ok_or_else(|| missing("Field.type (the Union table)"))?;
                let validity = usize::from(self.version < MetadataVersion::V5);
                let offsets = usize::from(union.mode() == arrow_ipc::UnionMode::Dense);
                own(validity + 1 + offsets)
            }
            other => {
                return Err(bad_text(
                    &ValueRule {
                        field: "Field.type",
                        expected: "a type of the Arrow columnar format",
                    },
                    &other
                        .variant_name()
                        .map_or_else(|| format!("unknown type {}", other.0), str::to_owned),
                ));
            }
        };
        for child in field.children().into_iter().flatten() {
            layout.add(self.layout(child)?);
        }
        Ok(layout)
    }

    /// Checks a record batch (or a dictionary batch's data) against `columns`' layouts and
    /// returns where each column starts: its first field node and first buffer.
    pub(super) fn columns(
        &self,
        batch: arrow_ipc::RecordBatch<'_>,
        columns: &[Column],
        body: usize,
    ) -> Result<Vec<(usize, usize)>, Error> {
        if batch.compression().is_some() {
            return Err(refused(
                "compressed record batches (LZ4_FRAME, ZSTD): this build has no codec; write \
                 the stream uncompressed (pyarrow: ipc.IpcWriteOptions(compression=None))",
            ));
        }
        if batch.length() < 0 {
            return Err(bad_signed(
                &ValueRule {
                    field: "RecordBatch.length",
                    expected: "a non-negative row count",
                },
                batch.length(),
            ));
        }
        let nodes = batch.nodes().map_or(0, |v| v.len());
        let buffers = batch.buffers().map_or(0, |v| v.len());
        let variadic: Vec<i64> = batch.variadicBufferCounts().into_iter().flatten().collect();
        let mut need = Layout::default();
        for c in columns {
            need.add(c.layout);
        }
        if variadic.len() != need.variadic {
            return Err(bad(
                &ValueRule {
                    field: "RecordBatch.variadicBufferCounts length",
                    expected: "one count per view-typed (Utf8View, BinaryView) array of the schema",
                },
                variadic.len() as u64,
            ));
        }
        let mut need_buffers = need.buffers;
        for &count in &variadic {
            let c = usize::try_from(count).ok().filter(|&c| c <= buffers);
            need_buffers = c.and_then(|c| need_buffers.checked_add(c)).ok_or_else(|| {
                bad_signed(
                    &ValueRule {
                        field: "RecordBatch.variadicBufferCounts",
                        expected: "non-negative counts of the buffers the batch holds",
                    },
                    count,
                )
            })?;
        }
        if nodes != need.nodes {
            return Err(bad_text(
                &ValueRule {
                    field: "RecordBatch.nodes length",
                    expected: "the number of field nodes the schema's types need",
                },
                &format!("{nodes} (the schema needs {})", need.nodes),
            ));
        }
        if buffers != need_buffers {
            return Err(bad_text(
                &ValueRule {
                    field: "RecordBatch.buffers length",
                    expected: "the number of buffers the schema's types need",
                },
                &format!("{buffers} (the schema needs {need_buffers})"),
            ));
        }
        for node in batch.nodes().into_iter().flatten() {
            if node.length() < 0 {
                return Err(bad_signed(
                    &ValueRule {
                        field: "FieldNode.length",
                        expected: "a non-negative element count",
                    },
                    node.length(),
                ));
            }
            if node.null_count() < 0 || node.null_count() > node.length() {
                return Err(bad_signed(
                    &ValueRule {
                        field: "FieldNode.null_count",
                        expected: "from 0 to the node's length",
                    },
                    node.null_count(),
                ));
            }
        }
        for b in batch.buffers().into_iter().flatten() {
            let (offset, length) = (b.offset(), b.length());
            if offset < 0 || offset % 8 != 0 {
                return Err(bad_signed(
                    &ValueRule {
                        field: "Buffer.offset",
                        expected: "a non-negative multiple of 8 (the format aligns buffers to 8 \
                                   bytes)",
                    },
                    offset,
                ));
            }
            if length < 0 {
                return Err(bad_signed(
                    &ValueRule {
                        field: "Buffer.length",
                        expected: "a non-negative byte count",
                    },
                    length,
                ));
            }
            if offset
                .checked_add(length)
                .is_none_or(|end| end as u64 > body as u64)
            {
                return Err(bad_text(
                    &ValueRule {
                        field: "Buffer offset + length",
                        expected: "inside the message body (bodyLength)",
                    },
                    &format!("{offset} + {length} (the body holds {body} bytes)"),
                ));
            }
        }
        // Where each column starts; its top node has the batch's length.
        let all_nodes = batch.nodes();
        let mut starts = Vec::with_capacity(columns.len());
        let (mut node, mut buffer, mut v) = (0usize, 0usize, 0usize);
        for c in columns {
            starts.push((node, buffer));
            if let Some(top) = all_nodes.as_ref().map(|n| n.get(node)) {
                if top.length() != batch.length() {
                    return Err(bad_text(
                        &ValueRule {
                            field: "FieldNode.length (a column's first node)",
                            expected: "the record batch's length",
                        },
                        &format!("{} (the batch has {} rows)", top.length(), batch.length()),
                    ));
                }
            }
            node += c.layout.nodes;
            buffer += c.layout.buffers;
            for &count in &variadic[v..v + c.layout.variadic] {
                buffer += count as usize;
            }
            v += c.layout.variadic;
        }
        Ok(starts)
    }
}

/// If `field` is an `arrow.fixed_shape_tensor` column, what to decode (its storage checked);
/// `None` for any other column.
fn tensor_column(field: arrow_ipc::Field<'_>) -> Result<Option<TensorColumn>, Error> {
    let mut metadata = HashMap::new();
    for kv in field.custom_metadata().into_iter().flatten() {
        let (Some(k), Some(v)) = (kv.key(), kv.value()) else {
            continue;
        };
        if metadata.insert(k.to_owned(), v.to_owned()).is_some() && k.starts_with("ARROW:") {
            return Err(bad_text(
                &ValueRule {
                    field: "Field.custom_metadata key",
                    expected: "written once (this key appears twice)",
                },
                &format!("{k:?}"),
            ));
        }
    }
    if metadata.get(NAME_KEY).map(String::as_str) != Some(EXTENSION_NAME) {
        return Ok(None);
    }
    let storage = || {
        refused(
            "a fixed_shape_tensor column whose storage is not a FixedSizeList of Int8-Int64, \
             UInt8-UInt64 or Float16-Float64 values, unencoded",
        )
    };
    if field.type_type() != Type::FixedSizeList || field.dictionary().is_some() {
        return Err(storage());
    }
    let list_size = field
        .type_as_fixed_size_list()
        .ok_or_else(|| missing("Field.type (the FixedSizeList table)"))?
        .listSize();
    if list_size < 0 {
        return Err(bad_signed(
            &ValueRule {
                field: "FixedSizeList.listSize",
                expected: "a non-negative count",
            },
            i64::from(list_size),
        ));
    }
    let children = field.children().ok_or_else(storage)?;
    if children.len() != 1 {
        return Err(bad(
            &ValueRule {
                field: "FixedSizeList children",
                expected: "exactly one (the values)",
            },
            children.len() as u64,
        ));
    }
    let child = children.get(0);
    if child.dictionary().is_some() || child.children().is_some_and(|c| !c.is_empty()) {
        return Err(storage());
    }
    let value = match child.type_type() {
        Type::Int => {
            let int = child
                .type_as_int()
                .ok_or_else(|| missing("Field.type (the Int table)"))?;
            match (int.bitWidth(), int.is_signed()) {
                (8, true) => ArrowType::Int8,
                (16, true) => ArrowType::Int16,
                (32, true) => ArrowType::Int32,
                (64, true) => ArrowType::Int64,
                (8, false) => ArrowType::UInt8,
                (16, false) => ArrowType::UInt16,
                (32, false) => ArrowType::UInt32,
                (64, false) => ArrowType::UInt64,
                (bits, _) => {
                    return Err(bad_signed(
                        &ValueRule {
                            field: "Int.bitWidth",
                            expected: "8, 16, 32 or 64",
                        },
                        i64::from(bits),
                    ));
                }
            }
        }
        Type::FloatingPoint => {
            let float = child
                .type_as_floating_point()
                .ok_or_else(|| missing("Field.type (the FloatingPoint table)"))?;
            match float.precision() {
                arrow_ipc::Precision::HALF => ArrowType::Float16,
                arrow_ipc::Precision::SINGLE => ArrowType::Float32,
                arrow_ipc::Precision::DOUBLE => ArrowType::Float64,
                p => {
                    return Err(bad_signed(
                        &ValueRule {
                            field: "FloatingPoint.precision",
                            expected: "HALF, SINGLE or DOUBLE",
                        },
                        i64::from(p.0),
                    ));
                }
            }
        }
        Type::Bool => ArrowType::Boolean,
        _ => return Err(storage()),
    };
    // Refuses what no DLPack tensor holds (booleans) by name, before any batch is read.
    dlpack_type(&value)?;
    let item = Arc::new(Field::new(
        child.name().unwrap_or("item"),
        value.clone(),
        child.nullable(),
    ));
    let field = Field::new(
        field.name().unwrap_or(""),
        ArrowType::FixedSizeList(item.clone(), list_size),
        field.nullable(),
    )
    .with_metadata(metadata);
    // The extension's metadata is checked now, before any batch is read.
    parse_field(field.metadata())?;
    Ok(Some(TensorColumn {
        field,
        item,
        list_size,
        value,
    }))
}
