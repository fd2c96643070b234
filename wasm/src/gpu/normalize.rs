//! The normalization kernel (`normalize.wgsl`): `out = (x · scale − mean[c]) / std[c]`, `c` the
//! index along the last axis, into a new compact float32 WebGPU tensor.

use std::sync::Arc;

use dlport_core::backend::{Buffer, compact_bytes};
use dlport_core::{DataType, Tensor, TensorRef};

use super::kernel::NORMALIZE;
use super::{GpuDevice, KernelError, MAX_CHANNELS, NAME, error, round_up};

/// Options of [`GpuDevice::normalize`]: `out = (x · scale − mean[c]) / std[c]`.
#[derive(Clone, Copy, Debug)]
pub struct Normalize<'a> {
    /// One mean, or one per channel (the last axis).
    pub mean: &'a [f32],
    /// One standard deviation, or one per channel; none may be 0 or non-finite.
    pub std: &'a [f32],
    /// Applied to the input first (1/255 turns bytes into [0, 1]).
    pub scale: f32,
}

impl GpuDevice {
    /// The normalization kernel: `out = (x · scale − mean[c]) / std[c]`, `c` the index along
    /// the last axis, into a new compact float32 WebGPU tensor of the same shape. Reads
    /// float32, int32, uint32 and uint8 tensors (a strided one is compacted on the GPU first);
    /// `mean` and `std` hold one value, or one per channel (at most [`MAX_CHANNELS`]).
    pub fn normalize(
        self: &Arc<Self>,
        src: &TensorRef<'_>,
        options: &Normalize<'_>,
    ) -> Result<Tensor, KernelError> {
        let kind = match src.dtype() {
            DataType::FLOAT32 => 0u32,
            DataType::INT32 => 1,
            DataType::UINT32 => 2,
            DataType::UINT8 => 3,
            dtype => return Err(KernelError::InputDtype { dtype }),
        };
        let channels = src.shape().last().copied().unwrap_or(1).max(1);
        for (name, values) in [("mean", options.mean), ("std", options.std)] {
            if values.len() != 1 && values.len() as i64 != channels || values.len() > MAX_CHANNELS {
                return Err(KernelError::ChannelCount {
                    name,
                    len: values.len(),
                    channels,
                });
            }
        }
        if let Some((channel, &value)) = options
            .std
            .iter()
            .enumerate()
            .find(|(_, v)| **v == 0.0 || !v.is_finite())
        {
            return Err(KernelError::BadStd { channel, value });
        }
        if !options.scale.is_finite() {
            return Err(KernelError::BadScale {
                value: options.scale,
            });
        }
        if !src.contiguity().is_row_major() {
            let compact = self.compact_on_gpu(src)?;
            let guard = compact.view()?;
            return self.normalize(&guard.tensor_ref(), options);
        }
        let elements = src.numel();
        let align = if kind == 3 { 1 } else { 4 };
        if !src.byte_offset().is_multiple_of(align) {
            return Err(KernelError::Misaligned {
                byte_offset: src.byte_offset(),
                required: align,
            });
        }
        let storage = self.alloc(elements * 4)?;
        let to = storage.wgpu_buffer();
        let out = Tensor::builder(
            Buffer::new(Box::new(storage)),
            NAME,
            DataType::FLOAT32,
            src.shape(),
        )
        .build()?;
        if elements == 0 {
            return Ok(out);
        }
        if elements > u64::from(u32::MAX) || src.byte_offset() > u64::from(u32::MAX) {
            return Err(KernelError::TooLarge { elements });
        }
        // Params: n, channels, kind, src_offset, scale, 3 × pad, mean[64], std[64].
        let mut params = [0u32; 8 + 2 * MAX_CHANNELS];
        params[0] = elements as u32;
        params[1] = channels as u32;
        params[2] = kind;
        params[3] = src.byte_offset() as u32;
        params[4] = options.scale.to_bits();
        for c in 0..channels as usize {
            let pick = |v: &[f32]| if v.len() == 1 { v[0] } else { v[c] };
            params[8 + c] = pick(options.mean).to_bits();
            params[8 + MAX_CHANNELS + c] = pick(options.std).to_bits();
        }
        let (from, from_size) = self.source_of(src)?;
        let needed = src.byte_offset() + compact_bytes(src.dtype(), src.shape())? as u64;
        // The source is bound as whole words: the word holding the last byte must be in it.
        if round_up(needed, 4) > from_size / 4 * 4 {
            return Err(error::storage_too_small(round_up(needed, 4), from_size).into());
        }
        self.dispatch(
            &NORMALIZE,
            &from,
            from_size,
            &to,
            bytemuck::cast_slice(&params),
            elements,
        )?;
        Ok(out)
    }
}
