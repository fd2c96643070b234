//! The managed header: versions (1.x, earlier and future majors) and flags.

use dlport_core::abi::{FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use dlport_core::error::LayoutError;
use dlport_core::layout::Contiguity::*;

use crate::malformed::{Case, Expect, case, err, ok, v};

fn unsupported(major: u32, minor: u32) -> Expect {
    err(LayoutError::UnsupportedVersion {
        version: v(major, minor),
    })
}

pub(crate) fn cases() -> Vec<(Case, Expect)> {
    vec![
        (
            case("major version 2 is refused")
                .shape(&[1])
                .strides(&[1])
                .version(Some((2, 0))),
            unsupported(2, 0),
        ),
        (
            case("major version 0 is refused")
                .shape(&[1])
                .strides(&[1])
                .version(Some((0, 8))),
            unsupported(0, 8),
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
            err(LayoutError::UnknownFlags { flags: 1 << 5 }),
        ),
        // ── first written for the C ABI (a 2×3 float32 tensor unless the case says) ──
        (
            case("version 0.8").matrix().version(Some((0, 8))),
            unsupported(0, 8),
        ),
        (
            case("version 0.0").matrix().version(Some((0, 0))),
            unsupported(0, 0),
        ),
        (
            case("version 2.0").matrix().version(Some((2, 0))),
            unsupported(2, 0),
        ),
        (
            case("version 3.1").matrix().version(Some((3, 1))),
            unsupported(3, 1),
        ),
        (
            case("version u32::MAX.0")
                .matrix()
                .version(Some((u32::MAX, 0))),
            unsupported(u32::MAX, 0),
        ),
        (
            case("version 2.0 with garbage after the header")
                .matrix()
                .version(Some((2, 0)))
                .null_shape(i32::MAX),
            unsupported(2, 0),
        ),
        (
            case("undefined flag bit 3").matrix().flags(1 << 3),
            err(LayoutError::UnknownFlags { flags: 1 << 3 }),
        ),
        (
            case("undefined flag bit 63").matrix().flags(1 << 63 | 1),
            err(LayoutError::UnknownFlags { flags: 1 << 63 | 1 }),
        ),
        // ── added with the merge ──
        (
            case("a future major is refused before its flags are judged")
                .matrix()
                .version(Some((2, 0)))
                .flags(1 << 5),
            unsupported(2, 0),
        ),
        (
            case("the three defined flags at once")
                .matrix()
                .flags(FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_IS_SUBBYTE_TYPE_PADDED),
            ok(6, RowMajor, (0, 24), &[3, 1]),
        ),
    ]
}
