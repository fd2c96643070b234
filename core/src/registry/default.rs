//! The default registry: [`from_dlpack`] and [`to_dlpack`] over the process-wide default
//! [`Registry`], installed once (as rustls installs its default crypto provider).
//!
//! Core's default holds the CPU backend, which also reads pinned and managed host memory.
//! `dlport_native::install()` installs one with every backend that works on the machine
//! (CPU, pinned, CUDA), and `dlport_wasm` one with WebGPU. Install at the start of `main`,
//! before the first `from_dlpack` / `to_dlpack`: the first use installs core's default, and
//! a default cannot be replaced (a tensor's backend must stay the one that made it). A caller
//! that needs another set of backends passes its own registry to [`Registry::from_dlpack`].

use alloc::boxed::Box;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use super::Registry;
use crate::error::{BackendNames, DispatchError, Error};
use crate::managed::ManagedTensor;
use crate::options::{ExportOptions, ImportOptions};
use crate::tensor::Tensor;

/// The installed default: null until the first install, then a leaked `Box<Registry>` that is
/// never replaced or freed.
static DEFAULT: AtomicPtr<Registry> = AtomicPtr::new(ptr::null_mut());

impl Registry {
    /// Installs `self` as the process-wide default used by [`from_dlpack`] and [`to_dlpack`].
    ///
    /// The first install wins, for the life of the process (as with rustls's
    /// `CryptoProvider::install_default`); a later one is refused with
    /// [`DispatchError::DefaultInstalled`], naming the backends of the default in force. The
    /// first use of the default installs core's ([`Registry::with_cpu`]) if nothing was
    /// installed before, so install at the start of `main`.
    pub fn install_default(self) -> Result<&'static Registry, Error> {
        match self.install() {
            (installed, None) => Ok(installed),
            (in_force, Some(_rejected)) => Err(DispatchError::DefaultInstalled {
                registered: BackendNames::new(in_force.names()),
            }
            .into()),
        }
    }

    /// Installs `self` unless a default exists; returns the default in force, and `self` back
    /// if it was not installed.
    fn install(self) -> (&'static Registry, Option<Registry>) {
        let fresh = Box::into_raw(Box::new(self));
        match DEFAULT.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `fresh` is now the default, never freed or replaced: valid for 'static,
            // and only read through shared references from here on.
            Ok(_) => (unsafe { &*fresh }, None),
            // SAFETY: the exchange failed, so `current` is the (non-null) installed default,
            // never freed; and `fresh` was never published, so we still own it.
            Err(current) => unsafe { (&*current, Some(*Box::from_raw(fresh))) },
        }
    }

    /// The installed default, if one was installed (explicitly or by a first use).
    pub fn get_default() -> Option<&'static Registry> {
        let p = DEFAULT.load(Ordering::Acquire);
        // SAFETY: a non-null value is an installed default: a leaked box, never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

/// The process-wide default registry: the installed one, or core's (the CPU backend), which
/// this call installs if nothing was installed yet.
pub fn default_registry() -> &'static Registry {
    if let Some(r) = Registry::get_default() {
        return r;
    }
    // If another thread installed one in between, that one is returned.
    Registry::with_cpu().install().0
}

/// Imports a DLPack tensor onto the default registry's backends: a zero-copy view when the
/// target backend reaches the memory in a layout it accepts, else a copy where
/// `options.copy` allows, else [`DispatchError::CopyRequired`](crate::DispatchError::CopyRequired)
/// saying why. Every error path releases the tensor. See [`Registry::from_dlpack`].
pub fn from_dlpack(tensor: ManagedTensor, options: &ImportOptions) -> Result<Tensor, Error> {
    default_registry().from_dlpack(tensor, options)
}

/// Exports a tensor for a DLPack consumer, following `__dlpack__`'s `max_version`,
/// `dl_device` and `copy`: a counted reference to the same memory when no copy is needed.
/// See [`Registry::to_dlpack`].
pub fn to_dlpack(tensor: &Tensor, options: &ExportOptions) -> Result<ManagedTensor, Error> {
    default_registry().to_dlpack(tensor, options)
}
