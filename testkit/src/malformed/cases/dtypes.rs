//! `dtype`: type codes, bits per code, lanes, sub-byte packing.

use dlport_core::DataType;
use dlport_core::abi::{FLAG_IS_SUBBYTE_TYPE_PADDED, TypeCode};
use dlport_core::error::LayoutError;
use dlport_core::layout::Contiguity::*;

use crate::malformed::{Case, Expect, case, err, ok};

const FLOAT_BITS: &str = "16, 32 or 64 (8-bit floats use the float8 type codes)";
const INT_BITS: &str = "1 to 8, 16, 32 or 64";
const SUBBYTE_LANES: &str = "sub-byte types take lanes = 1 (fp4 also takes 2, PyTorch's _x2)";

/// One element of `dtype`.
fn one(rule: &'static str, code: TypeCode, bits: u8, lanes: u16) -> Case {
    case(rule)
        .shape(&[1])
        .strides(&[1])
        .dtype(code, bits, lanes)
}

/// A 2×3 tensor of the raw dtype `(code, bits, lanes)`.
fn raw(rule: &'static str, code: u8, bits: u8, lanes: u16) -> Case {
    case(rule).matrix().dtype(TypeCode(code), bits, lanes)
}

fn bits(code: u8, b: u8, lanes: u16, expected: &'static str) -> Expect {
    err(LayoutError::InvalidBits {
        dtype: DataType::new(TypeCode(code), b, lanes),
        expected,
    })
}

fn lanes(code: u8, b: u8, l: u16, reason: &'static str) -> Expect {
    err(LayoutError::InvalidLanes {
        dtype: DataType::new(TypeCode(code), b, l),
        reason,
    })
}

fn unknown(code: u8) -> Expect {
    err(LayoutError::UnknownTypeCode {
        code: TypeCode(code),
    })
}

pub(crate) fn cases() -> Vec<(Case, Expect)> {
    use TypeCode as T;
    vec![
        (
            one("kDLFloat with 7 bits: no consumer reads it", T::FLOAT, 7, 1),
            bits(T::FLOAT.0, 7, 1, FLOAT_BITS),
        ),
        (
            one("kDLFloat with 33 bits", T::FLOAT, 33, 1),
            bits(T::FLOAT.0, 33, 1, FLOAT_BITS),
        ),
        (
            one(
                "kDLFloat with 128 bits (NumPy's long double is never sent)",
                T::FLOAT,
                128,
                1,
            ),
            bits(T::FLOAT.0, 128, 1, FLOAT_BITS),
        ),
        (
            one("kDLInt with 12 bits", T::INT, 12, 1),
            bits(T::INT.0, 12, 1, INT_BITS),
        ),
        (
            case("uint7 (PyTorch) is a real sub-byte width")
                .shape(&[8])
                .strides(&[1])
                .dtype(T::UINT, 7, 1),
            ok(8, Both, (0, 7), &[1]),
        ),
        (
            case("complex32 (PyTorch's chalf)")
                .shape(&[2])
                .strides(&[1])
                .dtype(T::COMPLEX, 32, 1),
            ok(2, Both, (0, 8), &[1]),
        ),
        (one("unknown type code", TypeCode(99), 8, 1), unknown(99)),
        (
            one(
                "fp4 with bits != 4 must stop the import",
                T::FLOAT4_E2M1FN,
                8,
                1,
            ),
            bits(T::FLOAT4_E2M1FN.0, 8, 1, "4"),
        ),
        (
            one(
                "fp6 with bits != 6 must stop the import",
                T::FLOAT6_E3M2FN,
                8,
                1,
            ),
            bits(T::FLOAT6_E3M2FN.0, 8, 1, "6"),
        ),
        (
            one("fp8 needs 8 bits", T::FLOAT8_E5M2, 16, 1),
            bits(T::FLOAT8_E5M2.0, 16, 1, "8"),
        ),
        (
            one("bool is stored in 8 bits", T::BOOL, 1, 1),
            bits(T::BOOL.0, 1, 1, "8"),
        ),
        (
            one("bfloat is 16 bits", T::BFLOAT, 8, 1),
            bits(T::BFLOAT.0, 8, 1, "16"),
        ),
        (
            one("int with 0 bits", T::INT, 0, 1),
            bits(T::INT.0, 0, 1, INT_BITS),
        ),
        (
            one("lanes = 0", T::FLOAT, 32, 0),
            lanes(T::FLOAT.0, 32, 0, "lanes must be at least 1"),
        ),
        (
            one(
                "fp4 lanes = 3 is neither convention",
                T::FLOAT4_E2M1FN,
                4,
                3,
            ),
            lanes(T::FLOAT4_E2M1FN.0, 4, 3, SUBBYTE_LANES),
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
                .dtype(T::INT, 4, 1),
            ok(3, Strided, (0, 3), &[2]),
        ),
        (
            case("vector lanes: float32x4")
                .shape(&[2])
                .strides(&[1])
                .dtype(T::FLOAT, 32, 4),
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
            one("complex needs an even width", T::COMPLEX, 24, 1),
            bits(T::COMPLEX.0, 24, 1, "32, 64 or 128"),
        ),
        // ── first written for the C ABI: a 2×3 tensor of a raw (code, bits, lanes) ──
        (raw("float with 7 bits", 2, 7, 1), bits(2, 7, 1, FLOAT_BITS)),
        (
            raw("float with 33 bits", 2, 33, 1),
            bits(2, 33, 1, FLOAT_BITS),
        ),
        (
            raw("float with 128 bits", 2, 128, 1),
            bits(2, 128, 1, FLOAT_BITS),
        ),
        (raw("uint with 24 bits", 1, 24, 1), bits(1, 24, 1, INT_BITS)),
        (
            raw("bcomplex with 64 bits", 18, 64, 1),
            bits(18, 64, 1, "32"),
        ),
        (raw("unknown dtype code 19", 19, 8, 1), unknown(19)),
        (raw("unknown dtype code 255", 255, 32, 1), unknown(255)),
        (raw("fp4 with 8 bits", 17, 8, 1), bits(17, 8, 1, "4")),
        (raw("fp4 with 0 bits", 17, 0, 1), bits(17, 0, 1, "4")),
        (raw("fp6 with 8 bits", 15, 8, 1), bits(15, 8, 1, "6")),
        (raw("fp8 with 16 bits", 10, 16, 1), bits(10, 16, 1, "8")),
        (raw("bool with 16 bits", 6, 16, 1), bits(6, 16, 1, "8")),
        (raw("bfloat with 32 bits", 4, 32, 1), bits(4, 32, 1, "16")),
        (
            raw("complex with 8 bits", 5, 8, 1),
            bits(5, 8, 1, "32, 64 or 128"),
        ),
        (raw("int with 0 bits", 0, 0, 1), bits(0, 0, 1, INT_BITS)),
        (
            raw("handle with 12 bits", 3, 12, 1),
            bits(3, 12, 1, "a non-zero multiple of 8"),
        ),
        (
            raw("lanes 0", 2, 32, 0),
            lanes(2, 32, 0, "lanes must be at least 1"),
        ),
        (raw("fp4 lanes 3", 17, 4, 3), lanes(17, 4, 3, SUBBYTE_LANES)),
        (raw("fp6 lanes 2", 16, 6, 2), lanes(16, 6, 2, SUBBYTE_LANES)),
        (raw("int4 lanes 4", 0, 4, 4), lanes(0, 4, 4, SUBBYTE_LANES)),
        (
            raw("legacy: fp4 with 8 bits", 17, 8, 1).legacy(),
            bits(17, 8, 1, "4"),
        ),
        (raw("legacy: unknown dtype", 77, 8, 1).legacy(), unknown(77)),
    ]
}
