//! An "xpu" plugin for `kDLOneAPI`, registered at run time.
//!
//! It follows the backend guide (`dlport_core::backend`): a storage type that owns the memory
//! (here host memory standing in for device memory, so tests can look at it), a [`Backend`]
//! with its own device numbering (producer id `n` is local id `n + 10`, as the XPU device
//! selector renumbers devices), allocation, and a download to the CPU.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::{DLTensor, DeviceType};
use dlport_core::backend::{
    AlignedBuffer, Backend, Buffer, CpuBackend, TensorStorage, compact_bytes,
};
use dlport_core::error::DispatchError;
use dlport_core::{DataType, Device, Error, Tensor, TensorRef};

/// The plugin's name.
pub const NAME: &str = "xpu";
/// Local id of producer device 0.
pub const ID_OFFSET: i32 = 10;
/// How many devices the plugin says it has (producer ids `0..DEVICES`).
pub const DEVICES: i32 = 4;

/// The plugin. `freed` counts the device allocations it has freed.
#[derive(Debug, Default)]
pub struct Xpu {
    freed: Arc<AtomicUsize>,
}

impl Xpu {
    /// A plugin with a fresh free counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// A shared handle on the number of allocations freed so far.
    pub fn freed(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.freed)
    }

    /// The device a producer calls `oneapi:producer_id`, in the plugin's numbering.
    pub fn local(producer_id: i32) -> Device {
        Device::new(DeviceType::ONEAPI, producer_id + ID_OFFSET)
    }
}

/// Host memory standing in for XPU memory; counts its free.
struct XpuMemory {
    buf: AlignedBuffer,
    device: Device,
    freed: Arc<AtomicUsize>,
}

impl Drop for XpuMemory {
    fn drop(&mut self) {
        self.freed.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the aligned allocation is stable, `len` bytes long and owned by this value alone.
unsafe impl TensorStorage for XpuMemory {
    fn data_ptr(&mut self) -> *mut c_void {
        self.buf.as_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.buf.len()
    }
    fn device(&self) -> Device {
        self.device
    }
}

impl Backend for Xpu {
    fn name(&self) -> &'static str {
        NAME
    }

    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::ONEAPI]
    }

    fn can_access(&self, memory: Device) -> bool {
        memory.device_type == DeviceType::ONEAPI
    }

    fn translate_device_id(&self, producer_id: i32) -> Result<i32, Error> {
        if (0..DEVICES).contains(&producer_id) {
            Ok(producer_id + ID_OFFSET)
        } else {
            Err(Error::Dispatch(DispatchError::InvalidDeviceId {
                backend: NAME,
                device_id: producer_id,
            }))
        }
    }

    fn export_device_id(&self, local_id: i32) -> i32 {
        local_id - ID_OFFSET
    }

    /// A compact tensor whose byte `i` is `i as u8`, so copies can be checked.
    fn allocate(&self, device: Device, dtype: DataType, shape: &[i64]) -> Result<Tensor, Error> {
        let bytes = compact_bytes(dtype, shape)?;
        let mut buf = AlignedBuffer::zeroed(bytes, 64)?;
        for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
            *b = i as u8;
        }
        let memory = XpuMemory {
            buf,
            device,
            freed: Arc::clone(&self.freed),
        };
        Tensor::builder(Buffer::new(Box::new(memory)), NAME, dtype, shape).build()
    }

    /// Downloads to the CPU ("device" memory is host memory here); other pairs are not ours.
    fn copy(&self, src: &TensorRef<'_>, target: Device) -> Result<Option<Tensor>, Error> {
        if src.device().device_type != DeviceType::ONEAPI || target != Device::cpu() {
            return Ok(None);
        }
        let fields = DLTensor {
            data: src.data(),
            device: Device::cpu(),
            ndim: src.ndim() as i32,
            dtype: src.dtype(),
            shape: src.shape().as_ptr().cast_mut(),
            strides: src
                .raw_strides()
                .map_or(std::ptr::null_mut(), |s| s.as_ptr().cast_mut()),
            byte_offset: src.byte_offset(),
        };
        // SAFETY: the plugin's memory is host memory, alive while `src` is; the fields are
        // `src`'s own, already validated, with the device relabelled.
        let host = unsafe { TensorRef::from_raw(&fields, src.version(), src.flags()) }?;
        CpuBackend.copy(&host, Device::cpu())
    }
}

/// A registry with the CPU backend and a fresh plugin, and the plugin's free counter.
pub fn registry() -> (dlport_core::Registry, Arc<AtomicUsize>) {
    let xpu = Xpu::new();
    let freed = xpu.freed();
    let mut r = dlport_core::Registry::with_cpu();
    r.register(Arc::new(xpu))
        .expect("a fresh registry has no backend named xpu");
    (r, freed)
}

/// A producer's 2×2 float32 tensor on any device (host memory underneath, so a plugin can
/// read it), counting its deleter calls in `counter`.
pub fn counted_export(counter: &Arc<AtomicUsize>, device: Device) -> dlport_core::ManagedTensor {
    struct Counting(Vec<f32>, Device, Arc<AtomicUsize>);
    impl Drop for Counting {
        fn drop(&mut self) {
            self.2.fetch_add(1, Ordering::SeqCst);
        }
    }
    // SAFETY: a Vec's buffer, stable and owned alone, `4 * len` bytes.
    unsafe impl TensorStorage for Counting {
        fn data_ptr(&mut self) -> *mut c_void {
            self.0.as_mut_ptr().cast()
        }
        fn byte_len(&self) -> usize {
            self.0.len() * 4
        }
        fn device(&self) -> Device {
            self.1
        }
    }
    dlport_core::ExportBuilder::new(
        Counting(vec![1.0, 2.0, 3.0, 4.0], device, Arc::clone(counter)),
        DataType::FLOAT32,
        &[2, 2],
    )
    .build()
    .expect("a compact 2x2 export of 4 floats is valid")
}
