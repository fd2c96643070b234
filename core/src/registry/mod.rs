//! The [`Registry`] of backends: resolution of a device to its backend, the [`Decision`] of
//! an import (view or copy, made once), the two entry points [`Registry::from_dlpack`] and
//! [`Registry::to_dlpack`] (with the stream hand-off of an export,
//! [`Registry::stream_hand_off`]). The view rule, and the decision for a chosen backend
//! ([`Registry::decide_on`]), are in [`decide`]. Allocation ([`Registry::allocate`]) is in [`allocate`],
//! compaction ([`Registry::compact`]) in [`compact`]; the process-wide default registry is in
//! [`default`].

use alloc::sync::Arc;
use alloc::vec::Vec;

mod allocate;
mod compact;
mod decide;
mod default;
mod rule;

pub use default::{from_dlpack, to_dlpack};

use crate::abi::RawManaged;
use crate::backend::{BackendRef, CpuBackend};
use crate::device::{Device, DeviceField, StreamRequest};
use crate::error::{
    AccessError, BackendError, BackendNames, CopyReason, DispatchError, Error, OptionRule,
};
use crate::managed::ManagedTensor;
use crate::options::{CopyPolicy, Decision, ExportOptions, ImportOptions};
use crate::tensor::Tensor;
use crate::view::TensorRef;

/// A run-time registry of backends. Resolution prefers the most recently registered backend
/// that serves a device type; for a type no backend serves, it falls back to one that can
/// reach that memory without a copy (so `kDLCUDAHost` resolves to the CPU backend when no CUDA
/// backend is present — never to a bare `KeyError`).
///
/// The free [`from_dlpack`] and [`to_dlpack`] use the process-wide default
/// ([`Registry::process_default`], set once with [`Registry::install_default`]); a registry of
/// your own has the same two entry points as methods.
///
/// # Examples
///
/// ```
/// use dlport_core::{Device, ExportOptions, ImportOptions, Registry, Tensor};
///
/// let mut registry = Registry::with_cpu();
/// registry.set_alloc_limit(1 << 30); // copies this registry makes: at most 1 GiB
/// assert_eq!(registry.names().collect::<Vec<_>>(), ["cpu"]);
/// // Pinned host memory has no backend of its own here: the CPU backend reaches it.
/// assert_eq!(registry.resolve(Device::cuda_host())?.name(), "cpu");
///
/// let t = Tensor::from_vec(vec![1u16, 2, 3], &[3])?;
/// let exported = registry.to_dlpack(&t, &ExportOptions::default())?;
/// let back = registry.from_dlpack(exported, &ImportOptions::default())?;
/// assert_eq!(back.to_vec::<u16>()?, [1, 2, 3]);
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Registry {
    backends: Vec<BackendRef>,
    /// For each device type code below [`SERVED_TYPES`], 1 + the index of the latest backend
    /// that serves it, or 0 for none: resolution's first rule, computed when the backends
    /// change instead of asking each backend's `device_types` on every import.
    serving: [usize; SERVED_TYPES],
    /// This registry's allocation limit (`None`: only the process-wide one,
    /// [`crate::set_alloc_limit`], and the call's).
    alloc_limit: Option<u64>,
}

/// Device type codes the registry's table covers (DLPack's are below 20); other codes are
/// resolved by asking every backend.
const SERVED_TYPES: usize = 32;

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list()
            .entries(self.backends.iter().map(|b| b.name()))
            .finish()
    }
}

impl Default for Registry {
    /// The default registry holds the core CPU backend ([`Registry::with_cpu`]).
    fn default() -> Self {
        Self::with_cpu()
    }
}

impl Registry {
    /// An empty registry.
    pub const fn new() -> Self {
        Self {
            backends: Vec::new(),
            serving: [0; SERVED_TYPES],
            alloc_limit: None,
        }
    }

    /// Sets this registry's allocation limit in bytes: every copy and allocation it makes is
    /// checked against the lowest of this limit, the process-wide one
    /// ([`set_alloc_limit`](crate::set_alloc_limit)) and the call's `max_alloc`, before anything
    /// is allocated. It can lower the process's limit, never raise it. 0 means none of its own
    /// (only the process's holds), as 0 does in [`set_alloc_limit`](crate::set_alloc_limit).
    pub fn set_alloc_limit(&mut self, bytes: u64) {
        self.alloc_limit = (bytes != 0).then_some(bytes);
    }

    /// The allocation limit in force for a call that gives `per_call`: the lowest of the
    /// call's, this registry's and the process's. A `per_call` of `Some(0)` gives 0, which
    /// every check refuses by name ([`OptionRule::MaxAlloc`]), never a zero-byte limit.
    pub fn alloc_limit(&self, per_call: Option<u64>) -> u64 {
        crate::limit::in_force(per_call, self.alloc_limit)
    }

    /// A registry holding the core CPU backend.
    pub fn with_cpu() -> Self {
        let mut r = Self::new();
        r.backends.push(Arc::new(CpuBackend));
        r.index();
        r
    }

    /// Registers a backend. Names are unique: [`DispatchError::DuplicateBackend`] otherwise.
    pub fn register(&mut self, backend: BackendRef) -> Result<(), Error> {
        if self.get(backend.name()).is_some() {
            return Err(Error::Dispatch(DispatchError::DuplicateBackend {
                name: backend.name(),
            }));
        }
        self.backends.push(backend);
        self.index();
        Ok(())
    }

    /// Recomputes the table of serving backends (after the backends changed): for each type
    /// code, the latest backend whose `device_types` lists it.
    fn index(&mut self) {
        self.serving = [0; SERVED_TYPES];
        for (i, b) in self.backends.iter().enumerate() {
            for t in b.device_types() {
                if let Some(slot) = usize::try_from(t.0)
                    .ok()
                    .and_then(|c| self.serving.get_mut(c))
                {
                    // At most `isize::MAX` backends: `i + 1` does not overflow.
                    *slot = i + 1;
                }
            }
        }
    }

    /// Removes a backend by name, returning it. Tensors it made stay valid.
    pub fn unregister(&mut self, name: &str) -> Option<BackendRef> {
        let at = self.backends.iter().position(|b| b.name() == name)?;
        let removed = self.backends.remove(at);
        self.index();
        Some(removed)
    }

    /// A backend by name.
    pub fn get(&self, name: &str) -> Option<&BackendRef> {
        self.backends.iter().find(|b| b.name() == name)
    }

    /// The registered names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.backends.iter().map(|b| b.name())
    }

    /// The backend for a device: the latest one serving its type, else the latest one that can
    /// reach its memory, else [`DispatchError::NoBackend`] naming the type, its number, the id and
    /// what is registered.
    #[inline]
    pub fn resolve(&self, device: Device) -> Result<&BackendRef, Error> {
        // The first rule, from the table (every import asks it).
        let indexed = usize::try_from(device.device_type.0)
            .ok()
            .and_then(|c| self.serving.get(c))
            .and_then(|&slot| slot.checked_sub(1))
            .and_then(|i| self.backends.get(i));
        match indexed {
            Some(b) => Ok(b),
            None => self.resolve_slow(device),
        }
    }

    /// [`resolve`](Self::resolve) by asking the backends: a type the table does not cover or no
    /// backend serves.
    #[inline(never)]
    fn resolve_slow(&self, device: Device) -> Result<&BackendRef, Error> {
        let serving = self
            .backends
            .iter()
            .rev()
            .find(|b| b.device_types().contains(&device.device_type));
        if let Some(b) = serving {
            return Ok(b);
        }
        if let Some(b) = self.backends.iter().rev().find(|b| b.can_access(device)) {
            return Ok(b);
        }
        Err(Error::Dispatch(DispatchError::NoBackend {
            device_type: device.device_type,
            device_id: device.device_id,
            registered: BackendNames::new(self.names()),
        }))
    }

    /// Decides how an import would go, without doing it.
    pub fn decide(&self, view: &TensorRef<'_>, options: &ImportOptions) -> Result<Decision, Error> {
        self.plan(view, options).map(|(decision, _)| decision)
    }

    /// Validates a managed tensor the caller keeps and decides how
    /// [`from_dlpack`](Self::from_dlpack) would import it under `options`, without taking
    /// ownership: every rule of [`ManagedTensor::from_raw`] ([`RawManaged::validate`]), then
    /// [`decide`](Self::decide). `Decision::copies` false means a view; with
    /// [`CopyPolicy::Never`] a tensor that needs a copy is refused here
    /// ([`DispatchError::CopyRequired`]). Nothing is released on any path. For an entry whose
    /// caller keeps the tensor when it fails: once this says a view, `from_dlpack` with the same
    /// options and registry does not refuse the tensor.
    ///
    /// # Safety
    /// As [`RawManaged::validate`] (the view lives only during this call).
    pub unsafe fn decide_raw(
        &self,
        raw: RawManaged,
        options: &ImportOptions,
    ) -> Result<Decision, Error> {
        // SAFETY: forwarded contract; the view does not outlive the call.
        let view = unsafe { raw.validate() }?;
        self.decide(&view, options)
    }

    /// [`decide`](Self::decide), and the target's backend. Always inlined: in an import, the
    /// view it reads is built only for it, and in line most of that view is never computed.
    #[inline(always)]
    fn plan(
        &self,
        view: &TensorRef<'_>,
        options: &ImportOptions,
    ) -> Result<(Decision, &BackendRef), Error> {
        let (memory, target) = rule::devices(view, options)?;
        let backend = self.resolve(target)?;
        let decision = rule::view_rule(backend.as_ref(), view, memory, target, options)?;
        Ok((decision, backend))
    }

    /// Imports a DLPack tensor onto a backend: a zero-copy view when the target backend reaches
    /// the memory in a layout and alignment it accepts, else a copy when the policy allows
    /// (the result has IS_COPIED), else [`DispatchError::CopyRequired`] saying why. Every error
    /// path releases the tensor.
    pub fn from_dlpack(
        &self,
        tensor: ManagedTensor,
        options: &ImportOptions,
    ) -> Result<Tensor, Error> {
        let (decision, backend) = self.plan(&tensor.view(), options)?;
        if !decision.copies {
            return backend.view_external(tensor, decision.memory);
        }
        let alignment = options.requirements.map_or(1, |r| r.alignment);
        let copied = self.copy_view(
            &tensor.view(),
            decision.memory,
            decision.target,
            alignment,
            options.max_alloc,
        )?;
        Ok(copied.with_copied(true))
    }

    /// Copies a view to `target` through the target's backend, or else the source's, after
    /// checking its size against the limit in force; the first element of the copy is
    /// `alignment`-aligned (host copies are re-aligned when the backend's alignment is
    /// weaker; elsewhere an unmet alignment is refused).
    fn copy_view(
        &self,
        view: &TensorRef<'_>,
        memory: Device,
        target: Device,
        alignment: usize,
        max_alloc: Option<u64>,
    ) -> Result<Tensor, Error> {
        let limit = self.alloc_limit(max_alloc);
        let bytes = crate::copy::compact_bytes(view.dtype(), view.shape())?;
        crate::limit::check_alloc(bytes as u128, Some(limit))?;
        let to = self.resolve(target)?;
        let copied = match to.copy(view, target)? {
            Some(t) => t,
            None => match self
                .resolve(memory)
                .ok()
                .map(|from| from.copy(view, target))
            {
                Some(Ok(Some(t))) => t,
                Some(Err(e)) => return Err(e),
                _ => return Err(self.copy_refusal(to.name(), target)),
            },
        };
        if alignment <= 1 || copied.layout().numel == 0 {
            return Ok(copied);
        }
        match copied.first_element_address() {
            Some(address) if address % alignment == 0 => return Ok(copied),
            Some(_) => {}
            None => {
                return Err(Error::Dispatch(DispatchError::InvalidOption {
                    rule: OptionRule::DeviceCopyAlignment,
                    value: alignment as u64,
                }));
            }
        }
        // The first copy and the aligned one, counted as the aligned allocation can take.
        let both = bytes as u128 + crate::copy::reserved_bytes(bytes, alignment);
        crate::limit::check_alloc(both, Some(limit))?;
        let view = copied.view()?;
        let buf = crate::copy::compact_copy_aligned(&view.tensor_ref(), alignment, Some(u64::MAX))?;
        let realigned = Tensor::builder(
            super::buffer::Buffer::new(alloc::boxed::Box::new(buf)),
            copied.backend(),
            copied.dtype(),
            copied.shape(),
        )
        .flags(copied.flags())
        .build()?;
        Ok(realigned.with_device(copied.device()))
    }

    /// Why no backend copies to `target` (`to` is the backend resolved for it): no backend
    /// serves the target's type at all ([`DispatchError::NoBackend`] naming the device and the
    /// registered backends: `to` was found only because it reaches that memory), or the two
    /// backends that do have no copy between them.
    #[cold]
    fn copy_refusal(&self, to: &'static str, target: Device) -> Error {
        let served = self
            .backends
            .iter()
            .any(|b| b.device_types().contains(&target.device_type));
        if !served {
            return Error::Dispatch(DispatchError::NoBackend {
                device_type: target.device_type,
                device_id: target.device_id,
                registered: BackendNames::new(self.names()),
            });
        }
        Error::Backend(BackendError::Unsupported {
            report: crate::error::BackendReport::new(
                to,
                "a copy between these devices",
                "neither the target's backend nor the source's copies from one to the other; \
                 copy through the host (to kDLCPU, then to the target)",
            ),
        })
    }

    /// The DLPack stream hand-off for memory on `device`: `device`'s backend makes the
    /// consumer's stream wait for the work queued on `producer` (a stream of that backend;
    /// `None`: the one it orders its own work and imports on), through
    /// [`Backend::stream_hand_off`](crate::backend::Backend::stream_hand_off).
    /// [`StreamRequest::NoSync`] does nothing. Every export with a stream
    /// ([`to_dlpack`](Self::to_dlpack), [`ExportOptions::stream`]) goes through it, and so does
    /// an export made outside the registry of memory one of its backends serves (a `CudaSlice`
    /// exported by `dlport-native`). A device no backend serves or reaches is
    /// [`DispatchError::NoBackend`].
    pub fn stream_hand_off(
        &self,
        device: Device,
        producer: Option<usize>,
        consumer: StreamRequest,
    ) -> Result<(), Error> {
        if consumer == StreamRequest::NoSync {
            return Ok(());
        }
        self.resolve(device)?
            .stream_hand_off(device, producer, consumer)
    }

    /// Exports a backend tensor, following `__dlpack__`: legacy or versioned from
    /// `max_version`; a copy when `dl_device` differs (host-accessible memory is shown to a
    /// `cpu` consumer without one) or `copy` is Always; an external reference otherwise. Then
    /// the consumer's `stream` waits for the tensor's pending work, through the backend that
    /// holds the export ([`stream_hand_off`](Self::stream_hand_off)); an invalid `stream` is
    /// refused before anything is exported.
    pub fn to_dlpack(
        &self,
        tensor: &Tensor,
        options: &ExportOptions,
    ) -> Result<ManagedTensor, Error> {
        crate::limit::check_max_alloc(options.max_alloc)?;
        let versioned = options.max_version.is_some_and(|v| v.major >= 1);
        let own = tensor.device();
        let wanted = match options.dl_device {
            Some(d) => d.check(DeviceField::DlDevice)?,
            None => own,
        };
        let consumer = StreamRequest::parse(options.stream, wanted.device_type)?;
        // The backend that holds it, else the one serving its device (borrowed: no count).
        let backend = match self.get(tensor.backend()) {
            Some(b) => b,
            None => self.resolve(own)?,
        };
        // Without a copy when the device asked for is the one the memory presents to it
        // (host-accessible memory is shown to a `cpu` consumer as `cpu`).
        let relabel = own.presented(Some(wanted)) == wanted;
        // The legacy form has no flags: READ_ONLY or IS_SUBBYTE_TYPE_PADDED reach a legacy
        // consumer only as a copy (compact, packed, writable), never by dropping the flag.
        let unrepresentable = if versioned {
            None
        } else {
            crate::export::legacy_representable(tensor.flags()).err()
        };
        if relabel && options.copy != CopyPolicy::Always && unrepresentable.is_none() {
            let exported = backend.acquire_external(tensor, versioned, wanted)?;
            if consumer != StreamRequest::NoSync {
                // On error the export drops here: released, never handed out.
                backend.stream_hand_off(wanted, None, consumer)?;
            }
            return Ok(exported);
        }
        if options.copy == CopyPolicy::Never {
            let reason = match unrepresentable {
                Some(Error::Access(AccessError::FlagNotRepresentable { flag })) if relabel => {
                    CopyReason::Flag { flag }
                }
                _ => CopyReason::Device {
                    from: own,
                    to: wanted,
                },
            };
            return Err(Error::Dispatch(DispatchError::CopyRequired { reason }));
        }
        let copy = {
            let view = tensor.view()?;
            self.copy_view(
                &view.tensor_ref(),
                tensor.buffer().device(),
                wanted,
                1,
                options.max_alloc,
            )?
            .with_copied(true)
        };
        let holder = match self.get(copy.backend()) {
            Some(b) => b,
            None => self.resolve(wanted)?,
        };
        let exported = holder.release_ownership(&copy, versioned, wanted)?;
        if consumer != StreamRequest::NoSync {
            holder.stream_hand_off(copy.device(), None, consumer)?;
        }
        Ok(exported)
    }
}
