//! A `CudaSlice` becomes a `kDLCUDA` tensor of the same device memory.

use std::ffi::c_void;

use cudarc::driver::{CudaSlice, DevicePtrMut};
use dlport_core::backend::{Access, StreamRequest, TensorStorage};
use dlport_core::dtype::Element;
use dlport_core::error::DispatchError;
use dlport_core::{Device, Error, ExportBuilder, ManagedTensor};

use crate::cuda::NAME;

/// A `CudaSlice` owned by an export: the [`TensorStorage`] behind [`export_builder`]. Dropping
/// it (the export's deleter) drops the slice, which frees the memory on the slice's stream.
#[derive(Debug)]
pub struct CudaSliceStorage<T> {
    slice: CudaSlice<T>,
    ptr: u64,
    device: Device,
}

impl<T> CudaSliceStorage<T> {
    /// The slice back.
    pub fn into_inner(self) -> CudaSlice<T> {
        self.slice
    }
}

// SAFETY: `ptr` is the slice's device pointer, which does not change while the slice lives
// (the storage owns it, and moving a CudaSlice moves a handle, not memory); `num_bytes` bytes
// are allocated behind it on `device`, the slice's context's device; the export owns the slice
// alone (nobody else holds it), so the access is exclusive.
unsafe impl<T: Element> TensorStorage for CudaSliceStorage<T> {
    fn data_ptr(&mut self) -> *mut c_void {
        self.ptr as usize as *mut c_void
    }
    fn byte_len(&self) -> usize {
        self.slice.num_bytes()
    }
    fn device(&self) -> Device {
        self.device
    }
    fn access(&self) -> Access {
        Access::Exclusive
    }
}

/// The builder of a `kDLCUDA` tensor over `slice` with `shape` (compact row-major unless you
/// set strides; the builder checks they stay inside the slice). No stream hand-off: order the
/// slice's stream before the consumer's yourself, or use [`export`].
pub fn export_builder<T: Element>(
    mut slice: CudaSlice<T>,
    shape: &[i64],
) -> Result<ExportBuilder<CudaSliceStorage<T>>, Error> {
    let device_id = i32::try_from(slice.ordinal()).map_err(|_| {
        Error::Dispatch(DispatchError::InvalidDeviceId {
            backend: NAME,
            device_id: i32::MAX,
        })
    })?;
    let stream = slice.stream().clone();
    // Makes the slice's stream wait for every earlier use of the slice (cudarc's event
    // tracking), so ordering that stream before the consumer's orders all of them.
    let ptr = {
        let (ptr, _record) = slice.device_ptr_mut(&stream);
        ptr
    };
    let storage = CudaSliceStorage {
        slice,
        ptr,
        device: Device::cuda(device_id),
    };
    Ok(ExportBuilder::new(storage, T::DTYPE, shape))
}

/// Exports `slice` as a compact `kDLCUDA` tensor of `shape`, without a copy, after ordering
/// the slice's stream before the consumer's (`consumer` is what the consumer passed as
/// `stream` to `__dlpack__`, parsed by `StreamRequest::parse`; `NoSync` orders nothing). The
/// hand-off is the registry's, as every export's: `Registry::stream_hand_off` on the default
/// registry ([`install_or_default`](crate::install_or_default)), whose CUDA backend makes the
/// consumer's stream wait for the slice's.
///
/// Errors: a shape the slice does not hold (`LayoutError::StorageTooSmall`); a default
/// registry without a CUDA backend (`DispatchError::NoBackend`: another default was installed
/// first); the driver's errors from the hand-off (`BackendError::Failed`, naming the call).
pub fn export<T: Element>(
    slice: CudaSlice<T>,
    shape: &[i64],
    consumer: StreamRequest,
) -> Result<ManagedTensor, Error> {
    let producer = slice.stream().cu_stream() as usize;
    let builder = export_builder(slice, shape)?;
    let tensor = builder.build()?;
    // On error the export drops here: the slice is freed, never handed out.
    crate::install_or_default().stream_hand_off(
        tensor.view().device(),
        Some(producer),
        consumer,
    )?;
    Ok(tensor)
}
