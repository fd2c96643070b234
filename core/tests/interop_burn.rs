//! The burn adapter against the real crate (burn-std, whose `TensorData` burn re-exports):
//! exports of the data's own bytes, imports in place where burn can read the memory as it is
//! and one copy otherwise, every dtype both ways, and the errors.
#![cfg(feature = "burn")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn_std::{AllocationProperty, BoolStore, DType, TensorData};
use dlport_core::backend::Access;
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor};
use dlport_testkit::xpu::counted_export;

#[test]
fn every_dtype_both_ways() {
    fn both_ways<E: burn_std::Element + PartialEq + std::fmt::Debug>(
        values: Vec<E>,
        burn: DType,
        dlpack: DataType,
    ) {
        let data = TensorData::new(values.clone(), [values.len()]);
        assert_eq!(data.dtype(), burn);
        let t = ManagedTensor::try_from(data).unwrap();
        assert_eq!(t.view().dtype(), dlpack, "{burn:?}");
        // A copy, and the data in place: the same elements and dtype.
        let copied = t.view().to_burn().unwrap();
        let moved = t.into_burn().unwrap();
        for back in [copied, moved] {
            assert_eq!(back.dtype(), burn);
            assert_eq!(back.as_slice::<E>().unwrap(), values, "{burn:?}");
        }
    }
    use half::{bf16, f16};
    both_ways(vec![1.5f64, -2.0], DType::F64, DataType::FLOAT64);
    both_ways(vec![1.5f32, -2.0], DType::F32, DataType::FLOAT32);
    both_ways(vec![f16::ONE, f16::NEG_ONE], DType::F16, DataType::FLOAT16);
    both_ways(vec![bf16::ONE, bf16::MAX], DType::BF16, DataType::BFLOAT16);
    both_ways(vec![i64::MIN, 3], DType::I64, DataType::INT64);
    both_ways(vec![i32::MIN, 3], DType::I32, DataType::INT32);
    both_ways(vec![i16::MIN, 3], DType::I16, DataType::INT16);
    both_ways(vec![i8::MIN, 3], DType::I8, DataType::INT8);
    both_ways(vec![u64::MAX, 3], DType::U64, DataType::UINT64);
    both_ways(vec![u32::MAX, 3], DType::U32, DataType::UINT32);
    both_ways(vec![u16::MAX, 3], DType::U16, DataType::UINT16);
    both_ways(vec![u8::MAX, 3], DType::U8, DataType::UINT8);
    both_ways(
        vec![true, false, true],
        DType::Bool(BoolStore::Native),
        DataType::BOOL,
    );
    // flex32 is stored as f32 bits: it leaves as float32 and comes back as f32.
    let flex = TensorData::from_bytes_vec(
        [1.5f32, 2.5].iter().flat_map(|v| v.to_ne_bytes()).collect(),
        [2],
        DType::Flex32,
    );
    let t = ManagedTensor::try_from(flex).unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), [1.5, 2.5]);
    assert_eq!(t.into_burn().unwrap().dtype(), DType::F32);
    // A bool stored as u8 is DLPack's bool byte too.
    let t = ManagedTensor::try_from(TensorData::from_bytes_vec(
        vec![1, 0],
        [2],
        DType::Bool(BoolStore::U8),
    ))
    .unwrap();
    assert_eq!(t.view().dtype(), DataType::BOOL);
}

#[test]
fn exports_point_at_the_data_and_say_who_else_reads_it() {
    let data = TensorData::new((0..6).map(|v| v as f32).collect::<Vec<_>>(), [2, 3]);
    let address = data.as_bytes().as_ptr() as usize;
    let mut t = ManagedTensor::try_from(data).unwrap();
    assert_eq!(t.view().first_element_address(), Some(address), "no copy");
    assert_eq!(t.view().shape(), [2, 3]);
    assert_eq!(t.view().raw_strides(), Some(&[3i64, 1][..]));
    // Owned alone: the consumer may write, and burn sees the write.
    assert_eq!(t.access(), Access::Exclusive);
    t.as_mut_slice::<f32>().unwrap()[0] = 10.0;
    let back = t.into_burn().unwrap();
    assert_eq!(back.as_slice::<f32>().unwrap()[0], 10.0);

    // Shared bytes (burn copies them before a write) export READ_ONLY.
    let shared = TensorData::new(vec![1u32, 2, 3], [3]).into_bytes().shared();
    let keep = shared.clone();
    let t = ManagedTensor::try_from(TensorData::from_bytes(shared, [3], DType::U32)).unwrap();
    assert!(t.is_read_only());
    assert_eq!(t.access(), Access::ReadOnly);
    assert_eq!(
        t.view().first_element_address(),
        Some(keep.as_ptr() as usize)
    );
    assert_eq!(t.as_slice::<u32>().unwrap(), [1, 2, 3]);
}

#[test]
fn imports_share_the_memory_until_burn_writes() {
    // The DLPack tensor's memory, read in place; its deleter runs once, when burn drops the
    // last handle.
    let freed = Arc::new(AtomicUsize::new(0));
    let t = counted_export(&freed, Device::cpu());
    let address = t.view().first_element_address();
    let mut data = t.into_burn().unwrap();
    assert_eq!(Some(data.as_bytes().as_ptr() as usize), address);
    assert_eq!(data.bytes().property(), AllocationProperty::Other);
    let clone = data.clone();
    assert_eq!(data.as_slice::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(freed.load(Ordering::SeqCst), 0);
    // A write goes to burn's own copy: the clone still reads the producer's memory.
    data.as_mut_slice::<f32>().unwrap()[0] = 9.0;
    assert_ne!(Some(data.as_bytes().as_ptr() as usize), address);
    assert_eq!(clone.as_slice::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(data.as_slice::<f32>().unwrap(), [9.0, 2.0, 3.0, 4.0]);
    drop(data);
    assert_eq!(freed.load(Ordering::SeqCst), 0, "the clone still holds it");
    drop(clone);
    assert_eq!(freed.load(Ordering::SeqCst), 1);

    // Pinned host memory stays in place and is marked pinned for burn's GPU backends.
    let freed = Arc::new(AtomicUsize::new(0));
    let t = counted_export(&freed, Device::cuda_host());
    let address = t.view().first_element_address();
    let data = t.into_burn().unwrap();
    assert_eq!(Some(data.as_bytes().as_ptr() as usize), address);
    assert_eq!(data.bytes().property(), AllocationProperty::Pinned);
    drop(data);
    assert_eq!(freed.load(Ordering::SeqCst), 1);
}

#[test]
fn other_layouts_copy_once_into_compact_data() {
    // Transposed (strides (1, 2)) and flipped (a negative stride): compact copies.
    let t = ExportBuilder::from_vec(vec![1i32, 4, 2, 5, 3, 6], &[2, 3])
        .strides(&[1, 2])
        .build()
        .unwrap();
    let data = t.into_burn().unwrap();
    assert_eq!(data.shape().as_slice(), [2, 3]);
    assert_eq!(data.as_slice::<i32>().unwrap(), [1, 2, 3, 4, 5, 6]);
    let t = ExportBuilder::from_vec(vec![1u8, 2, 3], &[3])
        .strides(&[-1])
        .byte_offset(2)
        .build()
        .unwrap();
    assert_eq!(t.into_burn().unwrap().as_slice::<u8>().unwrap(), [3, 2, 1]);
    // Broadcast (a zero stride): every element, from one.
    let t = ExportBuilder::from_vec(vec![7u16], &[4])
        .strides(&[0])
        .build()
        .unwrap();
    assert_eq!(t.into_burn().unwrap().as_slice::<u16>().unwrap(), [7; 4]);
    // Misaligned for its type (one byte into a buffer): burn could not read it as f32s in
    // place, so it is copied into aligned bytes.
    let mut raw = vec![0u8; 9];
    raw[1..5].copy_from_slice(&1.5f32.to_ne_bytes());
    raw[5..9].copy_from_slice(&2.5f32.to_ne_bytes());
    let t = ExportBuilder::new(raw, DataType::FLOAT32, &[2])
        .byte_offset(1)
        .build()
        .unwrap();
    assert_eq!(
        t.into_burn().unwrap().as_slice::<f32>().unwrap(),
        [1.5, 2.5]
    );
    // Empty and zero-dimensional tensors.
    let t = ExportBuilder::from_vec(Vec::<f32>::new(), &[0, 3])
        .build()
        .unwrap();
    let data = t.into_burn().unwrap();
    assert_eq!(
        (data.shape().as_slice(), data.num_elements()),
        (&[0usize, 3][..], 0)
    );
    let t = ExportBuilder::from_vec(vec![5i64], &[]).build().unwrap();
    assert_eq!(t.into_burn().unwrap().as_slice::<i64>().unwrap(), [5]);
}

#[test]
fn errors_name_the_dtype_and_the_device() {
    // burn has no complex type: refused, naming the dtype and burn.
    let t = ExportBuilder::new(vec![0u8; 8], DataType::COMPLEX64, &[1])
        .build()
        .unwrap();
    let e = t.view().to_burn().unwrap_err();
    assert_eq!(e.code(), 44, "{e}");
    assert!(
        e.to_string().contains("complex64") && e.to_string().contains("burn"),
        "{e}"
    );
    assert_eq!(t.into_burn().unwrap_err().code(), 44);
    // Device memory the host cannot read; the tensor's deleter runs once all the same.
    let freed = Arc::new(AtomicUsize::new(0));
    let t = counted_export(&freed, Device::cuda(0));
    assert_eq!(t.view().to_burn().unwrap_err().code(), 16);
    assert_eq!(t.into_burn().unwrap_err().code(), 16);
    assert_eq!(freed.load(Ordering::SeqCst), 1);
    // Exports DLPack cannot type: a bool stored as u32, quantized data.
    let u32_bool = TensorData::from_bytes_vec(vec![0; 8], [2], DType::Bool(BoolStore::U32));
    let e = ManagedTensor::try_from(u32_bool).unwrap_err();
    assert_eq!(e.code(), 44, "{e}");
    assert!(
        e.to_string().contains("burn TensorData dtype") && e.to_string().contains("U32"),
        "{e}"
    );
    let scheme = burn_std::QuantScheme::default();
    let quantized = TensorData::quantized(vec![1i8, 2, 3, 4], [4], scheme, &[0.5], None);
    let e = ManagedTensor::try_from(quantized).unwrap_err();
    assert!(e.to_string().contains("QFloat"), "{e}");
}

#[test]
fn bool_bytes_other_than_0_and_1_are_normalised_at_import() {
    use dlport_core::dtype::Bool8;
    // DLPack's bool is a byte, any non-zero value true; burn reads Rust bools (0 or 1 only).
    let bytes = || [0u8, 1, 2, 255].map(Bool8).to_vec();
    let expect = [false, true, true, true];
    // In place where it could be: the copy normalises instead.
    let t = ExportBuilder::from_vec(bytes(), &[4]).build().unwrap();
    let address = t.view().first_element_address();
    let data = t.into_burn().unwrap();
    assert_eq!(data.dtype(), DType::Bool(BoolStore::Native));
    assert_eq!(data.as_bytes(), [0, 1, 1, 1]);
    assert_ne!(Some(data.as_bytes().as_ptr() as usize), address, "a copy");
    assert_eq!(data.iter::<bool>().collect::<Vec<_>>(), expect);
    // The copying route (strided), through the view.
    let t = ExportBuilder::from_vec(bytes(), &[2, 2])
        .strides(&[1, 2])
        .build()
        .unwrap();
    let data = t.view().to_burn().unwrap();
    assert_eq!(data.as_bytes(), [0, 1, 1, 1]);
    assert_eq!(
        data.iter::<bool>().collect::<Vec<_>>(),
        [false, true, true, true]
    );
    let data = t.into_burn().unwrap();
    assert_eq!(data.as_bytes(), [0, 1, 1, 1]);
    // Bytes of 0 and 1 are still read in place.
    let t = ExportBuilder::from_vec([1u8, 0, 1].map(Bool8).to_vec(), &[3])
        .build()
        .unwrap();
    let address = t.view().first_element_address();
    let data = t.into_burn().unwrap();
    assert_eq!(Some(data.as_bytes().as_ptr() as usize), address, "no copy");
    assert_eq!(data.iter::<bool>().collect::<Vec<_>>(), [true, false, true]);
}
