//! Tensors past one machine, through Apache Arrow (feature `arrow`): a host tensor becomes an
//! `arrow.fixed_shape_tensor` column (Arrow's canonical extension type) and an Arrow column
//! becomes DLPack tensors, without a copy in either direction where the layout allows.
//!
//! A tensor of shape `[n, d1, …, dk]` is `n` tensors of shape `[d1, …, dk]`: a
//! `FixedSizeList<value>[d1 × … × dk]` array of length `n` whose field carries
//! `ARROW:extension:name = arrow.fixed_shape_tensor` and `{"shape": [d1, …, dk]}` (pyarrow's
//! `FixedShapeTensorArray.from_numpy_ndarray` convention).
//! - **To Arrow** ([`to_arrow`], [`write_ipc_stream`]): a row-major tensor is viewed in place:
//!   the Arrow buffer owns the DLPack tensor, whose deleter runs when Arrow drops the last
//!   reference to the buffer. A tensor whose inner axes are dense in another order
//!   (column-major matrices) is viewed in place too, with the extension's `permutation`.
//!   Anything else (or `CopyPolicy::Always`) is one compact copy, as the copy policy allows.
//! - **From Arrow** ([`from_arrow`], [`read_ipc_stream`]): the values buffer is viewed in place;
//!   the tensor holds the Arrow buffer (a reference count) and is READ_ONLY, since Arrow
//!   buffers are immutable. A `permutation` becomes strides; `dim_names` are checked and
//!   returned beside the tensor ([`tensor_metadata`], [`StreamTensor::dim_names`]), since a
//!   DLPack tensor has no axis names.
//! - Element types: `int8`–`int64`, `uint8`–`uint64`, `float16`, `float32`, `float64`. Others are
//!   refused by name (Arrow has no bfloat16, complex, 8-bit float or sub-byte types, and its
//!   boolean is bit-packed where DLPack's is a byte).
//!
//! An IPC stream and an extension's metadata are untrusted input, read as a DLPack tensor is:
//! every length, count and offset they declare is checked against the bytes the reader supplies
//! and against the allocation limit ([`dlport_core::set_alloc_limit`]) before anything is
//! allocated, and every refusal names the field and the value found.
//!
//! The rooms: `metadata` (the extension's JSON, both directions), `write` (tensor → Arrow
//! arrays and IPC streams), `read` (Arrow arrays → tensors) and `stream` (IPC stream bytes →
//! tensors, through `read`).

mod metadata;
mod read;
mod stream;
mod write;

pub use metadata::{TensorMetadata, tensor_metadata};
pub use read::{from_arrow, from_record_batch};
pub use stream::{StreamTensor, read_ipc_stream};
pub use write::{to_arrow, to_record_batch, write_ipc_stream};

use arrow_schema::{ArrowError, DataType as ArrowType};
use dlport_core::error::{BackendError, BackendReport, DispatchError, ValueRule};
use dlport_core::{DataType, Error};

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

/// A numeric field out of its rule, with the value found.
fn bad(rule: &'static ValueRule, value: u64) -> Error {
    DispatchError::InvalidValue { rule, value }.into()
}

/// A signed numeric field out of its rule (a negative length shows as itself, not as 2^64 - 1).
fn bad_signed(rule: &'static ValueRule, value: i64) -> Error {
    if value < 0 {
        bad_text(rule, &value.to_string())
    } else {
        bad(rule, value as u64)
    }
}

/// A field whose value is not one number (a JSON array, a string), shown as found.
fn bad_text(rule: &'static ValueRule, value: &str) -> Error {
    DispatchError::invalid_input(rule, value).into()
}

/// A table or vector the format requires, absent.
fn missing(field: &'static str) -> Error {
    bad_text(
        &ValueRule {
            field: "Arrow IPC message",
            expected: "every table the format requires (this one is absent)",
        },
        field,
    )
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
    use dlport_core::abi::TypeCode as C;
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
