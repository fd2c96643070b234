//! [`ManagedTensor`]'s conversions: legacy ↔ versioned, and a re-export with a guard attached.
//! Each wraps the owner in a new DLPack block (see `export::block`) without a copy, except a
//! legacy conversion of flags the legacy form cannot carry, which copies.

use core::ffi::c_void;

use super::ManagedTensor;
use crate::abi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor, RawManaged};
use crate::access::Access;
use crate::copy::compact_copy;
use crate::device::Device;
use crate::error::{AccessError, Error, Flag};
use crate::export::{
    ExportBuilder, Form, Header, NewBlock, convert_in_place, host_address, legacy_representable,
};
use crate::options::CopyPolicy;
use crate::storage::{ImportStorage, TensorStorage};
#[cfg(debug_assertions)]
use crate::view::TensorRef;

/// A re-export with a guard value dropped along with it.
pub(crate) struct Guarded<G> {
    inner: ImportStorage,
    _guard: G,
}

// SAFETY: forwards to the inner re-export; the guard does not touch the memory.
unsafe impl<G: Send + 'static> TensorStorage for Guarded<G> {
    fn data_ptr(&mut self) -> *mut c_void {
        self.inner.data_ptr()
    }
    fn byte_len(&self) -> usize {
        self.inner.byte_len()
    }
    fn device(&self) -> Device {
        self.inner.device()
    }
    fn access(&self) -> Access {
        self.inner.access()
    }
}

impl ManagedTensor {
    /// Re-exports as a DLPack 1.3 `DLManagedTensorVersioned` (a no-op if it already is one).
    /// A legacy tensor is wrapped: the new deleter drops it, calling the original deleter once.
    pub fn into_versioned(self) -> Result<ManagedTensor, Error> {
        match self.as_raw() {
            RawManaged::Versioned(_) => Ok(self),
            RawManaged::Legacy(legacy) if self.is_own_block() => {
                // SAFETY: a legacy header dlport wrote into its own block, owned by `self`,
                // whose ownership moves to the versioned tensor.
                let versioned = unsafe { convert_in_place(legacy) };
                let converted = self.with_raw(RawManaged::Versioned(versioned));
                #[cfg(debug_assertions)]
                {
                    let raw = converted.as_raw();
                    let RawManaged::Versioned(p) = raw else {
                        unreachable!()
                    };
                    // SAFETY: the converted tensor is live and owned by `converted`.
                    let revalidated = unsafe {
                        TensorRef::from_raw(&(*p.as_ptr()).dl_tensor, converted.version(), 0)
                    };
                    debug_assert_eq!(
                        revalidated.map(|t| t.layout()),
                        Ok(converted.view().layout())
                    );
                }
                Ok(converted)
            }
            RawManaged::Legacy(_) => Ok(self.rewrap(Form::Versioned, |inner| inner)),
        }
    }

    /// Re-exports as a legacy `DLManagedTensor` (a no-op if it already is one), following
    /// `copy`. The legacy form has no flags: a read-only tensor (READ_ONLY, or read-only
    /// storage) or a padded sub-byte one (IS_SUBBYTE_TYPE_PADDED) reaches a legacy consumer
    /// only as a compact, packed host copy ([`CopyPolicy::IfNeeded`] or
    /// [`CopyPolicy::Always`]), never by dropping the flag: with [`CopyPolicy::Never`] it is
    /// refused with [`AccessError::FlagNotRepresentable`]. IS_COPIED is dropped (it only grants
    /// rights). The original is released on every path.
    ///
    /// [`CopyPolicy::IfNeeded`]: crate::CopyPolicy::IfNeeded
    /// [`CopyPolicy::Always`]: crate::CopyPolicy::Always
    /// [`CopyPolicy::Never`]: crate::CopyPolicy::Never
    pub fn into_legacy(self, copy: CopyPolicy) -> Result<ManagedTensor, Error> {
        let carried = legacy_representable(self.flags()).and_then(|()| {
            if self.is_read_only() {
                Err(Error::Access(AccessError::FlagNotRepresentable {
                    flag: Flag::ReadOnly,
                }))
            } else {
                Ok(())
            }
        });
        match (carried, copy) {
            (Ok(()), CopyPolicy::Never | CopyPolicy::IfNeeded) if !self.is_versioned() => Ok(self),
            (Ok(()), CopyPolicy::Never | CopyPolicy::IfNeeded) => {
                Ok(self.rewrap(Form::Legacy, |inner| inner))
            }
            (Err(e), CopyPolicy::Never) => Err(e),
            (_, _) => {
                let copied = compact_copy(&self.view(), None)?;
                ExportBuilder::new(copied, self.view().dtype(), self.view().shape()).build_legacy()
            }
        }
    }

    /// Re-exports this tensor (no copy) with `guard` attached: the new deleter drops the guard,
    /// then this tensor (calling its deleter once). Useful to keep a foreign object, a stream
    /// event or a counter alive exactly as long as the consumer holds the tensor.
    ///
    /// A legacy re-export of a tensor whose flags the legacy form cannot carry is refused with
    /// [`AccessError::FlagNotRepresentable`] (see [`into_legacy`](Self::into_legacy)).
    pub fn reexport_with<G: Send + 'static>(
        self,
        guard: G,
        versioned: bool,
    ) -> Result<ManagedTensor, Error> {
        let form = if versioned {
            Form::Versioned
        } else {
            legacy_representable(self.flags())?;
            if self.is_read_only() {
                return Err(Error::Access(AccessError::FlagNotRepresentable {
                    flag: Flag::ReadOnly,
                }));
            }
            Form::Legacy
        };
        Ok(self.rewrap(form, move |inner| Guarded {
            inner,
            _guard: guard,
        }))
    }

    /// Wraps this tensor in a new header of `form` (no copy, no re-validation): one small
    /// block with the header and the storage `wrap` makes of the tensor, pointing at this
    /// tensor's own data and arrays, which live until the block's deleter drops it. Only NULL
    /// strides (legacy, < 1.2) are written out, into the block, and host memory's
    /// `byte_offset` is folded into `data` ([`host_address`](crate::backend::host_address)). The
    /// fields are otherwise this tensor's,
    /// which passed validation with the same layout: a versioned 1.3 header adds only the
    /// explicit strides (the compact ones the NULL stood for), a legacy one drops only flags
    /// that `into_legacy` and `reexport_with` proved droppable. Debug builds re-validate.
    fn rewrap<S: TensorStorage>(
        self,
        form: Form,
        wrap: impl FnOnce(ImportStorage) -> S,
    ) -> ManagedTensor {
        match form {
            Form::Versioned => self.rewrap_as::<DLManagedTensorVersioned, S>(wrap),
            Form::Legacy => self.rewrap_as::<DLManagedTensor, S>(wrap),
        }
    }

    #[inline]
    fn rewrap_as<H: Header, S: TensorStorage>(
        self,
        wrap: impl FnOnce(ImportStorage) -> S,
    ) -> ManagedTensor {
        let access = self.access();
        let flags = self.flags();
        let view = self.view();
        let layout = view.layout();
        let ndim = view.ndim();
        let source = *self.dl_tensor();
        let needs_strides = ndim > 0 && source.strides.is_null();
        let block = NewBlock::<H, S>::new(if needs_strides { ndim } else { 0 });
        let strides = if needs_strides {
            let out = block.dims();
            let mut acc = 1i64;
            for (axis, &extent) in view.shape().iter().enumerate().rev() {
                // SAFETY: the block holds ndim values.
                unsafe { out.add(axis).write(acc) };
                // The strides `TensorRef::stride` computes (saturating: an empty tensor's
                // strides may exceed i64 and never matter).
                acc = acc.saturating_mul(extent.max(1));
            }
            out
        } else {
            source.strides
        };
        let (block, _) = block.put_storage(wrap(ImportStorage(self)));
        // The fields every export fills alike (see the module `export`): a 0-d tensor's arrays
        // point at the block's (no) values, never NULL; host memory's offset is in `data`.
        let (data, byte_offset) = host_address(source.data, source.device, source.byte_offset);
        let tensor = if ndim == 0 {
            DLTensor {
                data,
                byte_offset,
                shape: block.dims(),
                strides: block.dims(),
                ..source
            }
        } else {
            DLTensor {
                data,
                byte_offset,
                strides,
                ..source
            }
        };
        #[cfg(debug_assertions)]
        {
            let (version, flags) = if H::LEGACY {
                (None, 0)
            } else {
                (Some(crate::abi::DLPackVersion::CURRENT), flags)
            };
            // SAFETY: the arrays belong to the wrapped tensor (alive in the block) or to the
            // block itself.
            let revalidated = unsafe { TensorRef::from_raw(&tensor, version, flags) };
            debug_assert_eq!(revalidated.map(|t| t.layout()), Ok(layout));
        }
        let raw = block.finish(tensor, flags);
        // SAFETY: owned and fully initialised; valid with the wrapped tensor's layout by
        // construction (above); `access` is what the wrapped tensor had.
        unsafe { ManagedTensor::from_raw_validated(raw, layout, access) }
    }
}
