//! Compaction as a registry operation: [`Registry::compact`], a row-major, packed, aligned
//! tensor with a tensor's elements, on its device: the tensor itself when it already is one,
//! else a copy through the registry's copy (the backends' copies, core's copy kernels on the
//! host), checked against the allocation limit in force first.

use super::Registry;
use crate::abi::FLAG_IS_SUBBYTE_TYPE_PADDED;
use crate::copy::CPU_ALIGN;
use crate::error::{CopyReason, DispatchError, Error};
use crate::options::{CompactOptions, CopyPolicy, LayoutNeed, ViewRequirements, check_alignment};
use crate::tensor::Tensor;

impl Registry {
    /// A row-major compact tensor with `t`'s elements, on `t`'s device, its first element
    /// aligned to `options.alignment` (default: [`CPU_ALIGN`] in host-accessible memory, none
    /// on a device). With [`CopyPolicy::IfNeeded`] (the default) a tensor that already is one
    /// (row-major, sub-byte elements packed, aligned) comes back itself: another handle onto
    /// the same buffer, no copy. Otherwise (strided, transposed, broadcast, negative strides,
    /// padded sub-byte elements, misaligned, or [`CopyPolicy::Always`]) it is a copy made
    /// through the backends' copies ([`Backend::copy`](crate::backend::Backend::copy): on the
    /// host, core's one strided → compact copy), marked IS_COPIED, exclusively owned and
    /// writable. With [`CopyPolicy::Never`] a tensor that needs a copy is
    /// [`DispatchError::CopyRequired`] saying why.
    ///
    /// Errors, before anything is allocated: an alignment that is not a power of two up to
    /// [`MAX_ALIGNMENT`](crate::backend::MAX_ALIGNMENT) is
    /// [`DispatchError::InvalidOption`]; a copy over the limit in force (the lowest of
    /// `options.max_alloc`, this registry's and the process's) is
    /// [`DispatchError::AllocationLimit`]. A device copy that misses an alignment above 1 is
    /// [`DispatchError::InvalidOption`] (only host copies are re-aligned); a released buffer is
    /// [`AccessError::BufferReleased`](crate::error::AccessError::BufferReleased).
    pub fn compact(&self, t: &Tensor, options: &CompactOptions) -> Result<Tensor, Error> {
        crate::limit::check_max_alloc(options.max_alloc)?;
        let own = t.device();
        let alignment = match options.alignment {
            Some(a) => check_alignment(a as u64)?,
            None if own.is_host_accessible() => CPU_ALIGN,
            None => 1,
        };
        let view = t.view()?;
        let view = view.tensor_ref();
        let need = ViewRequirements {
            layout: LayoutNeed::RowMajor,
            alignment,
        };
        // The compact form of a sub-byte tensor is packed.
        let padded = t.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED != 0 && t.dtype().is_sub_byte();
        let reason = need.unmet(&view).or(padded.then_some(CopyReason::Packed));
        match (reason, options.copy) {
            (None, CopyPolicy::IfNeeded | CopyPolicy::Never) => return Ok(t.clone()),
            (Some(reason), CopyPolicy::Never) => {
                return Err(Error::Dispatch(DispatchError::CopyRequired { reason }));
            }
            _ => {}
        }
        let copied = self.copy_view(
            &view,
            t.buffer().device(),
            own,
            alignment,
            options.max_alloc,
        )?;
        Ok(copied.with_copied(true))
    }
}
