//! `data`, `byte_offset` and `device`: NULL data, the address space and device handles.

use dlport_core::Device;
use dlport_core::abi::DeviceType;
use dlport_core::error::{AddressRange, LayoutError};
use dlport_core::internal::USER_ADDRESS_END;
use dlport_core::layout::ByteSpan;
use dlport_core::layout::Contiguity::*;

use crate::malformed::{Case, Data, Expect, case, err, ok};

/// `data` at `addr` (no provenance: never dereferenced).
fn at(addr: usize) -> Data {
    Data::Addr(addr)
}

/// The address range `AddressOverflow` reports.
fn range(data: usize, byte_offset: u64, lo: i64, hi: i64) -> LayoutError {
    LayoutError::AddressOverflow {
        range: AddressRange::new(data, byte_offset, ByteSpan { lo, hi }),
    }
}

pub(crate) fn cases() -> Vec<(Case, Expect)> {
    let end = USER_ADDRESS_END as usize;
    vec![
        // ── data and byte_offset ──
        (
            case("NULL data with elements")
                .shape(&[2])
                .strides(&[1])
                .data(Data::Null),
            err(LayoutError::NullData { numel: 2 }),
        ),
        (
            case("NULL data with elements on a device")
                .shape(&[2])
                .strides(&[1])
                .data(Data::Null)
                .device(Device::cuda(0)),
            err(LayoutError::NullData { numel: 2 }),
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
                .also("strides reach past the address space")
                .shape(&[4])
                .strides(&[1])
                .data(at(usize::MAX - 8)),
            err(range(usize::MAX - 8, 0, 0, 16)),
        ),
        (
            case("negative stride below address 0")
                .also("strides reach below address 0")
                .shape(&[8])
                .strides(&[-1])
                .data(at(16)),
            err(range(16, 0, -28, 4)),
        ),
        (
            case("byte_offset past the address space")
                .shape(&[1])
                .strides(&[1])
                .byte_offset(u64::MAX)
                .data(at(64)),
            err(range(64, u64::MAX, 0, 4)),
        ),
        (
            case("device data is an opaque handle: no address arithmetic")
                .shape(&[4])
                .strides(&[1])
                .data(at(usize::MAX - 8))
                .device(Device::webgpu(0)),
            ok(4, Both, (0, 16), &[1]),
        ),
        (
            case("pinned host memory is host-accessible: address checked")
                .shape(&[4])
                .strides(&[1])
                .data(at(usize::MAX - 8))
                .device(Device::cuda_host()),
            err(range(usize::MAX - 8, 0, 0, 16)),
        ),
        (
            case("byte_offset = 2^63 over a valid buffer leaves user space")
                .shape(&[4])
                .strides(&[1])
                .byte_offset(1 << 63)
                .data(at(0x10_0000)),
            err(range(0x10_0000, 1 << 63, 0, 16)),
        ),
        (
            case("the last byte at USER_ADDRESS_END is past user space")
                .shape(&[4])
                .strides(&[1])
                .data(at(end - 8)),
            err(range(end - 8, 0, 0, 16)),
        ),
        (
            case("the last byte just below USER_ADDRESS_END is user space")
                .shape(&[4])
                .strides(&[1])
                .data(at(end - 16)),
            ok(4, Both, (0, 16), &[1]),
        ),
        (
            case("a first byte at address 0 is not user space")
                .shape(&[4])
                .strides(&[-1])
                .data(at(12)),
            err(range(12, 0, -12, 4)),
        ),
        // ── first written for the C ABI (a 2×3 float32 tensor unless the case says) ──
        (
            case("byte_offset = 2^63: the first byte is past user space")
                .matrix()
                .data(at(0x10_0000))
                .byte_offset(1 << 63),
            err(range(0x10_0000, 1 << 63, 0, 24)),
        ),
        (
            case("the last byte at the end of user space")
                .matrix()
                .data(at(end - 16)),
            err(range(end - 16, 0, 0, 24)),
        ),
        (
            case("NULL data with a non-zero size")
                .matrix()
                .data(Data::Null),
            err(LayoutError::NullData { numel: 6 }),
        ),
        (
            case("NULL data, CUDA device")
                .matrix()
                .data(Data::Null)
                .device(Device::cuda(0)),
            err(LayoutError::NullData { numel: 6 }),
        ),
        (
            case("NULL data, unknown device type")
                .matrix()
                .data(Data::Null)
                .device(Device::new(DeviceType(99), 0)),
            err(LayoutError::NullData { numel: 6 }),
        ),
        (
            case("huge negative stride")
                .shape(&[2])
                .strides(&[-(1 << 40)])
                .data(at(4096)),
            err(range(4096, 0, -(1 << 42), 4)),
        ),
        (
            case("byte_offset u64::MAX")
                .matrix()
                .byte_offset(u64::MAX)
                .data(at(64)),
            err(range(64, u64::MAX, 0, 24)),
        ),
        (
            case("data + byte_offset overflows")
                .matrix()
                .byte_offset(1 << 63)
                .data(at(1 << 63)),
            err(range(1 << 63, 1 << 63, 0, 24)),
        ),
        (
            case("legacy: NULL data").matrix().data(Data::Null).legacy(),
            err(LayoutError::NullData { numel: 6 }),
        ),
        // ── added with the merge ──
        (
            case("a misaligned first element is valid: alignment is typed access's concern")
                .shape(&[4])
                .strides(&[1])
                .byte_offset(1),
            ok(4, Both, (0, 16), &[1]),
        ),
        (
            case("a size-0 tensor's address is never checked (nothing is read)")
                .shape(&[0])
                .strides(&[1])
                .data(at(usize::MAX - 8)),
            ok(0, Both, (0, 0), &[1]),
        ),
        (
            case("unknown device type: data is an opaque handle")
                .shape(&[4])
                .strides(&[1])
                .data(at(usize::MAX - 8))
                .device(Device::new(DeviceType(99), 0)),
            ok(4, Both, (0, 16), &[1]),
        ),
        (
            case("CUDA managed memory is host-accessible: address checked")
                .shape(&[4])
                .strides(&[1])
                .data(at(usize::MAX - 8))
                .device(Device::cuda_managed()),
            err(range(usize::MAX - 8, 0, 0, 16)),
        ),
    ]
}
