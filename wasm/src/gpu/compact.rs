//! WebGPU → WebGPU compaction: any layout and offset into a new compact tensor, by the
//! `compact.wgsl` gather (or a bare buffer copy when the source is already compact and
//! word-aligned). The CPU never touches the data.

use std::sync::Arc;

use dlport_core::Tensor;
use dlport_core::backend::{Buffer, compact_bytes};
use dlport_core::{Error, TensorRef};

use super::kernel::COMPACT;
use super::{GpuDevice, MAX_GPU_NDIM, NAME, error};

impl GpuDevice {
    /// WebGPU → WebGPU: a compact copy of any layout and offset, done by a compute shader that
    /// gathers bytes (whole-word `copyBufferToBuffer` when the source is already compact and
    /// 4-aligned). The CPU never touches the data.
    pub fn compact_on_gpu(self: &Arc<Self>, src: &TensorRef<'_>) -> Result<Tensor, Error> {
        let len = compact_bytes(src.dtype(), src.shape())? as u64;
        let (from, from_size) = self.source_of(src)?;
        let storage = self.alloc(len)?;
        let to = storage.wgpu_buffer();
        let out = Tensor::new(
            Buffer::new(Box::new(storage)),
            NAME,
            src.dtype(),
            src.shape(),
            None,
            0,
            0,
        )?;
        if len == 0 {
            return Ok(out.with_copied(true));
        }
        if src.contiguity().is_row_major()
            && src.byte_offset().is_multiple_of(4)
            && len.is_multiple_of(4)
        {
            self.copy_range(&from, src.byte_offset(), &to, 0, len)?;
        } else {
            let params = compaction_params(src, from_size, len)?;
            self.dispatch(
                &COMPACT,
                &from,
                from_size,
                &to,
                bytemuck::cast_slice(&params),
                len.div_ceil(4),
            )?;
        }
        Ok(out.with_copied(true))
    }
}

/// The compaction kernel's parameters: ndim, elem, out_bytes, src_offset, then shape[8] (u32)
/// and strides[8] (i32).
fn compaction_params(
    src: &TensorRef<'_>,
    from_size: u64,
    len: u64,
) -> Result<[u32; 4 + 2 * MAX_GPU_NDIM], Error> {
    let bits = src.layout().element_bits;
    if bits % 8 != 0 || src.ndim() > MAX_GPU_NDIM {
        return Err(error::unsupported(
            "GPU compaction of packed sub-byte tensors or tensors of more than 8 axes",
        ));
    }
    let elem = bits / 8;
    let lo = i64::try_from(src.byte_offset()).unwrap_or(i64::MAX) + src.byte_span().lo;
    if lo < 0
        || src.byte_offset() + src.byte_span().hi as u64 > from_size
        || len > u64::from(u32::MAX)
    {
        return Err(error::storage_too_small(
            src.byte_offset() + src.byte_span().hi as u64,
            from_size,
        ));
    }
    let mut params = [0u32; 4 + 2 * MAX_GPU_NDIM];
    params[0] = src.ndim() as u32;
    params[1] = elem;
    params[2] = len as u32;
    params[3] = src.byte_offset() as u32;
    for (k, (&e, s)) in src.shape().iter().zip(src.strides()).enumerate() {
        params[4 + k] = e as u32;
        params[4 + MAX_GPU_NDIM + k] = s as i32 as u32;
    }
    Ok(params)
}
