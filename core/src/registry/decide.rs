//! [`Registry::decide_on`]: the decision of an import for a chosen backend that does the
//! import with its own mechanism (a PJRT client importing into its buffers), by the one view
//! rule of every import (`rule.rs`).

use super::Registry;
use super::rule::{devices, view_rule};
use crate::backend::Backend;
use crate::error::Error;
use crate::options::{Decision, ImportOptions};
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
        let (memory, target) = devices(view, options)?;
        view_rule(backend, view, memory, target, options)
    }
}
