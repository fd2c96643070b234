//! The rebuild of a pickled `dlport.Tensor` from plain values: the checks that stand between a
//! pickle (which anyone can forge) and a view of memory.
//!
//! A `dlport.Tensor` pickles as `Tensor._rebuild(buffer, dtype, shape, strides, flags, memory)`
//! (`crate::pickle`): the compact bytes as one buffer (out of band under protocol 5), the
//! dtype's name, the extents, `None` for the strides (dlport sends row-major compact bytes
//! only), the DLPack flags that travel (READ_ONLY, IS_SUBBYTE_TYPE_PADDED) and the name of the
//! memory the sender's tensor lay in. [`rebuild`] checks every field before a
//! view exists, with checked arithmetic, through dlport-core's own validation
//! (`layout::validate_metadata`, then `ExportBuilder`, which checks the storage again):
//!
//! - the dtype comes from the closed list of names dlport writes (`float32`, `bfloat16`, ...);
//! - the memory is a device name dlport writes;
//! - no flag but READ_ONLY and IS_SUBBYTE_TYPE_PADDED;
//! - at most 64 axes, no extent, element count or byte count that overflows, and no byte count
//!   past the allocation limit in force;
//! - the strides are `None` or the row-major compact ones written out: a stride 0, an overlap,
//!   a gap or a negative stride would make a small buffer a large or aliased tensor (4 bytes
//!   as 2^28 float32 elements, writable rows that share bytes), which dlport never sends;
//! - the buffer holds exactly the compact bytes: a shorter one would be a read past its end, a
//!   longer one is not the tensor the pickle claims.
//!
//! This file needs dlport-core only (no pyo3): the fuzz target `pickle_rebuild` compiles it
//! as it is and drives [`rebuild`] with a `Vec<u8>` for the buffer.

use core::str::FromStr;

use dlport_core::abi::{DLPackVersion, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use dlport_core::backend::TensorStorage;
use dlport_core::error::{DispatchError, LayoutError, ValueRule};
use dlport_core::{DataType, Device, Error, ExportBuilder, ManagedTensor, layout};

/// The DLPack flags a pickle carries; IS_COPIED never travels (the receiver's memory is the
/// engine's buffer, not a copy dlport made for it).
pub const SENT_FLAGS: u64 = FLAG_READ_ONLY | FLAG_IS_SUBBYTE_TYPE_PADDED;

/// The in-band fields of a pickled tensor, as plain values.
#[derive(Clone, Copy, Debug)]
pub struct Reduced<'a> {
    /// The dtype's name, as `dlport.Tensor.dtype` writes it.
    pub dtype: &'a str,
    /// Extents.
    pub shape: &'a [i64],
    /// Strides in elements: `None` (row-major compact), or those strides written out.
    pub strides: Option<&'a [i64]>,
    /// DLPack flags (only [`SENT_FLAGS`]).
    pub flags: u64,
    /// Where the sender's memory was (`cpu`, `cuda_host:0`, `cuda:0`, ...).
    pub memory: &'a str,
}

/// Checks `fields` against the buffer `storage` holds and builds a DLPack tensor over it (its
/// deleter drops `storage`, once), with the device the sender's memory was on. `alloc_limit`
/// is the byte limit in force (the registry's). Every error names the field and its value;
/// `storage` is dropped on failure.
pub fn rebuild<S: TensorStorage>(
    storage: S,
    fields: &Reduced<'_>,
    alloc_limit: u64,
) -> Result<(ManagedTensor, Device), Error> {
    let dtype = parse_dtype(fields.dtype)?;
    let origin = Device::from_str(fields.memory)
        .ok()
        .filter(|d| d.has_valid_id())
        .ok_or_else(|| {
            Error::from(DispatchError::invalid_input(
                &ValueRule {
                    field: "pickle.memory",
                    expected: "a device name as dlport.Tensor.memory writes it (cpu, cuda_host:0, \
                           cuda:0, ...)",
                },
                fields.memory,
            ))
        })?;
    if fields.flags & !SENT_FLAGS != 0 {
        return Err(DispatchError::InvalidValue {
            rule: &ValueRule {
                field: "pickle.flags",
                expected: "READ_ONLY (0x1) and IS_SUBBYTE_TYPE_PADDED (0x4) only",
            },
            value: fields.flags,
        }
        .into());
    }
    let ndim = layout::check_ndim(fields.shape.len() as i64)?;
    if let Some(strides) = fields.strides.filter(|s| s.len() != ndim) {
        return Err(LayoutError::StridesLength {
            strides: strides.len(),
            ndim,
        }
        .into());
    }
    // Compact strides written out (DLPack 1.3 requires them), with checked products; explicit
    // strides must be these.
    let mut compact = [0i64; layout::MAX_NDIM];
    let strides = &mut compact[..ndim];
    layout::compact_row_major(fields.shape, strides)?;
    if fields.strides.is_some_and(|sent| sent != &strides[..]) {
        return Err(DispatchError::invalid_input(
            &ValueRule {
                field: "pickle.strides",
                expected: "None (dlport sends None) or the row-major compact strides of the shape: \
                           a pickle carries compact bytes, and other strides would view them as \
                           a larger or overlapping tensor",
            },
            &format!("{:?}", fields.strides.unwrap_or_default()),
        )
        .into());
    }
    let strides = &strides[..];
    let checked = layout::validate_metadata(
        dtype,
        fields.shape,
        Some(strides),
        Some(DLPackVersion::CURRENT),
        fields.flags,
    )?;
    // Element 0 is the buffer's first byte: compact, the elements reach [0, hi) from it.
    let needed = if checked.numel == 0 {
        0
    } else {
        checked.span.hi as u64
    };
    dlport_core::backend::check_alloc(u128::from(needed), Some(alloc_limit))?;
    let available = storage.byte_len() as u64;
    if available < needed {
        return Err(LayoutError::StorageTooSmall { needed, available }.into());
    }
    if available > needed {
        return Err(DispatchError::InvalidValue {
            rule: &ValueRule {
                field: "pickle.buffer length",
                expected: "exactly the bytes the shape, dtype and strides reach: a longer buffer \
                           is not the tensor the pickle claims",
            },
            value: available,
        }
        .into());
    }
    let managed = ExportBuilder::new(storage, dtype, fields.shape)
        .strides(strides)
        .read_only(fields.flags & FLAG_READ_ONLY != 0)
        .subbyte_padded(fields.flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0)
        .build()?;
    Ok((managed, origin))
}

/// A dtype from the closed list of names dlport writes: the name must parse and be the one
/// `Display` writes for it (no `dtype(code=...)` escape, no alias).
fn parse_dtype(name: &str) -> Result<DataType, Error> {
    let bad = || {
        Error::from(DispatchError::invalid_input(
            &ValueRule {
                field: "pickle.dtype",
                expected: "a dtype name as dlport.Tensor.dtype writes it (float32, bfloat16, \
                           float8_e4m3fn, int4, ...)",
            },
            name,
        ))
    };
    let dtype = DataType::from_str(name).map_err(|_| bad())?;
    if name.starts_with("dtype(") || dtype.to_string() != name {
        return Err(bad());
    }
    Ok(dtype)
}
