//! The binding's one door into dlport's Rust API.
//!
//! Everything dlport-pyo3 does with dlport — the native registry, import, export, compaction,
//! allocation, the CUDA stream hand-off and the error codes — goes through this module, so a
//! change of dlport's API is absorbed here. Elsewhere the crate uses dlport's C-layout types
//! (`abi::*`, `Device`, `DataType`, `RawManaged`), which mirror `dlpack.h`, and core's own
//! options (`ImportOptions`, `ExportOptions`, `CopyPolicy`, `ViewRequirements`), which the
//! keyword arguments become and this module passes on unchanged; it hands extension authors
//! the `Tensor` a [`Held`] holds. The package's own features beyond it (its
//! `share.rs`: dlport-native's `share` and `open`) make their calls in the package, over
//! [`registry`] and [`Held`].
//!
//! Errors leave as a [`Failure`] carrying [`Error::code`] (stable numbers shared with the C
//! ABI), classified by `crate::errors::kind_of`.

use std::sync::OnceLock;

use dlport_core::abi::{DLManagedTensorVersioned, FLAG_IS_SUBBYTE_TYPE_PADDED, RawManaged};
use dlport_core::backend::{CPU_ALIGN, LayoutNeed, StreamRequest, ViewRequirements, compact_bytes};
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportOptions, ImportOptions, ManagedTensor, Registry,
    Tensor,
};

pub use crate::errors::{Failure, Kind};

/// The tensor a `dlport.Tensor` holds: a backend tensor of the native registry.
#[derive(Clone, Debug)]
pub struct Held(Tensor);

impl Held {
    /// Holds a tensor of the registry.
    pub fn from_tensor(t: Tensor) -> Self {
        Self(t)
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }

    /// The tensor, owned.
    pub fn into_tensor(self) -> Tensor {
        self.0
    }
}

/// The registry of the package: the process-wide default, shared with the C ABI and Rust code
/// in the same process. `dlport_native::install()` installs it on first use (every native
/// backend that works on this machine: CPU with the fast copy kernels, pinned memory, CUDA when
/// a driver answers), unless a program embedding Python installed its own first.
pub fn registry() -> &'static Registry {
    // Decided once: the process-wide default cannot change after it is installed.
    static REGISTRY: OnceLock<&'static Registry> = OnceLock::new();
    REGISTRY
        .get_or_init(|| dlport_native::install().unwrap_or_else(|_| Registry::process_default()))
}

/// Takes ownership of a managed tensor, validates it and imports it onto the registry: a view
/// when the target reaches the memory, a copy where the policy allows. Every error releases it.
///
/// # Safety
/// `raw` is an owned managed tensor of the form it says, handed over (nobody else releases it),
/// satisfying `ManagedTensor::from_raw`'s contract.
#[inline]
pub unsafe fn import(raw: RawManaged, options: &ImportOptions) -> Result<Held, Failure> {
    // SAFETY: forwarded contract.
    let managed = unsafe { ManagedTensor::from_raw(raw) }?;
    Ok(Held(registry().from_dlpack(managed, options)?))
}

/// Checks, without taking ownership, that a versioned tensor is valid and that [`import`] with
/// `copy=False` would take it as a view: core's [`Registry::decide_raw`]. For entries whose
/// caller keeps the tensor when they fail: after this succeeds, the import cannot fail for the
/// tensor's sake. Returns the tensor as the raw pointer [`import`] takes.
///
/// # Safety
/// `raw` is NULL or a live managed tensor under [`RawManaged::validate`]'s contract for the
/// duration of the call.
pub unsafe fn check_view(raw: *mut DLManagedTensorVersioned) -> Result<RawManaged, Failure> {
    let raw = std::ptr::NonNull::new(raw)
        .map(RawManaged::Versioned)
        .ok_or(Error::Layout(
            dlport_core::error::LayoutError::NullManagedTensor,
        ))?;
    let options = ImportOptions {
        copy: CopyPolicy::Never,
        ..ImportOptions::default()
    };
    // SAFETY: forwarded contract; nothing is taken.
    unsafe { registry().decide_raw(raw, &options) }?;
    Ok(raw)
}

/// Exports a held tensor as a new managed tensor the caller owns, as core's
/// [`Registry::to_dlpack`] does with `options`: an external reference (no copy), or a copy on
/// `dl_device` where needed and allowed. `presented` is the device the Python tensor answers
/// `__dlpack_device__` with, the target when `options.dl_device` is `None`. For CUDA memory,
/// the consumer's `stream` (`__dlpack__(stream=)`) waits on the producer's work (the DLPack
/// stream hand-off).
pub fn export(
    t: &Held,
    presented: Device,
    options: &ExportOptions,
    stream: Option<i64>,
) -> Result<Owned, Failure> {
    let dl_device = options.dl_device.unwrap_or(presented);
    let request = StreamRequest::parse(stream, dl_device.device_type)?;
    let options = ExportOptions {
        dl_device: Some(dl_device),
        ..*options
    };
    let managed = registry().to_dlpack(&t.0, &options)?;
    hand_off(dl_device, request)?;
    Ok(Owned(managed))
}

/// An export not yet handed to a consumer: released if dropped.
#[derive(Debug)]
pub struct Owned(ManagedTensor);

impl Owned {
    /// Hands the managed tensor over: the caller (or its consumer) releases it once.
    pub fn into_raw(self) -> RawManaged {
        self.0.into_raw()
    }
}

/// The stream hand-off for CUDA memory: dlport's own device work is synchronous, and a foreign
/// CUDA tensor was imported with `stream=None` (its producer's work ordered before the legacy
/// default stream), so the consumer's stream waits on the legacy default stream.
#[cfg(feature = "cuda")]
fn hand_off(device: Device, request: StreamRequest) -> Result<(), Failure> {
    use dlport_core::abi::DeviceType;
    if device.device_type != DeviceType::CUDA && device.device_type != DeviceType::CUDA_MANAGED {
        return Ok(());
    }
    static CUDA: OnceLock<Option<dlport_native::cuda::CudaBackend>> = OnceLock::new();
    match CUDA.get_or_init(|| dlport_native::cuda::CudaBackend::new().ok()) {
        Some(cuda) => Ok(cuda.hand_off(device, LEGACY_DEFAULT_STREAM, request)?),
        None => Ok(()),
    }
}

/// Without the feature `cuda` there is no hand-off: the consumer's stream is not made to wait.
#[cfg(not(feature = "cuda"))]
fn hand_off(_device: Device, _request: StreamRequest) -> Result<(), Failure> {
    Ok(())
}

/// CUDA's legacy default stream handle (`cudaStreamLegacy`).
#[cfg(feature = "cuda")]
const LEGACY_DEFAULT_STREAM: usize = 1;

/// A row-major compact tensor with the same elements: the held tensor itself when it already is
/// one (and, in host memory, aligned to `align` bytes, default 64), else a copy through the
/// backend's copy kernels.
pub fn compact(t: &Held, align: Option<usize>) -> Result<Held, Failure> {
    let own = t.0.device();
    let alignment = match align {
        Some(a) => a,
        None if own.is_host_accessible() => CPU_ALIGN,
        None => 1,
    };
    let exported = registry().to_dlpack(
        &t.0,
        &ExportOptions {
            dl_device: Some(own),
            ..ExportOptions::versioned()
        },
    )?;
    let options = ImportOptions {
        device: Some(own),
        advertised: None,
        copy: CopyPolicy::IfNeeded,
        requirements: Some(ViewRequirements {
            layout: LayoutNeed::RowMajor,
            alignment,
        }),
        max_alloc: None,
    };
    Ok(Held(registry().from_dlpack(exported, &options)?))
}

/// A new compact, zeroed tensor on `device`, owned by the caller as a versioned managed tensor
/// (the exchange API's allocator). Its size is checked against the allocation limit first.
pub fn allocate(device: Device, dtype: DataType, shape: &[i64]) -> Result<RawManaged, Failure> {
    let bytes = compact_bytes(dtype, shape)?;
    dlport_core::backend::check_alloc(bytes as u128, Some(registry().alloc_limit(None)))?;
    let backend = registry().resolve(device)?;
    let t = backend.allocate(device, dtype, shape)?;
    Ok(backend.release_ownership(&t, true, device)?.into_raw())
}

/// `ndim` of a foreign prototype, checked (0 to 64) before any array is read.
pub fn check_ndim(ndim: i32) -> Result<usize, Failure> {
    Ok(dlport_core::layout::check_ndim(i64::from(ndim))?)
}

/// Parses a device name as dlport writes it (`cpu`, `cuda:0`, `cuda_host:0`).
pub fn parse_device(name: &str) -> Result<Device, Failure> {
    Ok(name.parse::<Device>()?)
}

/// What the buffer protocol and the bare-DLTensor lending need to know about a held tensor.
impl Held {
    /// Extents.
    pub fn shape(&self) -> &[i64] {
        self.0.shape()
    }

    /// Strides in elements. The slice lives as long as the tensor (a stable address).
    pub fn strides(&self) -> &[i64] {
        self.0.strides()
    }

    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.0.dtype()
    }

    /// Where the memory really is (`cuda_host:0` for a pinned tensor shown as `cpu`).
    pub fn memory(&self) -> Device {
        self.0.device()
    }

    /// The device a Python tensor presents (`__dlpack_device__`, `device`, exports), given the
    /// device its import asked for: core's rule, [`Device::presented`]. Host-accessible memory
    /// (pinned, managed) presents as `cpu` unless the import asked for its own device by name
    /// (`device="cuda_host"`) (python/README.md, "Which device a tensor presents"); `memory`
    /// still says where the memory is. Device memory presents as itself.
    pub fn presented(&self, requested: Option<Device>) -> Device {
        self.memory().presented(requested)
    }

    /// READ_ONLY: nobody may write through an export.
    pub fn is_read_only(&self) -> bool {
        self.0.is_read_only()
    }

    /// The tensor is a copy made for its import.
    pub fn is_copied(&self) -> bool {
        self.0.is_copied()
    }

    /// Sub-byte elements padded to whole bytes (IS_SUBBYTE_TYPE_PADDED).
    pub fn is_subbyte_padded(&self) -> bool {
        self.0.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED != 0
    }

    /// The buffer's base pointer or handle (`DLTensor::data`).
    pub fn data(&self) -> *mut core::ffi::c_void {
        self.0.buffer().ptr()
    }

    /// Bytes from [`data`](Self::data) to the first element.
    pub fn byte_offset(&self) -> u64 {
        self.0.byte_offset()
    }

    /// The first element's address in host-accessible memory; `None` for device memory.
    pub fn host_address(&self) -> Option<usize> {
        self.0.first_element_address()
    }

    /// Bytes of the elements in compact form (sub-byte elements packed).
    pub fn nbytes(&self) -> usize {
        compact_bytes(self.0.dtype(), self.0.shape()).unwrap_or(0)
    }

    /// Row-major (C) contiguous.
    pub fn is_row_major(&self) -> bool {
        self.0.contiguity().is_row_major()
    }

    /// Column-major (Fortran) contiguous.
    pub fn is_column_major(&self) -> bool {
        self.0.contiguity().is_column_major()
    }

    /// Outstanding DLPack references and reads of the memory (0 once every export is released).
    pub fn users(&self) -> usize {
        self.0.buffer().users()
    }
}

/// A copy of a held tensor on its own memory, with its own buffer (`copy.deepcopy`): the
/// backend's copy, as `__dlpack__(copy=True)` makes; writable, and marked copied.
pub fn deep_copy(t: &Held) -> Result<Held, Failure> {
    let own = t.0.device();
    let exported = registry().to_dlpack(
        &t.0,
        &ExportOptions {
            dl_device: Some(own),
            copy: CopyPolicy::Always,
            ..ExportOptions::versioned()
        },
    )?;
    let options = ImportOptions {
        device: Some(own),
        ..ImportOptions::default()
    };
    Ok(Held(registry().from_dlpack(exported, &options)?))
}

/// A row-major compact copy in host memory (`cpu`) of a tensor in device memory, for pickling
/// under `dlport.pickling(device_copy=True)`: the backend's copy to the host.
pub fn host_copy(t: &Held) -> Result<Held, Failure> {
    let cpu = Device::cpu();
    let exported = registry().to_dlpack(
        &t.0,
        &ExportOptions {
            dl_device: Some(cpu),
            copy: CopyPolicy::IfNeeded,
            ..ExportOptions::versioned()
        },
    )?;
    let options = ImportOptions {
        device: Some(cpu),
        copy: CopyPolicy::IfNeeded,
        requirements: Some(ViewRequirements {
            layout: LayoutNeed::RowMajor,
            alignment: 1,
        }),
        ..ImportOptions::default()
    };
    Ok(Held(registry().from_dlpack(exported, &options)?))
}

/// Bytes that [`Held::host_bytes`] lends: a held tensor's memory as storage for a `uint8` view
/// (it holds a reference to the tensor, so the memory lives as long as the view).
struct HostBytes {
    held: Tensor,
    address: usize,
    len: usize,
}

// SAFETY: `address` is the first element of `held`, a row-major compact tensor in
// host-accessible memory whose elements reach `len` bytes (checked by `host_bytes`); the
// tensor is held, so the bytes stay valid and do not move; other handles of the tensor may read
// and write them (Shared), or nobody writes them (ReadOnly, when the tensor is READ_ONLY).
unsafe impl dlport_core::backend::TensorStorage for HostBytes {
    fn data_ptr(&mut self) -> *mut core::ffi::c_void {
        self.address as *mut core::ffi::c_void
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn access(&self) -> dlport_core::backend::Access {
        if self.held.is_read_only() {
            dlport_core::backend::Access::ReadOnly
        } else {
            dlport_core::backend::Access::Shared
        }
    }
}

impl Held {
    /// Bytes the elements of a row-major compact tensor reach (0 for an empty one), and the
    /// first element's address; `None` if the tensor is not compact row-major in host memory.
    pub fn host_span(&self) -> Option<(usize, usize)> {
        let layout = self.0.layout();
        let len = if layout.numel == 0 {
            0
        } else {
            usize::try_from(layout.span.hi).ok()?
        };
        let compact = self.is_row_major() && layout.span.lo == 0;
        compact.then_some(())?;
        Some((self.host_address().unwrap_or(0), len))
    }

    /// The bytes of a row-major compact tensor in host memory as a 1-D `uint8` tensor over the
    /// same memory (READ_ONLY when this one is): the buffer a pickle sends.
    pub fn host_bytes(&self) -> Result<Held, Failure> {
        let (address, len) = self.host_span().filter(|&(a, _)| a != 0).ok_or_else(|| {
            Failure::new(
                Kind::Buffer,
                "only a non-empty row-major compact tensor in host memory lends its bytes",
            )
        })?;
        let storage = HostBytes {
            held: self.0.clone(),
            address,
            len,
        };
        let managed =
            dlport_core::ExportBuilder::new(storage, DataType::UINT8, &[len as i64]).build()?;
        Ok(Held(
            registry().from_dlpack(managed, &ImportOptions::default())?,
        ))
    }
}

/// A pickled tensor rebuilt over `storage` (the buffer the pickle's engine handed back), under
/// the allocation limit in force: `crate::reduce::rebuild`'s checks, then a view on the
/// registry. Returns the tensor and the device the sender's memory was on.
pub fn rebuild<S: dlport_core::backend::TensorStorage>(
    storage: S,
    fields: &crate::reduce::Reduced<'_>,
) -> Result<(Held, Device), Failure> {
    let (managed, origin) = crate::reduce::rebuild(storage, fields, registry().alloc_limit(None))?;
    let view_only = ImportOptions {
        copy: CopyPolicy::Never,
        ..ImportOptions::default()
    };
    Ok((Held(registry().from_dlpack(managed, &view_only)?), origin))
}

/// Takes ownership of a managed tensor, validates it and releases it (the benchmark's
/// validation-only import).
///
/// # Safety
/// As [`import`].
#[cfg(feature = "bench")]
pub unsafe fn validate_and_release(raw: RawManaged) -> Result<(), Failure> {
    // SAFETY: forwarded contract.
    drop(unsafe { ManagedTensor::from_raw(raw) }?);
    Ok(())
}
