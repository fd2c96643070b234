//! The DLPack conformance suite: the malformed-input table of `dlport-testkit` (one case per
//! rule, from dlpack.h 1.3, the array-API DLPack section and the behaviour of the main
//! producers, each with its exact outcome) driven through the Rust API, plus the operations
//! that reach the other errors.
//!
//! Every case is produced as a heap managed tensor with a counting deleter and goes through both
//! unsafe entry points: `ManagedTensor::from_raw_*` (the tensor is handed over) and
//! `TensorRef::from_raw` (the producer keeps it). dlport-native's `malformed` test drives the
//! same table through the C ABI. The last tests check that every `Error` variant is reached and
//! that messages name the field and the value.

use std::collections::BTreeSet;
use std::ffi::c_void;

use dlport_core::abi::{DLManagedTensorVersioned, DeviceType, TypeCode};
use dlport_core::error::{
    AccessError, Address, AddressRange, BackendError, BackendNames, CopyReason, DispatchError,
    Driver, Flag, LayoutError, NameKind, OptionRule, ShortStr, StreamReason,
};
use dlport_core::internal::{self, RawFields};
use dlport_core::layout::ByteSpan;
use dlport_core::{DataType, Device, Error, ExportBuilder, ManagedTensor, TensorRef};
use dlport_testkit::malformed::{self, Case, Outcome, v};

/// What one entry point made of a case, and anything wrong with how it released the tensor.
struct Run {
    got: Result<Outcome, Error>,
    release: Option<String>,
}

/// `TensorRef::from_raw`: the borrowed entry point, given the producer's `DLTensor` with the
/// header's version and flags. The producer keeps the tensor and releases it afterwards.
fn through_tensor_ref(case: &Case) -> Run {
    let produced = case.produce();
    let deleted = produced.deleted();
    // SAFETY: the DLTensor lives in `produced` for this call; its shape and strides arrays are
    // NULL or hold every value an `ndim` up to 65 claims (a larger or negative `ndim` is
    // refused before any array is read: the rule under test); data is a buffer with 2 KiB on
    // either side, NULL or a raw address, and validation reads no data.
    let got = unsafe { TensorRef::from_raw(produced.dl_tensor(), case.version, case.flags) }
        .map(|view| Outcome::of(&view));
    let during = deleted.get();
    drop(produced);
    let after = deleted.get();
    let release = (during != 0 || after != 1).then(|| {
        format!("a borrowed view released the tensor {during} times; its producer then {after}")
    });
    Run { got, release }
}

/// `ManagedTensor::from_raw_versioned` / `from_raw_legacy`: the producer hands the tensor over;
/// a refusal releases it at once, an accepted tensor when it is dropped.
fn through_managed(case: &Case) -> Run {
    let produced = case.produce();
    let deleted = produced.deleted();
    let versioned = produced.is_versioned();
    let ptr = produced.hand_over();
    // SAFETY: a fresh producer tensor of the form `versioned` says, handed over once; its
    // header is readable, and its DLTensor meets `TensorRef::from_raw`'s contract as above.
    let got = unsafe {
        if versioned {
            ManagedTensor::from_raw_versioned(ptr.cast())
        } else {
            ManagedTensor::from_raw_legacy(ptr.cast())
        }
    };
    let mut problems = Vec::new();
    let got = got.map(|t| {
        if deleted.get() != 0 {
            problems.push("released while the ManagedTensor owns it".to_owned());
        }
        if (t.version(), t.flags()) != (case.version, case.flags) {
            problems.push(format!(
                "header read as {:?} / {:#x}",
                t.version(),
                t.flags()
            ));
        }
        Outcome::of(&t.view())
    });
    if deleted.get() != 1 {
        problems.push(format!("the deleter ran {} times, not once", deleted.get()));
    }
    Run {
        got,
        release: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

#[test]
fn conformance_table() {
    let table = malformed::table();
    let names: usize = table.iter().map(|(c, _)| c.names().count()).sum();
    println!(
        "the malformed-input table: {} cases under {names} names",
        table.len()
    );
    assert!(
        table.len() >= 100,
        "the table must cover at least 100 rules, has {}",
        table.len()
    );
    let mut failures = Vec::new();
    for (case, expect) in &table {
        for (path, run) in [
            ("ManagedTensor::from_raw", through_managed(case)),
            ("TensorRef::from_raw", through_tensor_ref(case)),
        ] {
            if !expect.matches(&run.got) {
                failures.push(format!(
                    "{} ({path}):\n    expected {:?}\n    got      {:?}\n    case     {case:?}",
                    case.rule, expect, run.got
                ));
            }
            if let Some(problem) = run.release {
                failures.push(format!("{} ({path}): {problem}", case.rule));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures over {} rules:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

/// The table is the two earlier catalogues merged (every name kept, exact duplicates listed
/// once under each of their names) plus the cases added since: no fewer cases, no two alike.
#[test]
fn the_table_keeps_every_case_of_both_catalogues() {
    let table = malformed::table();
    let names: usize = table.iter().map(|(c, _)| c.names().count()).sum();
    println!(
        "before: {} cases in two catalogues, {} distinct; after: {} distinct cases under {names} \
         names",
        malformed::NAMES_BEFORE,
        malformed::DISTINCT_BEFORE,
        table.len()
    );
    assert!(
        names >= malformed::NAMES_BEFORE,
        "{names} names, fewer than the {} of the two catalogues",
        malformed::NAMES_BEFORE
    );
    assert!(
        table.len() >= malformed::DISTINCT_BEFORE,
        "{} cases, fewer than the {} distinct ones the two catalogues had",
        table.len(),
        malformed::DISTINCT_BEFORE
    );
    let mut same = Vec::new();
    for (i, (a, ea)) in table.iter().enumerate() {
        for (b, eb) in &table[i + 1..] {
            if a.same_input(b) {
                let outcomes = if ea == eb {
                    ""
                } else {
                    " (different outcomes!)"
                };
                same.push(format!("{:?} and {:?}{outcomes}", a.rule, b.rule));
            }
        }
    }
    assert!(
        same.is_empty(),
        "cases with the same input (merge them with `Case::also`):\n{}",
        same.join("\n")
    );
}

/// Every error of the table, plus the ones that only other operations reach.
fn all_reached_errors() -> Vec<Error> {
    let mut errors: Vec<Error> = malformed::table()
        .iter()
        .filter_map(|(c, _)| through_managed(c).got.err())
        .collect();

    // The process-wide default registry is installed once: a second install is refused.
    let _ = dlport_core::Registry::process_default();
    errors.push(
        dlport_core::Registry::with_cpu()
            .install_default()
            .unwrap_err(),
    );

    // Pure validator: a strides array of the wrong length (impossible through a DLTensor).
    errors.push(
        internal::validate(&RawFields {
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
    // Export: untyped storage too small (in bytes), a typed vector too short (in elements).
    errors.push(
        ExportBuilder::new(vec![1.0f32; 6], DataType::FLOAT32, &[7])
            .build()
            .unwrap_err(),
    );
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
    unsafe impl dlport_core::backend::TensorStorage for DeviceBuf {
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
    use dlport_core::backend::{
        AlignedBuffer, Backend, CpuBackend, LayoutNeed, ViewRequirements, reconcile_device,
    };
    use dlport_core::{CopyPolicy, ImportOptions, Registry};
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
        errors.push(t.release_ownership(true, Device::cpu()).unwrap_err());
    }
    let released = t.release_ownership(true, Device::cpu()).unwrap();
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
    errors.push(dlport_core::backend::StreamRequest::parse(Some(0), DeviceType::CUDA).unwrap_err());
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
        errors.push(src.view().copy_to_compact(&mut dst).unwrap_err());
    }
    errors
}

/// Device memory of an extension device, id 3 (never dereferenced).
struct DeviceBuf2;
// SAFETY: the handle is never dereferenced by these tests.
unsafe impl dlport_core::backend::TensorStorage for DeviceBuf2 {
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
    // InvalidValue (41) and InvalidInput (44) are made only by dlport-native's readers of
    // outside data (sharing descriptors, Arrow streams and metadata);
    // native/tests/share_descriptor.rs, test_share.c and native/tests/arrow.rs reach them.
    let native_only = [41, 44];
    let all: BTreeSet<u32> = (1..=Error::CODE_COUNT)
        .filter(|c| !native_only.contains(c))
        .collect();
    let missing: Vec<_> = all.difference(&reached).collect();
    assert!(
        missing.is_empty(),
        "error codes never reached by a case: {missing:?}"
    );
}

/// A vector's length is counted in elements, as the caller gave it, on every typed entry
/// (`Tensor::from_vec`, `ExportBuilder::from_vec` with or without strides); untyped storage and
/// a byte offset keep bytes, the unit the caller used there.
#[test]
fn a_short_vector_is_counted_in_elements() {
    let too_short =
        |needed, available| Error::Layout(LayoutError::DataTooShort { needed, available });
    let err = dlport_core::Tensor::from_vec(vec![1.0f32; 4], &[2, 3]).unwrap_err();
    assert_eq!(err, too_short(6, 4));
    assert_eq!(
        err.to_string(),
        "the shape needs 6 elements, but the data has 4: give a shape whose extents multiply \
         to at most 4, or more data"
    );
    assert_eq!(err.code(), 43);
    let err = dlport_core::Tensor::from_vec(vec![0u16; 5], &[3, 2]).unwrap_err();
    assert_eq!(err, too_short(6, 5));
    let err = ExportBuilder::from_vec(vec![0u64; 4], &[2, 3])
        .build()
        .unwrap_err();
    assert_eq!(err, too_short(6, 4));
    // Column-major 2×3 with a padded column: the last element is at 1 + 2·4 = 9.
    let err = ExportBuilder::from_vec(vec![0f64; 9], &[2, 3])
        .strides(&[1, 4])
        .build_legacy()
        .unwrap_err();
    assert_eq!(err, too_short(10, 9));
    // A vector long enough is still accepted (and a longer one too: the shape may view a prefix).
    assert!(dlport_core::Tensor::from_vec(vec![1.0f32; 7], &[2, 3]).is_ok());
    // Bytes where the caller used bytes.
    let err = ExportBuilder::from_vec(vec![0f32; 6], &[6])
        .byte_offset(4)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        Error::Layout(LayoutError::StorageTooSmall {
            needed: 28,
            available: 24
        })
    );
    let err = ExportBuilder::new(vec![0f32; 4], DataType::FLOAT32, &[2, 3])
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        Error::Layout(LayoutError::StorageTooSmall {
            needed: 24,
            available: 16
        })
    );
}

/// A name that does not parse says what is accepted, for data types and devices.
#[test]
fn name_errors_say_what_is_accepted() {
    let msg = "float33x".parse::<DataType>().unwrap_err().to_string();
    assert!(
        msg.starts_with("data type name \"float33x\" is not recognised: "),
        "{msg}"
    );
    for accepted in [
        "float32",
        "bfloat16",
        "float8_e4m3fn",
        "float4_e2m1fn_x2",
        "dtype(code=",
    ] {
        assert!(msg.contains(accepted), "{msg:?} should name {accepted}");
        // Every example the message gives really parses (dtype(...) with its fields).
        let example = if accepted == "dtype(code=" {
            "dtype(code=2, bits=32, lanes=1)"
        } else {
            accepted
        };
        assert!(
            example.parse::<DataType>().is_ok(),
            "{example} should parse"
        );
    }
    for example in ["float32x4", "uint64", "complex64", "bool", "half", "double"] {
        assert!(msg.contains(example), "{msg:?} should name {example}");
        assert!(
            example.parse::<DataType>().is_ok(),
            "{example} should parse"
        );
    }
    let msg = "gpu:0".parse::<Device>().unwrap_err().to_string();
    assert!(
        msg.starts_with("device name \"gpu:0\" is not recognised: "),
        "{msg}"
    );
    for t in DeviceType::ALL_KNOWN {
        let name = t.short_name().unwrap();
        assert!(msg.contains(name), "{msg:?} should name {name}");
        assert!(format!("{name}:1").parse::<Device>().is_ok());
    }
    assert!(
        msg.contains("device_type(N)") && msg.contains("cuda:1"),
        "{msg}"
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
                    address: Address::new(0xffff_ffff_0000_0041_u64 as usize),
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
            Error::Dispatch(DispatchError::CopyRequired {
                reason: CopyReason::Writable,
            }),
            "a copy would be needed, but the copy policy is Never: the tensor has READ_ONLY, and \
             the target may write the memory it holds; allow a copy",
        ),
        (
            Error::Dispatch(DispatchError::CopyRequired {
                reason: CopyReason::Packed,
            }),
            "a copy would be needed, but the copy policy is Never: the tensor has \
             IS_SUBBYTE_TYPE_PADDED (one element a byte), and the target reads sub-byte elements \
             packed; allow a copy",
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
