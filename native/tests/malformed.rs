//! The malformed-input catalogue: every case goes through the Rust API and through the C ABI,
//! asserts the exact error (code and message), and checks that the producer's deleter ran
//! exactly once on each path.

use std::ffi::{CStr, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use dlport_core::{
    AccessError, AddressRange, ByteSpan, DLPackVersion, DataType, Device, DeviceType, Error,
    ExportBuilder, LayoutError, ManagedTensor, TypeCode,
};
use dlport_native::ffi::{
    DlportTensor, dlport_import, dlport_last_error, dlport_release, dlport_tensor_free,
};

/// A producer block: header, arrays and data, released by a counting deleter.
#[repr(C)]
struct Block<H> {
    header: H,
    shape: [i64; 8],
    strides: [i64; 8],
    data: [f32; 64],
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_v(p: *mut DLManagedTensorVersioned) {
    // SAFETY: a Box<Block<..>> built below, released once.
    let b = unsafe { Box::from_raw(p.cast::<Block<DLManagedTensorVersioned>>()) };
    b.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_l(p: *mut DLManagedTensor) {
    // SAFETY: as above.
    let b = unsafe { Box::from_raw(p.cast::<Block<DLManagedTensor>>()) };
    b.deleted.fetch_add(1, Ordering::SeqCst);
}

/// What a case changes in a valid 2×3 float32 CPU tensor (versioned 1.3 unless `legacy`).
#[derive(Clone, Copy)]
struct Tweak {
    version: Option<(u32, u32)>,
    flags: u64,
    ndim: Option<i32>,
    shape: Option<&'static [i64]>,
    strides: Option<&'static [i64]>,
    null_shape: bool,
    null_strides: bool,
    null_data: bool,
    data_addr: Option<usize>,
    dtype: Option<(u8, u8, u16)>,
    device: Option<(i32, i32)>,
    byte_offset: u64,
}

const BASE: Tweak = Tweak {
    version: Some((1, 3)),
    flags: 0,
    ndim: None,
    shape: None,
    strides: None,
    null_shape: false,
    null_strides: false,
    null_data: false,
    data_addr: None,
    dtype: None,
    device: None,
    byte_offset: 0,
};

fn tensor(t: &Tweak, shape: *mut i64, strides: *mut i64, data: *mut f32) -> DLTensor {
    let ndim = t.ndim.unwrap_or(t.shape.map_or(2, |s| s.len() as i32));
    DLTensor {
        data: if t.null_data {
            std::ptr::null_mut()
        } else {
            t.data_addr
                .map_or(data.cast(), std::ptr::without_provenance_mut)
        },
        device: t
            .device
            .map_or(Device::cpu(), |(ty, id)| Device::new(DeviceType(ty), id)),
        ndim,
        dtype: t.dtype.map_or(DataType::FLOAT32, |(c, b, l)| {
            DataType::new(TypeCode(c), b, l)
        }),
        shape: if t.null_shape {
            std::ptr::null_mut()
        } else {
            shape
        },
        strides: if t.null_strides {
            std::ptr::null_mut()
        } else {
            strides
        },
        byte_offset: t.byte_offset,
    }
}

fn fill(shape: &mut [i64; 8], strides: &mut [i64; 8], t: &Tweak) {
    let s = t.shape.unwrap_or(&[2, 3]);
    shape[..s.len()].copy_from_slice(s);
    let st = t.strides.unwrap_or(if t.shape.is_none() {
        &[3, 1]
    } else {
        &[1, 1, 1, 1, 1, 1, 1, 1][..s.len()]
    });
    strides[..st.len()].copy_from_slice(st);
}

/// A fresh producer tensor; returns the pointer, whether it is versioned, and its counter.
fn make(t: &Tweak) -> (*mut c_void, bool, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    match t.version {
        Some((major, minor)) => {
            let b = Box::into_raw(Box::new(Block {
                header: DLManagedTensorVersioned {
                    version: DLPackVersion::new(major, minor),
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(delete_v),
                    flags: t.flags,
                    dl_tensor: tensor(
                        &BASE,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    ),
                },
                shape: [1; 8],
                strides: [1; 8],
                data: [0.0; 64],
                deleted: Arc::clone(&deleted),
            }));
            // SAFETY: a fresh block, exclusively ours until handed over.
            unsafe {
                fill(&mut (*b).shape, &mut (*b).strides, t);
                let (sh, st, d) = (
                    std::ptr::addr_of_mut!((*b).shape).cast(),
                    std::ptr::addr_of_mut!((*b).strides).cast(),
                    std::ptr::addr_of_mut!((*b).data).cast(),
                );
                (*b).header.dl_tensor = tensor(t, sh, st, d);
            }
            (b.cast(), true, deleted)
        }
        None => {
            let b = Box::into_raw(Box::new(Block {
                header: DLManagedTensor {
                    dl_tensor: tensor(
                        &BASE,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    ),
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(delete_l),
                },
                shape: [1; 8],
                strides: [1; 8],
                data: [0.0; 64],
                deleted: Arc::clone(&deleted),
            }));
            // SAFETY: as above.
            unsafe {
                fill(&mut (*b).shape, &mut (*b).strides, t);
                let (sh, st, d) = (
                    std::ptr::addr_of_mut!((*b).shape).cast(),
                    std::ptr::addr_of_mut!((*b).strides).cast(),
                    std::ptr::addr_of_mut!((*b).data).cast(),
                );
                (*b).header.dl_tensor = tensor(t, sh, st, d);
            }
            (b.cast(), false, deleted)
        }
    }
}

fn v(a: u32, b: u32) -> DLPackVersion {
    DLPackVersion::new(a, b)
}

macro_rules! tw {
    ($($field:ident : $value:expr),* $(,)?) => { Tweak { $($field: $value,)* ..BASE } };
}

fn catalogue() -> Vec<(&'static str, Tweak, Error)> {
    let f4 = |bits, lanes| DataType::new(TypeCode::FLOAT4_E2M1FN, bits, lanes);
    vec![
        // ── the guarantees issue's classes that validation decides ──
        (
            "byte_offset = 2^63: the first byte is past user space",
            tw!(data_addr: Some(0x10_0000), byte_offset: 1 << 63),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(0x10_0000, 1 << 63, ByteSpan { lo: 0, hi: 24 }),
            }),
        ),
        (
            "the last byte at the end of user space",
            tw!(data_addr: Some(dlport_core::layout::USER_ADDRESS_END as usize - 16)),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(
                    dlport_core::layout::USER_ADDRESS_END as usize - 16,
                    0,
                    ByteSpan { lo: 0, hi: 24 },
                ),
            }),
        ),
        (
            "a span overflow in bytes is blamed on axis 0, which reaches farthest",
            tw!(strides: Some(&[1 << 62, 1])),
            Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: 1 << 62,
            }),
        ),
        (
            "float with 7 bits",
            tw!(dtype: Some((2, 7, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(2), 7, 1),
                expected: "16, 32 or 64 (8-bit floats use the float8 type codes)",
            }),
        ),
        (
            "float with 33 bits",
            tw!(dtype: Some((2, 33, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(2), 33, 1),
                expected: "16, 32 or 64 (8-bit floats use the float8 type codes)",
            }),
        ),
        (
            "float with 128 bits",
            tw!(dtype: Some((2, 128, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(2), 128, 1),
                expected: "16, 32 or 64 (8-bit floats use the float8 type codes)",
            }),
        ),
        (
            "uint with 24 bits",
            tw!(dtype: Some((1, 24, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(1), 24, 1),
                expected: "1 to 8, 16, 32 or 64",
            }),
        ),
        (
            "bcomplex with 64 bits",
            tw!(dtype: Some((18, 64, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(18), 64, 1),
                expected: "32",
            }),
        ),
        (
            "NULL data with a non-zero size",
            tw!(null_data: true),
            Error::Layout(LayoutError::NullData { numel: 6 }),
        ),
        (
            "NULL data, CUDA device",
            tw!(null_data: true, device: Some((2, 0))),
            Error::Layout(LayoutError::NullData { numel: 6 }),
        ),
        (
            "NULL data, unknown device type",
            tw!(null_data: true, device: Some((99, 0))),
            Error::Layout(LayoutError::NullData { numel: 6 }),
        ),
        (
            "NULL shape, ndim 2",
            tw!(null_shape: true),
            Error::Layout(LayoutError::NullShape { ndim: 2 }),
        ),
        (
            "NULL shape, ndim 7",
            tw!(null_shape: true, ndim: Some(7)),
            Error::Layout(LayoutError::NullShape { ndim: 7 }),
        ),
        (
            "ndim -1",
            tw!(ndim: Some(-1)),
            Error::Layout(LayoutError::NdimOutOfRange { ndim: -1 }),
        ),
        (
            "ndim 10^6",
            tw!(ndim: Some(1_000_000)),
            Error::Layout(LayoutError::NdimOutOfRange { ndim: 1_000_000 }),
        ),
        (
            "ndim 65",
            tw!(ndim: Some(65)),
            Error::Layout(LayoutError::NdimOutOfRange { ndim: 65 }),
        ),
        (
            "ndim i32::MIN",
            tw!(ndim: Some(i32::MIN)),
            Error::Layout(LayoutError::NdimOutOfRange {
                ndim: i64::from(i32::MIN),
            }),
        ),
        (
            "shape product overflows u64",
            tw!(shape: Some(&[1 << 32, 1 << 32])),
            Error::Layout(LayoutError::ElementCountOverflow {
                axis: 1,
                extent: 1 << 32,
            }),
        ),
        (
            "shape product overflows i64",
            tw!(shape: Some(&[1 << 61, 4])),
            Error::Layout(LayoutError::ElementCountOverflow { axis: 1, extent: 4 }),
        ),
        (
            "shape product overflows usize",
            tw!(shape: Some(&[i64::MAX, 2])),
            Error::Layout(LayoutError::ElementCountOverflow { axis: 1, extent: 2 }),
        ),
        (
            "negative extent",
            tw!(shape: Some(&[-1])),
            Error::Layout(LayoutError::NegativeExtent {
                axis: 0,
                extent: -1,
            }),
        ),
        (
            "negative extent on a later axis",
            tw!(shape: Some(&[3, 4, -2])),
            Error::Layout(LayoutError::NegativeExtent {
                axis: 2,
                extent: -2,
            }),
        ),
        (
            "i64::MIN extent",
            tw!(shape: Some(&[i64::MIN])),
            Error::Layout(LayoutError::NegativeExtent {
                axis: 0,
                extent: i64::MIN,
            }),
        ),
        (
            "stride × extent overflows",
            tw!(shape: Some(&[3]), strides: Some(&[i64::MAX])),
            Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 3,
                stride: i64::MAX,
            }),
        ),
        (
            "i64::MIN stride",
            tw!(shape: Some(&[2]), strides: Some(&[i64::MIN])),
            Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MIN,
            }),
        ),
        (
            "span in bytes overflows",
            tw!(shape: Some(&[2]), strides: Some(&[i64::MAX / 2])),
            Error::Layout(LayoutError::SpanOverflow {
                axis: 0,
                extent: 2,
                stride: i64::MAX / 2,
            }),
        ),
        (
            "strides reach past the address space",
            tw!(shape: Some(&[4]), strides: Some(&[1]), data_addr: Some(usize::MAX - 8)),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(usize::MAX - 8, 0, ByteSpan { lo: 0, hi: 16 }),
            }),
        ),
        (
            "strides reach below address 0",
            tw!(shape: Some(&[8]), strides: Some(&[-1]), data_addr: Some(16)),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(16, 0, ByteSpan { lo: -28, hi: 4 }),
            }),
        ),
        (
            "huge negative stride",
            tw!(shape: Some(&[2]), strides: Some(&[-(1 << 40)]), data_addr: Some(4096)),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(
                    4096,
                    0,
                    ByteSpan {
                        lo: -(1 << 42),
                        hi: 4,
                    },
                ),
            }),
        ),
        (
            "byte_offset u64::MAX",
            tw!(byte_offset: u64::MAX, data_addr: Some(64)),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(64, u64::MAX, ByteSpan { lo: 0, hi: 24 }),
            }),
        ),
        (
            "data + byte_offset overflows",
            tw!(byte_offset: 1 << 63, data_addr: Some(1 << 63)),
            Error::Layout(LayoutError::AddressOverflow {
                range: AddressRange::new(1 << 63, 1 << 63, ByteSpan { lo: 0, hi: 24 }),
            }),
        ),
        (
            "version 0.8",
            tw!(version: Some((0, 8))),
            Error::Layout(LayoutError::UnsupportedVersion { version: v(0, 8) }),
        ),
        (
            "version 0.0",
            tw!(version: Some((0, 0))),
            Error::Layout(LayoutError::UnsupportedVersion { version: v(0, 0) }),
        ),
        (
            "version 2.0",
            tw!(version: Some((2, 0))),
            Error::Layout(LayoutError::UnsupportedVersion { version: v(2, 0) }),
        ),
        (
            "version 3.1",
            tw!(version: Some((3, 1))),
            Error::Layout(LayoutError::UnsupportedVersion { version: v(3, 1) }),
        ),
        (
            "version u32::MAX.0",
            tw!(version: Some((u32::MAX, 0))),
            Error::Layout(LayoutError::UnsupportedVersion {
                version: v(u32::MAX, 0),
            }),
        ),
        (
            "version 2.0 with garbage after the header",
            tw!(version: Some((2, 0)), ndim: Some(i32::MAX), null_shape: true),
            Error::Layout(LayoutError::UnsupportedVersion { version: v(2, 0) }),
        ),
        (
            "undefined flag bit 3",
            tw!(flags: 1 << 3),
            Error::Layout(LayoutError::UnknownFlags { flags: 1 << 3 }),
        ),
        (
            "undefined flag bit 63",
            tw!(flags: 1 << 63 | 1),
            Error::Layout(LayoutError::UnknownFlags { flags: 1 << 63 | 1 }),
        ),
        (
            "NULL strides at 1.2",
            tw!(version: Some((1, 2)), null_strides: true),
            Error::Layout(LayoutError::NullStrides {
                ndim: 2,
                version: v(1, 2),
            }),
        ),
        (
            "NULL strides at 1.3, ndim 3",
            tw!(null_strides: true, shape: Some(&[1, 2, 3])),
            Error::Layout(LayoutError::NullStrides {
                ndim: 3,
                version: v(1, 3),
            }),
        ),
        (
            "unknown dtype code 19",
            tw!(dtype: Some((19, 8, 1))),
            Error::Layout(LayoutError::UnknownTypeCode { code: TypeCode(19) }),
        ),
        (
            "unknown dtype code 255",
            tw!(dtype: Some((255, 32, 1))),
            Error::Layout(LayoutError::UnknownTypeCode {
                code: TypeCode(255),
            }),
        ),
        (
            "fp4 with 8 bits",
            tw!(dtype: Some((17, 8, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: f4(8, 1),
                expected: "4",
            }),
        ),
        (
            "fp4 with 0 bits",
            tw!(dtype: Some((17, 0, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: f4(0, 1),
                expected: "4",
            }),
        ),
        (
            "fp6 with 8 bits",
            tw!(dtype: Some((15, 8, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(15), 8, 1),
                expected: "6",
            }),
        ),
        (
            "fp8 with 16 bits",
            tw!(dtype: Some((10, 16, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(10), 16, 1),
                expected: "8",
            }),
        ),
        (
            "bool with 16 bits",
            tw!(dtype: Some((6, 16, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(6), 16, 1),
                expected: "8",
            }),
        ),
        (
            "bfloat with 32 bits",
            tw!(dtype: Some((4, 32, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(4), 32, 1),
                expected: "16",
            }),
        ),
        (
            "complex with 8 bits",
            tw!(dtype: Some((5, 8, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(5), 8, 1),
                expected: "32, 64 or 128",
            }),
        ),
        (
            "int with 0 bits",
            tw!(dtype: Some((0, 0, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(0), 0, 1),
                expected: "1 to 8, 16, 32 or 64",
            }),
        ),
        (
            "handle with 12 bits",
            tw!(dtype: Some((3, 12, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: DataType::new(TypeCode(3), 12, 1),
                expected: "a non-zero multiple of 8",
            }),
        ),
        (
            "lanes 0",
            tw!(dtype: Some((2, 32, 0))),
            Error::Layout(LayoutError::InvalidLanes {
                dtype: DataType::new(TypeCode(2), 32, 0),
                reason: "lanes must be at least 1",
            }),
        ),
        (
            "fp4 lanes 3",
            tw!(dtype: Some((17, 4, 3))),
            Error::Layout(LayoutError::InvalidLanes {
                dtype: f4(4, 3),
                reason: "sub-byte types take lanes = 1 (fp4 also takes 2, PyTorch's _x2)",
            }),
        ),
        (
            "fp6 lanes 2",
            tw!(dtype: Some((16, 6, 2))),
            Error::Layout(LayoutError::InvalidLanes {
                dtype: DataType::new(TypeCode(16), 6, 2),
                reason: "sub-byte types take lanes = 1 (fp4 also takes 2, PyTorch's _x2)",
            }),
        ),
        (
            "int4 lanes 4",
            tw!(dtype: Some((0, 4, 4))),
            Error::Layout(LayoutError::InvalidLanes {
                dtype: DataType::new(TypeCode(0), 4, 4),
                reason: "sub-byte types take lanes = 1 (fp4 also takes 2, PyTorch's _x2)",
            }),
        ),
        (
            "legacy: NULL shape",
            tw!(version: None, null_shape: true),
            Error::Layout(LayoutError::NullShape { ndim: 2 }),
        ),
        (
            "legacy: negative ndim",
            tw!(version: None, ndim: Some(-5)),
            Error::Layout(LayoutError::NdimOutOfRange { ndim: -5 }),
        ),
        (
            "legacy: NULL data",
            tw!(version: None, null_data: true),
            Error::Layout(LayoutError::NullData { numel: 6 }),
        ),
        (
            "legacy: fp4 with 8 bits",
            tw!(version: None, dtype: Some((17, 8, 1))),
            Error::Layout(LayoutError::InvalidBits {
                dtype: f4(8, 1),
                expected: "4",
            }),
        ),
        (
            "legacy: unknown dtype",
            tw!(version: None, dtype: Some((77, 8, 1))),
            Error::Layout(LayoutError::UnknownTypeCode { code: TypeCode(77) }),
        ),
        (
            "legacy: negative extent",
            tw!(version: None, shape: Some(&[5, -5])),
            Error::Layout(LayoutError::NegativeExtent {
                axis: 1,
                extent: -5,
            }),
        ),
    ]
}

/// The C ABI keeps its last error per thread; tests run in parallel threads, which is fine.
static C_LOCK: Mutex<()> = Mutex::new(());

#[test]
fn every_malformed_tensor_is_refused_with_the_exact_error_on_both_paths() {
    let cases = catalogue();
    assert!(cases.len() >= 50, "the catalogue has {} cases", cases.len());
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    for (name, tweak, expected) in cases {
        // Rust API.
        let (ptr, versioned, deleted) = make(&tweak);
        // SAFETY: a fresh producer tensor handed over once; its arrays hold 8 values and
        // nothing reads data before validation succeeds (it never does here).
        let got = unsafe {
            if versioned {
                ManagedTensor::from_raw_versioned(ptr.cast())
            } else {
                ManagedTensor::from_raw_legacy(ptr.cast())
            }
        };
        assert_eq!(got.err().as_ref(), Some(&expected), "Rust API: {name}");
        assert_eq!(
            deleted.load(Ordering::SeqCst),
            1,
            "Rust API released once: {name}"
        );

        // C ABI.
        let (ptr, versioned, deleted) = make(&tweak);
        let mut out: *mut DlportTensor = std::ptr::null_mut();
        // SAFETY: as above; `out` is writable.
        let status =
            unsafe { dlport_import(ptr, c_int::from(versioned), std::ptr::null(), &mut out) };
        assert_eq!(status, expected.code() as c_int, "C ABI code: {name}");
        // SAFETY: a status other than 0 leaves a message for this thread.
        let message = unsafe { CStr::from_ptr(dlport_last_error()) }
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(message, expected.to_string(), "C ABI message: {name}");
        assert!(out.is_null(), "no tensor on error: {name}");
        assert_eq!(
            deleted.load(Ordering::SeqCst),
            1,
            "C ABI released once: {name}"
        );
    }
}

#[test]
fn null_managed_pointers() {
    // SAFETY: NULL is allowed.
    let v = unsafe { ManagedTensor::from_raw_versioned(std::ptr::null_mut()) };
    assert_eq!(
        v.unwrap_err(),
        Error::Layout(LayoutError::NullManagedTensor)
    );
    // SAFETY: NULL is allowed.
    let l = unsafe { ManagedTensor::from_raw_legacy(std::ptr::null_mut()) };
    assert_eq!(
        l.unwrap_err(),
        Error::Layout(LayoutError::NullManagedTensor)
    );
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut out: *mut DlportTensor = std::ptr::null_mut();
    // SAFETY: NULL input is allowed; `out` is writable.
    let status = unsafe { dlport_import(std::ptr::null_mut(), 1, std::ptr::null(), &mut out) };
    assert_eq!(status, 1);
}

#[test]
fn a_null_deleter_is_legal() {
    let mut shape = [3i64];
    let mut strides = [1i64];
    let mut data = [1.0f32, 2.0, 3.0];
    let mut m = DLManagedTensorVersioned {
        version: v(1, 3),
        manager_ctx: std::ptr::null_mut(),
        deleter: None,
        flags: 0,
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: Device::cpu(),
            ndim: 1,
            dtype: DataType::FLOAT32,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        },
    };
    // SAFETY: everything lives on this frame longer than the import.
    let t = unsafe { ManagedTensor::from_raw_versioned(&mut m) }.unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
    drop(t);
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: as above; the C path also accepts a NULL deleter.
    let status = unsafe { dlport_release((&mut m as *mut DLManagedTensorVersioned).cast(), 1) };
    assert_eq!(status, 0);
}

#[test]
fn typed_access_refusals() {
    let odd = ExportBuilder::from_vec(vec![0f32; 8], &[7])
        .byte_offset(1)
        .build()
        .unwrap();
    let addr = odd.view().first_element_address().unwrap();
    assert_eq!(
        odd.as_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::Misaligned {
            address: addr,
            required: 4
        })
    );
    assert_eq!(
        odd.as_slice::<u32>().unwrap_err(),
        Error::Access(AccessError::DtypeMismatch {
            requested: DataType::UINT32,
            actual: DataType::FLOAT32
        })
    );
    let mut ro = ExportBuilder::from_vec(vec![0f32; 8], &[8])
        .read_only(true)
        .build()
        .unwrap();
    assert_eq!(
        ro.as_mut_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::ReadOnly)
    );
    let strided = ExportBuilder::from_vec(vec![0f32; 8], &[4])
        .strides(&[2])
        .build()
        .unwrap();
    assert_eq!(
        strided.as_slice::<f32>().unwrap_err(),
        Error::Access(AccessError::NotContiguous {
            contiguity: dlport_core::Contiguity::Strided
        })
    );
}

#[test]
fn a_double_release_through_the_c_abi_is_detected_for_dlport_exports() {
    use dlport_native::ffi::{dlport_convert, dlport_export_counts};
    let _c = C_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let (ptr, versioned, deleted) = make(&BASE);
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a fresh producer tensor, handed over; `out` writable.
    let status = unsafe { dlport_convert(ptr, c_int::from(versioned), 0, &mut out) };
    assert_eq!(status, 0);
    let (mut e0, mut r0) = (0u64, 0u64);
    // SAFETY: writable.
    unsafe { dlport_export_counts(&mut e0, &mut r0) };
    // SAFETY: our export, released once…
    assert_eq!(unsafe { dlport_release(out, 0) }, 0);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    // …and a buggy second release is refused instead of running the deleter again.
    // SAFETY: the pointer is stale; dlport recognises it and does not dereference it.
    assert_eq!(unsafe { dlport_release(out, 0) }, -2);
    // SAFETY: the failed call left a message.
    let message = unsafe { CStr::from_ptr(dlport_last_error()) }
        .to_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("was already released"), "{message}");
    assert_eq!(deleted.load(Ordering::SeqCst), 1, "no second deleter call");
    let (mut e1, mut r1) = (0u64, 0u64);
    // SAFETY: writable.
    unsafe { dlport_export_counts(&mut e1, &mut r1) };
    assert_eq!(r1 - r0, 1);
    let _ = (
        e1,
        dlport_tensor_free as unsafe extern "C" fn(*mut DlportTensor),
    );
}
