//! The view rule of every import ([`view_rule`]: view, one copy, or a refusal naming the
//! reason), and [`Registry::decide_on`], the decision for a chosen backend that does the
//! import with its own mechanism (a PJRT client importing into its buffers).

use super::Registry;
use crate::backend::Backend;
use crate::device::{Device, DeviceField, reconcile_device};
use crate::error::{CopyReason, DispatchError, Error};
use crate::options::{CopyPolicy, Decision, ImportOptions};
use crate::view::TensorRef;

impl Registry {
    /// Decides, as [`decide`](Self::decide) does, how an import onto a chosen `backend` (one
    /// that need not be registered here: a PJRT client importing into its own buffers) would
    /// go: the same checks of `options`, the same view rule for that backend (its
    /// [`can_access`](Backend::can_access) and
    /// [`view_obstacle`](Backend::view_obstacle), then `options.requirements`) and the same
    /// copy policy; the target is `options.device`, else the memory's own device. The
    /// backend then does what was decided with its own mechanism, a copy after checking its
    /// size against [`alloc_limit`](Self::alloc_limit).
    pub fn decide_on(
        &self,
        backend: &dyn Backend,
        view: &TensorRef<'_>,
        options: &ImportOptions,
    ) -> Result<Decision, Error> {
        if let Some(r) = options.requirements {
            crate::options::check_alignment(r.alignment as u64)?;
        }
        crate::limit::check_max_alloc(options.max_alloc)?;
        let memory = reconcile_device(view.device(), options.advertised)?;
        let target = match options.device {
            Some(d) => d.check(DeviceField::Requested)?,
            None => memory,
        };
        view_rule(backend, view, memory, target, options)
    }
}

/// The view rule of every import: a view when `backend` reaches `memory`, the memory presents
/// itself as `target`, and neither the backend ([`Backend::view_obstacle`]) nor the caller's
/// `options.requirements` finds an obstacle; else a copy where `options.copy` allows, else
/// [`DispatchError::CopyRequired`] naming the reason.
#[inline(always)]
pub(super) fn view_rule(
    backend: &dyn Backend,
    view: &TensorRef<'_>,
    memory: Device,
    target: Device,
    options: &ImportOptions,
) -> Result<Decision, Error> {
    // A view is the memory itself, presented as the device it presents to this request
    // (`Device::presented`, the rule of exports too): only when that is the target can the
    // import be a view. So host memory is never presented as pinned or managed memory it is
    // not (plain `cpu` memory asked for `cuda_host` needs a copy into pinned memory, which
    // only a backend that makes pinned memory can give), whatever the copy policy.
    let copy_reason = if !backend.can_access(memory) || memory.presented(Some(target)) != target {
        Some(CopyReason::Device {
            from: memory,
            to: target,
        })
    } else {
        backend
            .view_obstacle(view)
            .or_else(|| options.requirements.and_then(|r| r.unmet(view)))
    };
    let copies = match (copy_reason, options.copy) {
        (_, CopyPolicy::Always) | (Some(_), CopyPolicy::IfNeeded) => true,
        (None, _) => false,
        (Some(reason), CopyPolicy::Never) => {
            return Err(Error::Dispatch(DispatchError::CopyRequired { reason }));
        }
    };
    Ok(Decision {
        memory,
        target,
        backend: backend.name(),
        copy_reason,
        copies,
    })
}
