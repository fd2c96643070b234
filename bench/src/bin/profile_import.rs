//! A loop of imports for profilers (`valgrind --tool=callgrind`).
use dlport_core::abi::{DLManagedTensorVersioned, DLTensor};
use dlport_core::{DLPackVersion, DataType, Device, ManagedTensor};

unsafe extern "C" fn nop(_: *mut DLManagedTensorVersioned) {}

fn main() {
    let mut shape = [2i64, 3, 4, 5];
    let mut strides = [60i64, 20, 5, 1];
    let mut data = vec![1.0f32; 120];
    let mut m = DLManagedTensorVersioned {
        version: DLPackVersion::new(1, 3),
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(nop),
        flags: 0,
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: Device::cpu(),
            ndim: 4,
            dtype: DataType::FLOAT32,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        },
    };
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let mut acc = 0usize;
    for _ in 0..n {
        // SAFETY: the struct outlives the loop; the deleter does nothing.
        let t = unsafe { ManagedTensor::from_raw_versioned(std::hint::black_box(&mut m)) }.unwrap();
        acc += t.view().shape().len();
    }
    println!("{acc}");
}
