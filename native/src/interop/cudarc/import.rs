//! A compact `kDLCUDA` tensor becomes a `CudaSlice` view of the same device memory.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use dlport_core::abi::DeviceType;
use dlport_core::dtype::Element;
use dlport_core::error::{AccessError, DispatchError, ValueRule};
use dlport_core::{Error, ManagedTensor};

/// An imported CUDA tensor seen as a `CudaSlice<T>` (dereference it to use it with cudarc).
/// It holds the tensor: dropping it forgets the slice without freeing anything and runs the
/// producer's deleter.
pub struct CudaView<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    tensor: ManuallyDrop<ManagedTensor>,
}

impl<T> std::fmt::Debug for CudaView<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaView")
            .field("len", &self.slice.len())
            .field("tensor", &*self.tensor)
            .finish()
    }
}

impl<T> Deref for CudaView<T> {
    type Target = CudaSlice<T>;

    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> CudaView<T> {
    /// The tensor this view reads.
    pub fn tensor(&self) -> &ManagedTensor {
        &self.tensor
    }

    /// The slice for writing, only for an exclusive, writable tensor (dlport's aliasing model:
    /// see `dlport_core::backend::Access`): [`AccessError::ReadOnly`] or [`AccessError::NotExclusive`]
    /// otherwise.
    pub fn slice_mut(&mut self) -> Result<&mut CudaSlice<T>, Error> {
        if self.tensor.is_read_only() {
            return Err(Error::Access(AccessError::ReadOnly));
        }
        if !self.tensor.is_exclusive() {
            return Err(Error::Access(AccessError::NotExclusive {
                access: self.tensor.access(),
            }));
        }
        Ok(&mut self.slice)
    }

    /// The tensor back, the slice forgotten.
    pub fn into_tensor(self) -> ManagedTensor {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so each field is taken exactly once.
        let (slice, tensor) = unsafe {
            (
                ManuallyDrop::take(&mut this.slice),
                ManuallyDrop::take(&mut this.tensor),
            )
        };
        slice.leak();
        tensor
    }
}

impl<T> Drop for CudaView<T> {
    fn drop(&mut self) {
        // SAFETY: drop runs once and neither field is used after it.
        let (slice, tensor) = unsafe {
            (
                ManuallyDrop::take(&mut self.slice),
                ManuallyDrop::take(&mut self.tensor),
            )
        };
        // The producer owns the memory: cudarc must not free it. Leaking waits for the slice's
        // recorded uses on its stream, then forgets the pointer.
        slice.leak();
        drop(tensor);
    }
}

const SAME_DEVICE: &ValueRule = &ValueRule {
    field: "device.device_id",
    expected: "the ordinal of the stream's context (use a stream of the tensor's device)",
};

/// A `CudaSlice<T>` view of a compact `kDLCUDA` or `kDLCUDAManaged` tensor, used on `stream`
/// (the stream whose work the producer ordered its own before: the one passed to
/// `__dlpack__`), without a copy.
///
/// Errors: another device type, or another device than the stream's
/// ([`DispatchError::InvalidValue`] naming the field);
/// [`AccessError::DtypeMismatch`]; a strided tensor ([`AccessError::NotContiguous`]: cudarc
/// slices are compact); a misaligned pointer ([`AccessError::Misaligned`]). The tensor is
/// released on every error.
pub fn import<T: Element>(
    tensor: ManagedTensor,
    stream: &Arc<CudaStream>,
) -> Result<CudaView<T>, Error> {
    let view = tensor.view();
    let device = view.device();
    if !matches!(
        device.device_type,
        DeviceType::CUDA | DeviceType::CUDA_MANAGED
    ) {
        return Err(Error::Dispatch(DispatchError::InvalidValue {
            rule: &ValueRule {
                field: "device.device_type",
                expected: "kDLCUDA (2) or kDLCUDAManaged (13): a cudarc slice is device memory",
            },
            value: device.device_type.0 as u64,
        }));
    }
    if usize::try_from(device.device_id).ok() != Some(stream.context().ordinal()) {
        return Err(Error::Dispatch(DispatchError::InvalidValue {
            rule: SAME_DEVICE,
            value: device.device_id as u64,
        }));
    }
    if view.dtype() != T::DTYPE {
        return Err(Error::Access(AccessError::DtypeMismatch {
            requested: T::DTYPE,
            actual: view.dtype(),
        }));
    }
    if !view.contiguity().is_row_major() {
        return Err(Error::Access(AccessError::NotContiguous {
            contiguity: view.contiguity(),
        }));
    }
    let ptr = (view.data() as u64).wrapping_add(view.byte_offset());
    let len = view.numel() as usize;
    if len != 0 && ptr % align_of::<T>() as u64 != 0 {
        return Err(Error::Access(AccessError::Misaligned {
            address: ptr as usize,
            required: align_of::<T>(),
        }));
    }
    // SAFETY: the tensor is a validated, compact CUDA tensor of `len` elements of T from `ptr`
    // on the stream's device, kept allocated by `tensor` (held next to the slice, released
    // after it); the slice is never dropped as a slice (it is leaked), so cudarc never frees
    // the producer's memory; T is Pod, so the bytes are valid values.
    let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
    Ok(CudaView {
        slice: ManuallyDrop::new(slice),
        tensor: ManuallyDrop::new(tensor),
    })
}
