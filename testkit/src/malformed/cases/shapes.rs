//! `ndim`, `shape` and `strides`: dimensions, element counts, size-0 tensors, NULL arrays by
//! version and span arithmetic.

use dlport_core::error::LayoutError;
use dlport_core::layout::Contiguity::*;

use crate::malformed::{Case, Data, Expect, case, err, ok, v};

pub(crate) fn cases() -> Vec<(Case, Expect)> {
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
                .legacy(),
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
            err(LayoutError::NdimOutOfRange { ndim: 65 }),
        ),
        (
            case("negative ndim is refused")
                .null_shape(-1)
                .null_strides(),
            err(LayoutError::NdimOutOfRange { ndim: -1 }),
        ),
        (
            case("shape NULL with ndim > 0").null_shape(2),
            err(LayoutError::NullShape { ndim: 2 }),
        ),
        (
            case("negative extent").shape(&[2, -3]).strides(&[1, 1]),
            err(LayoutError::NegativeExtent {
                axis: 1,
                extent: -3,
            }),
        ),
        (
            case("element count overflows 64 bits")
                .also("shape product overflows u64")
                .shape(&[1 << 32, 1 << 32])
                .strides(&[1, 1]),
            err(LayoutError::ElementCountOverflow {
                axis: 1,
                extent: 1 << 32,
            }),
        ),
        (
            case("element count above i64::MAX")
                .shape(&[1 << 61, 4])
                .strides(&[4, 1]),
            err(LayoutError::ElementCountOverflow { axis: 1, extent: 4 }),
        ),
        (
            case("a zero extent makes an overflowing shape empty")
                .also("an empty tensor whose other extents overflow is valid")
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
                .legacy(),
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
                .also("NULL strides at 1.2")
                .shape(&[2, 3])
                .null_strides()
                .version(Some((1, 2))),
            err(LayoutError::NullStrides {
                ndim: 2,
                version: v(1, 2),
            }),
        ),
        (
            case("v1.3 forbids NULL strides even for a size-0 tensor")
                .shape(&[0, 3])
                .null_strides()
                .data(Data::Null),
            err(LayoutError::NullStrides {
                ndim: 2,
                version: v(1, 3),
            }),
        ),
        (
            case("legacy NULL strides with a zero extent")
                .shape(&[4, 0, 2])
                .null_strides()
                .legacy()
                .data(Data::Null),
            ok(0, Both, (0, 0), &[2, 2, 1]),
        ),
        // ── span arithmetic ──
        (
            case("stride × extent overflows")
                .also("stride × extent overflows")
                .shape(&[3])
                .strides(&[i64::MAX]),
            err(LayoutError::SpanOverflow {
                axis: 0,
                extent: 3,
                stride: i64::MAX,
            }),
        ),
        (
            case("span in bytes overflows")
                .also("span in bytes overflows")
                .shape(&[2])
                .strides(&[i64::MAX / 2]),
            err(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MAX / 2,
            }),
        ),
        (
            case(
                "sum of reaches overflows (reported at the axis, scanning from the last, where it does)",
            )
            .shape(&[2, 2])
            .strides(&[i64::MAX / 2 + 1, i64::MAX / 2 + 1]),
            err(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MAX / 2 + 1,
            }),
        ),
        (
            case("a byte-span overflow blames the axis that reaches farthest (axis 0)")
                .also("a span overflow in bytes is blamed on axis 0, which reaches farthest")
                .shape(&[2, 3])
                .strides(&[1 << 62, 1]),
            err(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: 1 << 62,
            }),
        ),
        // ── first written for the C ABI (a 2×3 float32 tensor unless the case says) ──
        (
            case("NULL shape, ndim 2").matrix().null_shape(2),
            err(LayoutError::NullShape { ndim: 2 }),
        ),
        (
            case("NULL shape, ndim 7").matrix().null_shape(7),
            err(LayoutError::NullShape { ndim: 7 }),
        ),
        (
            case("ndim -1").matrix().ndim(-1),
            err(LayoutError::NdimOutOfRange { ndim: -1 }),
        ),
        (
            case("ndim 10^6").matrix().ndim(1_000_000),
            err(LayoutError::NdimOutOfRange { ndim: 1_000_000 }),
        ),
        (
            case("ndim 65").matrix().ndim(65),
            err(LayoutError::NdimOutOfRange { ndim: 65 }),
        ),
        (
            case("ndim i32::MIN").matrix().ndim(i32::MIN),
            err(LayoutError::NdimOutOfRange {
                ndim: i64::from(i32::MIN),
            }),
        ),
        (
            case("shape product overflows i64")
                .shape(&[1 << 61, 4])
                .strides(&[1, 1]),
            err(LayoutError::ElementCountOverflow { axis: 1, extent: 4 }),
        ),
        (
            case("shape product overflows usize")
                .shape(&[i64::MAX, 2])
                .strides(&[1, 1]),
            err(LayoutError::ElementCountOverflow { axis: 1, extent: 2 }),
        ),
        (
            case("negative extent").shape(&[-1]).strides(&[1]),
            err(LayoutError::NegativeExtent {
                axis: 0,
                extent: -1,
            }),
        ),
        (
            case("negative extent on a later axis")
                .shape(&[3, 4, -2])
                .strides(&[1, 1, 1]),
            err(LayoutError::NegativeExtent {
                axis: 2,
                extent: -2,
            }),
        ),
        (
            case("i64::MIN extent").shape(&[i64::MIN]).strides(&[1]),
            err(LayoutError::NegativeExtent {
                axis: 0,
                extent: i64::MIN,
            }),
        ),
        (
            case("i64::MIN stride").shape(&[2]).strides(&[i64::MIN]),
            err(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MIN,
            }),
        ),
        (
            case("NULL strides at 1.3, ndim 3")
                .shape(&[1, 2, 3])
                .null_strides(),
            err(LayoutError::NullStrides {
                ndim: 3,
                version: v(1, 3),
            }),
        ),
        (
            case("legacy: NULL shape").matrix().null_shape(2).legacy(),
            err(LayoutError::NullShape { ndim: 2 }),
        ),
        (
            case("legacy: negative ndim").matrix().ndim(-5).legacy(),
            err(LayoutError::NdimOutOfRange { ndim: -5 }),
        ),
        (
            case("legacy: negative extent")
                .shape(&[5, -5])
                .strides(&[1, 1])
                .legacy(),
            err(LayoutError::NegativeExtent {
                axis: 1,
                extent: -5,
            }),
        ),
        // ── added with the merge ──
        (
            case("v1.0 NULL strides mean compact row-major")
                .shape(&[2, 3])
                .null_strides()
                .version(Some((1, 0))),
            ok(6, RowMajor, (0, 24), &[3, 1]),
        ),
        (
            case("0-d scalar with non-NULL empty arrays"),
            ok(1, Both, (0, 4), &[]),
        ),
        (
            case("legacy 2-d column-major")
                .shape(&[2, 3])
                .strides(&[1, 2])
                .legacy(),
            ok(6, ColumnMajor, (0, 24), &[1, 2]),
        ),
    ]
}
