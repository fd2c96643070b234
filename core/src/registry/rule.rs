//! The view rule of every import: a view, one copy, or a refusal naming the reason. The
//! registry's own imports ([`Registry::from_dlpack`](super::Registry::from_dlpack)) and a
//! chosen backend's ([`Registry::decide_on`](super::Registry::decide_on)) both decide by it.

use crate::backend::Backend;
use crate::device::{Device, DeviceField, reconcile_device};
use crate::error::{CopyReason, DispatchError, Error};
use crate::options::{CopyPolicy, Decision, ImportOptions};
use crate::view::TensorRef;

/// The checks of an import's `options` before any rule (a requirement's alignment, the call's
/// `max_alloc`), and its two devices: where the memory is (the view's device, reconciled with
/// `options.advertised`) and the target (`options.device`, checked, else the memory's).
#[inline(always)]
pub(super) fn devices(
    view: &TensorRef<'_>,
    options: &ImportOptions,
) -> Result<(Device, Device), Error> {
    if let Some(r) = options.requirements {
        crate::options::check_alignment(r.alignment as u64)?;
    }
    crate::limit::check_max_alloc(options.max_alloc)?;
    let memory = reconcile_device(view.device(), options.advertised)?;
    let target = match options.device {
        Some(d) => d.check(DeviceField::Requested)?,
        None => memory,
    };
    Ok((memory, target))
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
