//! Dispatch: the [`Registry`] of backends, the options of an import or export, and the
//! backend [`Tensor`] with the [`Buffer`] under it.

mod buffer;
mod registry;

pub use buffer::{Buffer, SharedBuffer, Tensor, TensorView};
pub use registry::{
    CopyPolicy, Decision, ExportOptions, ImportOptions, MAX_ALIGNMENT, Registry, reconcile_device,
};
