//! The binding's one door into dlport's registry.
//!
//! Everything dlport-pyo3 asks of dlport's registry — import, export (and with it the DLPack
//! stream hand-off), compaction, copies, allocation — goes through this module, so a change of dlport's API
//! is absorbed here. Elsewhere the crate holds and reads core's `Tensor` itself (a
//! `dlport.Tensor` is one, `PyTensor::tensor`), and uses dlport's C-layout types (`abi::*`,
//! `Device`, `DataType`, `RawManaged`), which mirror `dlpack.h`, and core's own options
//! (`ImportOptions`, `ExportOptions`, `CopyPolicy`, `ViewRequirements`), which the keyword
//! arguments become and this module passes on unchanged. The package's own features beyond it
//! (its `share.rs`: dlport-native's `share` and `open`) make their calls in the package, over
//! [`registry`].
//!
//! Errors leave as a [`Failure`] carrying [`Error::code`] (stable numbers shared with the C
//! ABI), classified by `crate::errors::kind_of`.

use std::sync::OnceLock;

use dlport_core::abi::{DLManagedTensorVersioned, RawManaged};
use dlport_core::backend::{CompactOptions, LayoutNeed, ViewRequirements};
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportOptions, ImportOptions, ManagedTensor, Registry,
    Tensor,
};

pub use crate::errors::{Failure, Kind};

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
/// `read_only`: the producer's memory is immutable whatever its flags say (a `jax.Array`), so
/// the view is READ_ONLY.
///
/// # Safety
/// `raw` is an owned managed tensor of the form it says, handed over (nobody else releases it),
/// satisfying `ManagedTensor::from_raw`'s contract.
#[inline]
pub unsafe fn import(
    raw: RawManaged,
    options: &ImportOptions,
    read_only: bool,
) -> Result<Tensor, Failure> {
    // SAFETY: forwarded contract.
    let mut managed = unsafe { ManagedTensor::from_raw(raw) }?;
    if read_only {
        managed.set_read_only();
    }
    Ok(registry().from_dlpack(managed, options)?)
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

/// Exports a tensor as a new managed tensor the caller owns (released if dropped): core's
/// [`Registry::to_dlpack`] with `options`, an external reference (no copy), or a copy on
/// `dl_device` where needed and allowed. `presented` is the device the Python tensor answers
/// `__dlpack_device__` with, the target when `options.dl_device` is `None`. The consumer's
/// `options.stream` (`__dlpack__(stream=)`) waits on the tensor's pending work: the registry's
/// stream hand-off, through the backend that holds the export.
pub fn export(
    t: &Tensor,
    presented: Device,
    options: &ExportOptions,
) -> Result<ManagedTensor, Failure> {
    let options = ExportOptions {
        dl_device: Some(options.dl_device.unwrap_or(presented)),
        ..*options
    };
    Ok(registry().to_dlpack(t, &options)?)
}

/// A row-major compact tensor with the same elements: core's [`Registry::compact`], the tensor
/// itself when it already is one (and, in host memory, aligned to `align` bytes, default 64),
/// else a copy through the registry's copy.
pub fn compact(t: &Tensor, align: Option<usize>) -> Result<Tensor, Failure> {
    let options = CompactOptions {
        alignment: align,
        ..CompactOptions::default()
    };
    Ok(registry().compact(t, &options)?)
}

/// A new compact, zeroed tensor on `device`, owned by the caller as a versioned managed tensor
/// (the exchange API's allocator): the registry's allocation ([`Registry::allocate`], which
/// checks the limit in force before anything is allocated), exported by its backend.
pub fn allocate(device: Device, dtype: DataType, shape: &[i64]) -> Result<RawManaged, Failure> {
    let t = registry().allocate(device, dtype, shape)?;
    let backend = registry().resolve(device)?;
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

/// A copy of a tensor on its own memory, with its own buffer (`copy.deepcopy`): core's
/// [`Registry::compact`] with [`CopyPolicy::Always`], the backend's copy into a row-major compact
/// tensor; writable, and marked copied.
pub fn deep_copy(t: &Tensor) -> Result<Tensor, Failure> {
    let options = CompactOptions {
        copy: CopyPolicy::Always,
        ..CompactOptions::default()
    };
    Ok(registry().compact(t, &options)?)
}

/// A row-major compact copy in host memory (`cpu`) of a tensor in device memory, for pickling
/// under `dlport.pickling(device_copy=True)`: the backend's copy to the host.
pub fn host_copy(t: &Tensor) -> Result<Tensor, Failure> {
    let cpu = Device::cpu();
    let exported = registry().to_dlpack(
        t,
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
    Ok(registry().from_dlpack(exported, &options)?)
}

/// Bytes that [`host_bytes`] lends: a tensor's memory as storage for a `uint8` view (it holds a
/// reference to the tensor, so the memory lives as long as the view).
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

/// Bytes the elements of a row-major compact tensor reach (0 for an empty one), and the first
/// element's address; `None` if the tensor is not compact row-major in host memory.
pub fn host_span(t: &Tensor) -> Option<(usize, usize)> {
    let layout = t.layout();
    let len = if layout.numel == 0 {
        0
    } else {
        usize::try_from(layout.span.hi).ok()?
    };
    let compact = t.contiguity().is_row_major() && layout.span.lo == 0;
    compact.then_some(())?;
    Some((t.first_element_address().unwrap_or(0), len))
}

/// The bytes of a row-major compact tensor in host memory as a 1-D `uint8` tensor over the same
/// memory (READ_ONLY when this one is): the buffer a pickle sends.
pub fn host_bytes(t: &Tensor) -> Result<Tensor, Failure> {
    let (address, len) = host_span(t).filter(|&(a, _)| a != 0).ok_or_else(|| {
        Failure::new(
            Kind::Buffer,
            "only a non-empty row-major compact tensor in host memory lends its bytes",
        )
    })?;
    let storage = HostBytes {
        held: t.clone(),
        address,
        len,
    };
    let managed =
        dlport_core::ExportBuilder::new(storage, DataType::UINT8, &[len as i64]).build()?;
    Ok(registry().from_dlpack(managed, &ImportOptions::default())?)
}

/// A pickled tensor rebuilt over `storage` (the buffer the pickle's engine handed back), under
/// the allocation limit in force: `crate::reduce::rebuild`'s checks, then a view on the
/// registry. Returns the tensor and the device the sender's memory was on.
pub fn rebuild<S: dlport_core::backend::TensorStorage>(
    storage: S,
    fields: &crate::reduce::Reduced<'_>,
) -> Result<(Tensor, Device), Failure> {
    let (managed, origin) = crate::reduce::rebuild(storage, fields, registry().alloc_limit(None))?;
    let view_only = ImportOptions {
        copy: CopyPolicy::Never,
        ..ImportOptions::default()
    };
    Ok((registry().from_dlpack(managed, &view_only)?, origin))
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
