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

    /// The process-wide default registry, the one [`from_dlpack`] and [`to_dlpack`] use: the
    /// installed one, or core's ([`Registry::with_cpu`]), which this call installs if nothing
    /// was installed yet.
    pub fn process_default() -> &'static Registry {
        if let Some(r) = Self::get_default() {
            return r;
        }
        // If another thread installed one in between, that one is returned.
        Self::with_cpu().install().0
    }
}

/// Imports a DLPack tensor onto the default registry's backends
/// ([`Registry::process_default`]): a zero-copy view when the target backend reaches the
/// memory in a layout it accepts, else a copy where `options.copy` allows, else
/// [`DispatchError::CopyRequired`](crate::error::DispatchError::CopyRequired) saying why.
/// Every error path releases the tensor. See [`Registry::from_dlpack`].
///
/// # Examples
///
/// ```
/// use dlport_core::{ExportBuilder, ImportOptions, ManagedTensor, from_dlpack};
///
/// // A DLPack tensor from any producer (here our own export, as a raw pointer).
/// let raw = ExportBuilder::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).build()?.into_raw();
/// // SAFETY: `raw` is a live DLPack tensor, handed over once.
/// let managed = unsafe { ManagedTensor::from_raw(raw) }?;
/// let t = from_dlpack(managed, &ImportOptions::default())?; // a view: no copy
/// assert!(!t.is_copied());
/// assert_eq!(t.to_vec::<i32>()?, [1, 2, 3, 4]);
/// # Ok::<(), dlport_core::Error>(())
/// ```
pub fn from_dlpack(tensor: ManagedTensor, options: &ImportOptions) -> Result<Tensor, Error> {
    Registry::process_default().from_dlpack(tensor, options)
}

/// Exports a tensor for a DLPack consumer through the default registry
/// ([`Registry::process_default`]), following `__dlpack__`'s `max_version`, `dl_device` and
/// `copy`: a counted reference to the same memory when no copy is needed. See
/// [`Registry::to_dlpack`].
///
/// # Examples
///
/// ```
/// use dlport_core::{ExportOptions, Tensor, to_dlpack};
///
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
/// let exported = to_dlpack(&t, &ExportOptions::default())?; // DLPack 1.3, no copy
/// assert!(exported.is_versioned());
/// assert_eq!(exported.view().first_element_address(), t.first_element_address());
/// // `exported.into_raw()` is the pointer a consumer takes; dropping `exported` releases it.
/// # Ok::<(), dlport_core::Error>(())
/// ```
pub fn to_dlpack(tensor: &Tensor, options: &ExportOptions) -> Result<ManagedTensor, Error> {
    Registry::process_default().to_dlpack(tensor, options)
}
