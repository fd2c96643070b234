//! The DLPack conformance table: one case per rule (from dlpack.h 1.3, the array-API DLPack
//! section and the behaviour of the main producers), each asserting the exact outcome.
//!
//! Validation cases build a real `DLTensor` and go through the unsafe entry point
//! (`TensorRef::from_raw`); a few go through the pure validator, typed access, ownership,
//! export and parsing. The last test checks that every `Error` variant is reached.

use std::collections::BTreeSet;
use std::ffi::c_void;

use dlport_core::abi::{
    DLManagedTensorVersioned, DLTensor, FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY,
};
use dlport_core::layout::{self, RawFields};
use dlport_core::{
    AccessError, Address, AddressRange, BackendError, BackendNames, ByteSpan, Contiguity,
    CopyReason, DLPackVersion, DataType, Device, DeviceType, DispatchError, Driver, Error,
    ExportBuilder, Flag, LayoutError, ManagedTensor, NameKind, OptionRule, ShortStr, StreamReason,
    TensorRef, TypeCode,
};

/// (numel, contiguity, span, strides) of an accepted tensor.
type Outcome = (u64, Contiguity, (i64, i64), Vec<i64>);

#[derive(Clone, Copy, Debug)]
enum Data {
    Null,
    /// The middle of a 64-byte-aligned 4 KiB buffer, so negative strides stay inside it.
    Buffer,
    Addr(usize),
}

#[derive(Clone, Debug)]
enum Expect {
    Ok {
        numel: u64,
        contiguity: Contiguity,
        span: (i64, i64),
        strides: Vec<i64>,
    },
    Err(Error),
}

#[derive(Clone, Debug)]
struct Case {
    rule: &'static str,
    dtype: DataType,
    ndim: Option<i32>,
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    byte_offset: u64,
    data: Data,
    device: Device,
    version: Option<DLPackVersion>,
    flags: u64,
}

fn case(rule: &'static str) -> Case {
    Case {
        rule,
        dtype: DataType::FLOAT32,
        ndim: None,
        shape: Some(vec![]),
        strides: Some(vec![]),
        byte_offset: 0,
        data: Data::Buffer,
        device: Device::cpu(),
        version: Some(DLPackVersion::new(1, 3)),
        flags: 0,
    }
}

impl Case {
    fn shape(mut self, s: &[i64]) -> Self {
        self.shape = Some(s.to_vec());
        self
    }
    fn strides(mut self, s: &[i64]) -> Self {
        self.strides = Some(s.to_vec());
        self
    }
    fn null_strides(mut self) -> Self {
        self.strides = None;
        self
    }
    fn null_shape(mut self, ndim: i32) -> Self {
        self.shape = None;
        self.ndim = Some(ndim);
        self
    }
    fn ndim(mut self, ndim: i32) -> Self {
        self.ndim = Some(ndim);
        self
    }
    fn dtype(mut self, code: TypeCode, bits: u8, lanes: u16) -> Self {
        self.dtype = DataType::new(code, bits, lanes);
        self
    }
    fn dt(mut self, dtype: DataType) -> Self {
        self.dtype = dtype;
        self
    }
    fn data(mut self, d: Data) -> Self {
        self.data = d;
        self
    }
    fn device(mut self, d: Device) -> Self {
        self.device = d;
        self
    }
    fn version(mut self, v: Option<(u32, u32)>) -> Self {
        self.version = v.map(|(a, b)| DLPackVersion::new(a, b));
        self
    }
    fn flags(mut self, f: u64) -> Self {
        self.flags = f;
        self
    }
    fn byte_offset(mut self, b: u64) -> Self {
        self.byte_offset = b;
        self
    }

    /// Builds the DLTensor and validates it through `TensorRef::from_raw`.
    fn run(&self) -> Result<Outcome, Error> {
        #[repr(C, align(64))]
        struct Buf([u8; 4096]);
        let mut buf = Buf([0; 4096]);
        let mut shape = self.shape.clone().unwrap_or_default();
        let mut strides = self.strides.clone().unwrap_or_default();
        let ndim = self.ndim.unwrap_or(shape.len() as i32);
        // Arrays long enough for any ndim the case claims, so a bogus ndim never reads out of
        // bounds even if a bug let it through.
        if ndim > 0 && shape.len() < ndim as usize && self.shape.is_some() {
            shape.resize(ndim as usize, 1);
        }
        if ndim > 0 && strides.len() < ndim as usize && self.strides.is_some() {
            strides.resize(ndim as usize, 1);
        }
        let data: *mut c_void = match self.data {
            Data::Null => std::ptr::null_mut(),
            Data::Buffer => buf.0[2048..].as_mut_ptr().cast(),
            Data::Addr(a) => std::ptr::without_provenance_mut(a),
        };
        let tensor = DLTensor {
            data,
            device: self.device,
            ndim,
            dtype: self.dtype,
            shape: if self.shape.is_some() && ndim > 0 {
                shape.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            },
            strides: if self.strides.is_some() && ndim > 0 {
                strides.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            },
            byte_offset: self.byte_offset,
        };
        // SAFETY: shape/strides hold at least ndim values; data points into `buf` (2 KiB on
        // either side) or is never dereferenced (validation reads no data).
        let view = unsafe { TensorRef::from_raw(&tensor, self.version, self.flags) }?;
        let span = view.byte_span();
        Ok((
            view.numel(),
            view.contiguity(),
            (span.lo, span.hi),
            view.strides().collect(),
        ))
    }
}

fn ok(numel: u64, contiguity: Contiguity, span: (i64, i64), strides: &[i64]) -> Expect {
    Expect::Ok {
        numel,
        contiguity,
        span,
        strides: strides.to_vec(),
    }
}

fn v(a: u32, b: u32) -> DLPackVersion {
    DLPackVersion::new(a, b)
}

use Contiguity::*;

fn table() -> Vec<(Case, Expect)> {
    vec![
        // ── shapes and dimensions ──
        (
            case("0-d scalar: shape and strides may be NULL when ndim = 0 (v1.3)")
                .null_shape(0)
                .null_strides(),
            ok(1, Both, (0, 4), &[]),
        ),
        (
            case("0-d scalar from a legacy producer")
                .null_shape(0)
                .null_strides()
                .version(None),
            ok(1, Both, (0, 4), &[]),
        ),
        (
            case("1-d compact").shape(&[5]).strides(&[1]),
            ok(5, Both, (0, 20), &[1]),
        ),
        (
            case("2-d row-major").shape(&[2, 3]).strides(&[3, 1]),
            ok(6, RowMajor, (0, 24), &[3, 1]),
        ),
        (
            case("2-d column-major").shape(&[2, 3]).strides(&[1, 2]),
            ok(6, ColumnMajor, (0, 24), &[1, 2]),
        ),
        (
            case("3-d permutation of a compact layout (what JAX accepts)")
                .shape(&[2, 3, 4])
                .strides(&[4, 8, 1]),
            ok(24, Permuted, (0, 96), &[4, 8, 1]),
        ),
        (
            case("rows with a gap are strided")
                .shape(&[2, 3])
                .strides(&[4, 1]),
            ok(6, Strided, (0, 28), &[4, 1]),
        ),
        (
            case("overlapping strides are legal, strided")
                .shape(&[2, 3])
                .strides(&[1, 1]),
            ok(6, Strided, (0, 16), &[1, 1]),
        ),
        (
            case("negative stride reaches below the first element")
                .shape(&[4])
                .strides(&[-1]),
            ok(4, Strided, (-12, 4), &[-1]),
        ),
        (
            case("negative and positive strides combine")
                .shape(&[2, 3])
                .strides(&[-3, 1]),
            ok(6, Strided, (-12, 12), &[-3, 1]),
        ),
        (
            case("zero (broadcast) stride is legal")
                .shape(&[3, 4])
                .strides(&[0, 1]),
            ok(12, Strided, (0, 16), &[0, 1]),
        ),
        (
            case("an extent-1 axis may carry any stride")
                .shape(&[1, 4])
                .strides(&[999, 1]),
            ok(4, Both, (0, 16), &[999, 1]),
        ),
        (
            case("an extent-1 axis may carry a negative stride")
                .shape(&[3, 1])
                .strides(&[1, -7]),
            ok(3, Both, (0, 12), &[1, -7]),
        ),
        (
            case("ndim = 64 is the maximum")
                .shape(&[1; 64])
                .strides(&[1; 64]),
            ok(1, Both, (0, 4), &[1; 64]),
        ),
        (
            case("ndim = 65 is refused before shape is read")
                .ndim(65)
                .shape(&[1; 65])
                .strides(&[1; 65]),
            Expect::Err(Error::Layout(LayoutError::NdimOutOfRange { ndim: 65 })),
        ),
        (
            case("negative ndim is refused")
                .ndim(-1)
                .shape(&[])
                .strides(&[]),
            Expect::Err(Error::Layout(LayoutError::NdimOutOfRange { ndim: -1 })),
        ),
        (
            case("shape NULL with ndim > 0").null_shape(2),
            Expect::Err(Error::Layout(LayoutError::NullShape { ndim: 2 })),
        ),
        (
            case("negative extent").shape(&[2, -3]).strides(&[1, 1]),
            Expect::Err(Error::Layout(LayoutError::NegativeExtent {
                axis: 1,
                extent: -3,
            })),
        ),
        (
            case("element count overflows 64 bits")
                .shape(&[1 << 32, 1 << 32])
                .strides(&[1, 1]),
            Expect::Err(Error::Layout(LayoutError::ElementCountOverflow {
                axis: 1,
                extent: 1 << 32,
            })),
        ),
        (
            case("element count above i64::MAX")
                .shape(&[1 << 61, 4])
                .strides(&[4, 1]),
            Expect::Err(Error::Layout(LayoutError::ElementCountOverflow { axis: 1, extent: 4 })),
        ),
        (
            case("a zero extent makes an overflowing shape empty")
                .shape(&[i64::MAX, i64::MAX, 0])
                .strides(&[1, 1, 1]),
            ok(0, Both, (0, 0), &[1, 1, 1]),
        ),
        // ── size-0 tensors ──
        (
            case("size-0 tensor with NULL data")
                .shape(&[0, 3])
                .strides(&[3, 1])
                .data(Data::Null),
            ok(0, Both, (0, 0), &[3, 1]),
        ),
        (
            case("size-0 tensor: strides are irrelevant")
                .shape(&[3, 0])
                .strides(&[-99, i64::MAX])
                .data(Data::Null),
            ok(0, Both, (0, 0), &[-99, i64::MAX]),
        ),
        // ── NULL strides by version ──
        (
            case("legacy NULL strides mean compact row-major")
                .shape(&[2, 3])
                .null_strides()
                .version(None),
            ok(6, RowMajor, (0, 24), &[3, 1]),
        ),
        (
            case("v1.1 NULL strides mean compact row-major")
                .shape(&[2, 3, 4])
                .null_strides()
                .version(Some((1, 1))),
            ok(24, RowMajor, (0, 96), &[12, 4, 1]),
        ),
        (
            case("v1.2 forbids NULL strides when ndim > 0")
                .shape(&[2, 3])
                .null_strides()
                .version(Some((1, 2))),
            Expect::Err(Error::Layout(LayoutError::NullStrides {
                ndim: 2,
                version: v(1, 2),
            })),
        ),
        (
            case("v1.3 forbids NULL strides even for a size-0 tensor")
                .shape(&[0, 3])
                .null_strides()
                .data(Data::Null),
            Expect::Err(Error::Layout(LayoutError::NullStrides {
                ndim: 2,
                version: v(1, 3),
            })),
        ),
        (
            case("legacy NULL strides with a zero extent")
                .shape(&[4, 0, 2])
                .null_strides()
                .version(None)
                .data(Data::Null),
            ok(0, Both, (0, 0), &[2, 2, 1]),
        ),
        // ── span arithmetic ──
        (
            case("stride × extent overflows")
                .shape(&[3])
                .strides(&[i64::MAX]),
            Expect::Err(Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 3,
                stride: i64::MAX,
            })),
        ),
        (
            case("span in bytes overflows")
                .shape(&[2])
                .strides(&[i64::MAX / 2]),
            Expect::Err(Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MAX / 2,
            })),
        ),
        (
            case("sum of reaches overflows (reported at the axis, scanning from the last, where it does)")
                .shape(&[2, 2])
                .strides(&[i64::MAX / 2 + 1, i64::MAX / 2 + 1]),
            Expect::Err(Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MAX / 2 + 1,
            })),
        ),
        // ── data and byte_offset ──
        (
            case("NULL data with elements")
                .shape(&[2])
                .strides(&[1])
                .data(Data::Null),
            Expect::Err(Error::Layout(LayoutError::NullData { numel: 2 })),
        ),
        (
            case("NULL data with elements on a device")
                .shape(&[2])
                .strides(&[1])
                .data(Data::Null)
                .device(Device::cuda(0)),
            Expect::Err(Error::Layout(LayoutError::NullData { numel: 2 })),
        ),
        (
            case("byte_offset moves the first element; the span is relative to it")
                .shape(&[6])
                .strides(&[1])
                .byte_offset(8),
            ok(6, Both, (0, 24), &[1]),
        ),
        (
            case("host span past the end of the address space")
                .shape(&[4])
                .strides(&[1])
                .data(Data::Addr(usize::MAX - 8)),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(usize::MAX - 8, 0, ByteSpan { lo: 0, hi: 16 }),
            })),
        ),
        (
            case("negative stride below address 0")
                .shape(&[8])
                .strides(&[-1])
                .data(Data::Addr(16)),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(16, 0, ByteSpan { lo: -28, hi: 4 }),
            })),
        ),
        (
            case("byte_offset past the address space")
                .shape(&[1])
                .strides(&[1])
                .byte_offset(u64::MAX)
                .data(Data::Addr(64)),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(64, u64::MAX, ByteSpan { lo: 0, hi: 4 }),
            })),
        ),
        (
            case("device data is an opaque handle: no address arithmetic")
                .shape(&[4])
                .strides(&[1])
                .data(Data::Addr(usize::MAX - 8))
                .device(Device::webgpu(0)),
            ok(4, Both, (0, 16), &[1]),
        ),
        (
            case("pinned host memory is host-accessible: address checked")
                .shape(&[4])
                .strides(&[1])
                .data(Data::Addr(usize::MAX - 8))
                .device(Device::cuda_host()),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(usize::MAX - 8, 0, ByteSpan { lo: 0, hi: 16 }),
            })),
        ),
        (
            case("byte_offset = 2^63 over a valid buffer leaves user space")
                .shape(&[4])
                .strides(&[1])
                .byte_offset(1 << 63)
                .data(Data::Addr(0x10_0000)),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(0x10_0000, 1 << 63, ByteSpan { lo: 0, hi: 16 }),
            })),
        ),
        (
            case("the last byte at USER_ADDRESS_END is past user space")
                .shape(&[4])
                .strides(&[1])
                .data(Data::Addr(layout::USER_ADDRESS_END as usize - 8)),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(
                    layout::USER_ADDRESS_END as usize - 8,
                    0,
                    ByteSpan { lo: 0, hi: 16 },
                ),
            })),
        ),
        (
            case("the last byte just below USER_ADDRESS_END is user space")
                .shape(&[4])
                .strides(&[1])
                .data(Data::Addr(layout::USER_ADDRESS_END as usize - 16)),
            ok(4, Both, (0, 16), &[1]),
        ),
        (
            case("a first byte at address 0 is not user space")
                .shape(&[4])
                .strides(&[-1])
                .data(Data::Addr(12)),
            Expect::Err(Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(12, 0, ByteSpan { lo: -12, hi: 4 }),
            })),
        ),
        (
            case("a byte-span overflow blames the axis that reaches farthest (axis 0)")
                .shape(&[2, 3])
                .strides(&[1 << 62, 1]),
            Expect::Err(Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: 1 << 62,
            })),
        ),
        (
            case("an empty tensor whose other extents overflow is valid")
                .shape(&[i64::MAX, i64::MAX, 0])
                .strides(&[1, 1, 1]),
            ok(0, Both, (0, 0), &[1, 1, 1]),
        ),
        // ── dtypes ──
        (
            case("kDLFloat with 7 bits: no consumer reads it")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT, 7, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT, 7, 1),
                expected: "16, 32 or 64 (8-bit floats use the float8 type codes)",
            })),
        ),
        (
            case("kDLFloat with 33 bits")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT, 33, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT, 33, 1),
                expected: "16, 32 or 64 (8-bit floats use the float8 type codes)",
            })),
        ),
        (
            case("kDLFloat with 128 bits (NumPy's long double is never sent)")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT, 128, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT, 128, 1),
                expected: "16, 32 or 64 (8-bit floats use the float8 type codes)",
            })),
        ),
        (
            case("kDLInt with 12 bits")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::INT, 12, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::INT, 12, 1),
                expected: "1 to 8, 16, 32 or 64",
            })),
        ),
        (
            case("uint7 (PyTorch) is a real sub-byte width")
                .shape(&[8])
                .strides(&[1])
                .dtype(TypeCode::UINT, 7, 1),
            ok(8, Both, (0, 7), &[1]),
        ),
        (
            case("complex32 (PyTorch's chalf)")
                .shape(&[2])
                .strides(&[1])
                .dtype(TypeCode::COMPLEX, 32, 1),
            ok(2, Both, (0, 8), &[1]),
        ),
        (
            case("unknown type code")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode(99), 8, 1),
            Expect::Err(Error::Layout(LayoutError::UnknownTypeCode { code: TypeCode(99) })),
        ),
        (
            case("fp4 with bits != 4 must stop the import")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT4_E2M1FN, 8, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT4_E2M1FN, 8, 1),
                expected: "4",
            })),
        ),
        (
            case("fp6 with bits != 6 must stop the import")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT6_E3M2FN, 8, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT6_E3M2FN, 8, 1),
                expected: "6",
            })),
        ),
        (
            case("fp8 needs 8 bits")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT8_E5M2, 16, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT8_E5M2, 16, 1),
                expected: "8",
            })),
        ),
        (
            case("bool is stored in 8 bits")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::BOOL, 1, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::BOOL, 1, 1),
                expected: "8",
            })),
        ),
        (
            case("bfloat is 16 bits")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::BFLOAT, 8, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::BFLOAT, 8, 1),
                expected: "16",
            })),
        ),
        (
            case("int with 0 bits")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::INT, 0, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::INT, 0, 1),
                expected: "1 to 8, 16, 32 or 64",
            })),
        ),
        (
            case("lanes = 0")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT, 32, 0),
            Expect::Err(Error::Layout(LayoutError::InvalidLanes {
                dtype: DataType::new(TypeCode::FLOAT, 32, 0),
                reason: "lanes must be at least 1",
            })),
        ),
        (
            case("fp4 lanes = 3 is neither convention")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::FLOAT4_E2M1FN, 4, 3),
            Expect::Err(Error::Layout(LayoutError::InvalidLanes {
                dtype: DataType::new(TypeCode::FLOAT4_E2M1FN, 4, 3),
                reason: "sub-byte types take lanes = 1 (fp4 also takes 2, PyTorch's _x2)",
            })),
        ),
        (
            case("fp4 JAX convention (17,4,1): 5 values packed in 3 bytes")
                .shape(&[5])
                .strides(&[1])
                .dt(DataType::FLOAT4_E2M1FN),
            ok(5, Both, (0, 3), &[1]),
        ),
        (
            case("fp4 PyTorch convention (17,4,2): one byte per element")
                .shape(&[5])
                .strides(&[1])
                .dt(DataType::FLOAT4_E2M1FN_X2),
            ok(5, Both, (0, 5), &[1]),
        ),
        (
            case("fp6 packed: 4 values in 3 bytes")
                .shape(&[4])
                .strides(&[1])
                .dt(DataType::FLOAT6_E2M3FN),
            ok(4, Both, (0, 3), &[1]),
        ),
        (
            case("fp6 with IS_SUBBYTE_TYPE_PADDED: one byte each")
                .shape(&[4])
                .strides(&[1])
                .dt(DataType::FLOAT6_E2M3FN)
                .flags(FLAG_IS_SUBBYTE_TYPE_PADDED),
            ok(4, Both, (0, 4), &[1]),
        ),
        (
            case("int4 packed, strided by 2 elements")
                .shape(&[3])
                .strides(&[2])
                .dtype(TypeCode::INT, 4, 1),
            ok(3, Strided, (0, 3), &[2]),
        ),
        (
            case("vector lanes: float32x4")
                .shape(&[2])
                .strides(&[1])
                .dtype(TypeCode::FLOAT, 32, 4),
            ok(2, Both, (0, 32), &[1]),
        ),
        (
            case("bcomplex (code 18, after 1.3)")
                .shape(&[2])
                .strides(&[1])
                .dt(DataType::BCOMPLEX32),
            ok(2, Both, (0, 8), &[1]),
        ),
        (
            case("complex needs an even width")
                .shape(&[1])
                .strides(&[1])
                .dtype(TypeCode::COMPLEX, 24, 1),
            Expect::Err(Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::COMPLEX, 24, 1),
                expected: "32, 64 or 128",
            })),
        ),
        // ── versions and flags ──
        (
            case("major version 2 is refused")
                .shape(&[1])
                .strides(&[1])
                .version(Some((2, 0))),
            Expect::Err(Error::Layout(LayoutError::UnsupportedVersion { version: v(2, 0) })),
        ),
        (
            case("major version 0 is refused")
                .shape(&[1])
                .strides(&[1])
                .version(Some((0, 8))),
            Expect::Err(Error::Layout(LayoutError::UnsupportedVersion { version: v(0, 8) })),
        ),
        (
            case("a higher minor version is fine when every field is understood")
                .shape(&[1])
                .strides(&[1])
                .version(Some((1, 9))),
            ok(1, Both, (0, 4), &[1]),
        ),
        (
            case("READ_ONLY | IS_COPIED are accepted")
                .shape(&[1])
                .strides(&[1])
                .flags(FLAG_READ_ONLY | FLAG_IS_COPIED),
            ok(1, Both, (0, 4), &[1]),
        ),
        (
            case("undefined flag bits are refused")
                .shape(&[1])
                .strides(&[1])
                .flags(1 << 5),
            Expect::Err(Error::Layout(LayoutError::UnknownFlags { flags: 1 << 5 })),
        ),
    ]
}

#[test]
fn conformance_table() {
    let table = table();
    assert!(
        table.len() >= 40,
        "the table must cover at least 40 rules, has {}",
        table.len()
    );
    let mut failures = Vec::new();
    for (case, expect) in &table {
        let got = case.run();
        let pass = match (expect, &got) {
            (
                Expect::Ok {
                    numel,
                    contiguity,
                    span,
                    strides,
                },
                Ok((n, c, s, st)),
            ) => numel == n && contiguity == c && span == s && strides == st,
            (Expect::Err(e), Err(g)) => e == g,
            _ => false,
        };
        if !pass {
            failures.push(format!(
                "{}:\n    expected {:?}\n    got      {:?}",
                case.rule, expect, got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rules failed:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

/// Every error of the table, plus the ones that only other operations reach.
fn all_reached_errors() -> Vec<Error> {
    let mut errors: Vec<Error> = table().iter().filter_map(|(c, _)| c.run().err()).collect();

    // The process-wide default registry is installed once: a second install is refused.
    let _ = dlport_core::default_registry();
    errors.push(
        dlport_core::Registry::with_cpu()
            .install_default()
            .unwrap_err(),
    );

    // Pure validator: a strides array of the wrong length (impossible through a DLTensor).
    errors.push(
        layout::validate(&RawFields {
            data: 64,
            device: Device::cpu(),
            dtype: DataType::FLOAT32,
            shape: &[2, 2],
            strides: Some(&[1]),
            byte_offset: 0,
            version: None,
            flags: 0,
        })
        .unwrap_err(),
    );
    // Ownership: a NULL managed pointer.
    // SAFETY: NULL is explicitly allowed.
    errors.push(
        unsafe {
            ManagedTensor::from_raw_versioned(std::ptr::null_mut::<DLManagedTensorVersioned>())
        }
        .unwrap_err(),
    );
    // Typed access.
    let t = ExportBuilder::from_vec(vec![1.0f32; 6], &[2, 3])
        .build()
        .unwrap();
    errors.push(t.as_slice::<i32>().unwrap_err());
    let t = ExportBuilder::from_vec(vec![1.0f32; 6], &[3, 2])
        .strides(&[1, 3])
        .build()
        .unwrap();
    errors.push(t.as_slice::<f32>().unwrap_err());
    let t = ExportBuilder::from_vec(vec![1.0f32; 6], &[5])
        .byte_offset(2)
        .build()
        .unwrap();
    errors.push(t.as_slice::<f32>().unwrap_err());
    let mut t = ExportBuilder::from_vec(vec![1.0f32; 6], &[6])
        .read_only(true)
        .build()
        .unwrap();
    errors.push(t.as_mut_slice::<f32>().unwrap_err());
    // Export: storage too small.
    errors.push(
        ExportBuilder::from_vec(vec![1.0f32; 6], &[7])
            .build()
            .unwrap_err(),
    );
    // Names.
    errors.push("float33x".parse::<DataType>().unwrap_err());
    // Device memory is not host-accessible.
    struct DeviceBuf;
    // SAFETY: the handle is never dereferenced; the test only reads metadata.
    unsafe impl dlport_core::TensorStorage for DeviceBuf {
        fn data_ptr(&mut self) -> *mut c_void {
            std::ptr::without_provenance_mut(0x1000)
        }
        fn byte_len(&self) -> usize {
            64
        }
        fn device(&self) -> Device {
            Device::cuda(0)
        }
    }
    let t = ExportBuilder::new(DeviceBuf, DataType::FLOAT32, &[4])
        .build()
        .unwrap();
    errors.push(t.as_slice::<f32>().unwrap_err());
    // Dispatch: no backend for a device type.
    errors.push(
        dlport_core::Registry::with_cpu()
            .resolve(Device::new(DeviceType::ONEAPI, 0))
            .err()
            .unwrap(),
    );
    // Dispatch and backend tensors.
    use dlport_core::backend::{AlignedBuffer, Backend, CpuBackend, LayoutNeed, ViewRequirements};
    use dlport_core::{CopyPolicy, ImportOptions, Registry, reconcile_device};
    use std::sync::Arc;
    errors.push(reconcile_device(Device::cuda(0), Some(Device::cpu())).unwrap_err());
    let registry = Registry::with_cpu();
    let strided = ExportBuilder::from_vec(vec![0f32; 6], &[2, 3])
        .strides(&[1, 2])
        .build()
        .unwrap();
    let opts = ImportOptions {
        copy: CopyPolicy::Never,
        requirements: Some(ViewRequirements {
            layout: LayoutNeed::RowMajor,
            alignment: 1,
        }),
        ..Default::default()
    };
    errors.push(registry.from_dlpack(strided, &opts).unwrap_err());
    let t = CpuBackend
        .allocate(Device::cpu(), DataType::FLOAT32, &[4])
        .unwrap();
    {
        let _reading = t.view().unwrap();
        errors.push(dlport_core::backend::release_ownership(&t, true, Device::cpu()).unwrap_err());
    }
    let released = dlport_core::backend::release_ownership(&t, true, Device::cpu()).unwrap();
    errors.push(t.view().err().unwrap());
    drop(released);
    errors.push(
        CpuBackend
            .allocate(Device::cuda(0), DataType::FLOAT32, &[4])
            .unwrap_err(),
    );
    errors.push(AlignedBuffer::zeroed(usize::MAX, 64).unwrap_err());
    let mut r = Registry::with_cpu();
    errors.push(r.register(Arc::new(CpuBackend)).unwrap_err());
    struct OneDevice;
    impl Backend for OneDevice {
        fn name(&self) -> &'static str {
            "one"
        }
        fn device_types(&self) -> &[DeviceType] {
            &[DeviceType::EXT_DEV]
        }
        fn can_access(&self, memory: Device) -> bool {
            memory.device_type == DeviceType::EXT_DEV
        }
        fn allocate(
            &self,
            device: Device,
            _: DataType,
            _: &[i64],
        ) -> Result<dlport_core::Tensor, Error> {
            // A stand-in driver: device 0 has no memory left, device 1 has no driver at all.
            if device.device_id == 0 {
                Err(Error::Backend(BackendError::failed(
                    "one",
                    "oneMalloc",
                    2,
                    "out of device memory; free tensors or use a smaller batch",
                )))
            } else {
                Err(Error::Backend(BackendError::DriverNotFound {
                    driver: &Driver {
                        api: "One",
                        library: "libone.so.1",
                    },
                }))
            }
        }
        fn translate_device_id(&self, producer_id: i32) -> Result<i32, Error> {
            if producer_id == 0 {
                Ok(0)
            } else {
                Err(Error::Dispatch(DispatchError::InvalidDeviceId {
                    backend: "one",
                    device_id: producer_id,
                }))
            }
        }
    }
    r.register(Arc::new(OneDevice)).unwrap();
    // The DLPack stream argument.
    errors.push(dlport_core::StreamRequest::parse(Some(0), DeviceType::CUDA).unwrap_err());
    // Driver and OS failures, as a backend reports them.
    errors.push(
        OneDevice
            .allocate(Device::new(DeviceType::EXT_DEV, 0), DataType::FLOAT32, &[1])
            .unwrap_err(),
    );
    errors.push(
        OneDevice
            .allocate(Device::new(DeviceType::EXT_DEV, 1), DataType::FLOAT32, &[1])
            .unwrap_err(),
    );
    let ext = ExportBuilder::new(DeviceBuf2, DataType::FLOAT32, &[4])
        .build()
        .unwrap();
    errors.push(r.from_dlpack(ext, &ImportOptions::default()).unwrap_err());
    // Aliasing: a no-copy export of a backend tensor shares its buffer: no `&mut`.
    {
        use dlport_core::{ExportOptions, ImportOptions};
        let reg = dlport_core::Registry::with_cpu();
        let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
            .build()
            .unwrap();
        let t = reg.from_dlpack(src, &ImportOptions::default()).unwrap();
        let mut e = reg.to_dlpack(&t, &ExportOptions::versioned()).unwrap();
        errors.push(e.as_mut_slice::<f32>().unwrap_err());
        // Legacy: READ_ONLY cannot be carried.
        let ro = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
            .read_only(true)
            .build()
            .unwrap();
        errors.push(ro.into_legacy(dlport_core::CopyPolicy::Never).unwrap_err());
        // Allocation limit: one byte broadcast to 2^40 elements.
        let one = ExportBuilder::from_vec(vec![7u8], &[1 << 40])
            .strides(&[0])
            .build()
            .unwrap();
        let opts = ImportOptions {
            copy: dlport_core::CopyPolicy::Always,
            max_alloc: Some(1 << 20),
            ..ImportOptions::default()
        };
        errors.push(reg.from_dlpack(one, &opts).unwrap_err());
        // Options: an alignment that is not a power of two.
        let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
            .build()
            .unwrap();
        let opts = ImportOptions {
            requirements: Some(dlport_core::backend::ViewRequirements {
                layout: dlport_core::backend::LayoutNeed::Any,
                alignment: 3,
            }),
            ..ImportOptions::default()
        };
        errors.push(reg.from_dlpack(src, &opts).unwrap_err());
        // A copy into a destination of the wrong size.
        let src = ExportBuilder::from_vec(vec![1.0f32; 4], &[4])
            .build()
            .unwrap();
        let mut dst = [0u8; 15];
        errors.push(dlport_core::backend::copy_to_compact(&src.view(), &mut dst).unwrap_err());
    }
    errors
}

/// Device memory of an extension device, id 3 (never dereferenced).
struct DeviceBuf2;
// SAFETY: the handle is never dereferenced by these tests.
unsafe impl dlport_core::TensorStorage for DeviceBuf2 {
    fn data_ptr(&mut self) -> *mut c_void {
        std::ptr::without_provenance_mut(0x2000)
    }
    fn byte_len(&self) -> usize {
        16
    }
    fn device(&self) -> Device {
        Device::new(DeviceType::EXT_DEV, 3)
    }
}

#[test]
fn every_error_variant_is_reached() {
    let reached: BTreeSet<u32> = all_reached_errors().iter().map(Error::code).collect();
    let all: BTreeSet<u32> = (1..=Error::CODE_COUNT).collect();
    let missing: Vec<_> = all.difference(&reached).collect();
    assert!(
        missing.is_empty(),
        "error codes never reached by a case: {missing:?}"
    );
}

#[test]
fn error_messages_name_the_field_and_value() {
    let expect = [
        (
            Error::Layout(LayoutError::NegativeExtent {
                axis: 2,
                extent: -3,
            }),
            "shape[2] = -3 is negative",
        ),
        (
            Error::Layout(LayoutError::NullStrides {
                ndim: 2,
                version: v(1, 3),
            }),
            "strides is NULL, but DLPack 1.3 requires strides when ndim = 2",
        ),
        (
            Error::Layout(LayoutError::UnknownTypeCode { code: TypeCode(99) }),
            "dtype.code = 99",
        ),
        (
            Error::Layout(LayoutError::UnsupportedVersion { version: v(2, 0) }),
            "version = 2.0",
        ),
        (
            Error::Layout(LayoutError::NdimOutOfRange { ndim: 65 }),
            "ndim = 65 is out of range 0..=64",
        ),
        (
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode::FLOAT4_E2M1FN, 8, 1),
                expected: "4",
            }),
            "dtype.bits = 8 is invalid for kDLFloat4_e2m1fn (17): it must be 4",
        ),
        (
            Error::Layout(LayoutError::NullData { numel: 6 }),
            "data is NULL, but the tensor has 6 elements",
        ),
        (
            Error::Layout(LayoutError::UnknownFlags { flags: 0x21 }),
            "flags = 0x21 has bits DLPack 1.3 does not define (0x20)",
        ),
        (
            Error::Access(AccessError::DtypeMismatch {
                requested: DataType::INT32,
                actual: DataType::FLOAT32,
            }),
            "dtype is float32, but int32 was requested",
        ),
        (
            Error::Access(AccessError::NotHostAccessible {
                device: Device::cuda(1),
            }),
            "device = cuda:1 is not host-accessible",
        ),
        // Variants whose fields became smaller types read exactly as before.
        (
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(16, 0, ByteSpan { lo: -28, hi: 4 }),
            }),
            "data = 0x10 with byte_offset = 0 and span [-28, 4) leaves user-space memory (its \
             first byte must be above 0, its last below USER_ADDRESS_END): fix data or byte_offset",
        ),
        (
            Error::Layout(LayoutError::SpanOverflow {
                axis: 63,
                extent: 2,
                stride: i64::MAX,
            }),
            "strides[63] = 9223372036854775807 with shape[63] = 2 makes the byte span overflow",
        ),
        (
            Error::Access(AccessError::FlagNotRepresentable {
                flag: Flag::IsSubbyteTypePadded,
            }),
            "flags has IS_SUBBYTE_TYPE_PADDED set, which a legacy DLManagedTensor cannot carry",
        ),
        (
            Error::Dispatch(DispatchError::CopyRequired {
                reason: CopyReason::Alignment {
                    address: Address::new(0xffff_ffff_0000_0041),
                    required: 64,
                },
            }),
            "a copy would be needed, but the copy policy is Never: data + byte_offset = \
             0xffffffff00000041 is not 64-byte aligned, as the target requires; allow a copy",
        ),
        (
            Error::Dispatch(DispatchError::CopyRequired {
                reason: CopyReason::Flag {
                    flag: Flag::ReadOnly,
                },
            }),
            "the tensor has READ_ONLY, which a legacy DLManagedTensor cannot carry",
        ),
        (
            Error::Dispatch(DispatchError::AllocationLimit {
                bytes: (3u128 << 80).into(),
                limit: 1 << 20,
            }),
            "the operation needs 3626777458843887524118528 bytes, above the allocation limit of \
             1048576 bytes",
        ),
        (
            Error::Dispatch(DispatchError::InvalidOption {
                rule: OptionRule::DeviceCopyAlignment,
                value: 64,
            }),
            "alignment = 64 is invalid: it must be 1 for copies to device memory (only host \
             copies can be re-aligned)",
        ),
        (
            Error::Dispatch(DispatchError::InvalidStream {
                stream: 0,
                device_type: DeviceType::CUDA,
                reason: StreamReason::CudaZero,
            }),
            "stream = 0 is invalid for kDLCUDA (2): 0 is ambiguous for CUDA; use 1 (legacy \
             default) or 2 (per-thread)",
        ),
        (
            Error::Dispatch(DispatchError::InvalidName {
                what: NameKind::DataType,
                name: ShortStr::new("float8_e4m3fnuz_extended"),
            }),
            "data type name \"float8_e4m3fnuz_exte…\" is not recognised",
        ),
        (
            Error::Dispatch(DispatchError::NoBackend {
                device_type: DeviceType::ONEAPI,
                device_id: 1,
                registered: BackendNames::new(["cpu", "pinned", "a_backend_with_a_long_name"]),
            }),
            "device 1; registered: cpu, pinned, a_backend_with_a_long_name",
        ),
        (
            Error::Backend(BackendError::unsupported(
                "cpu",
                "allocation on a device other than cpu",
            )),
            "backend \"cpu\" does not support allocation on a device other than cpu",
        ),
        (
            Error::Backend(BackendError::DriverNotFound {
                driver: &Driver {
                    api: "One",
                    library: "libone.so.1",
                },
            }),
            "no One driver: libone.so.1 not found; install the driver or use the host backends",
        ),
    ];
    for (err, text) in expect {
        let msg = err.to_string();
        assert!(msg.contains(text), "{msg:?} should contain {text:?}");
    }
}
