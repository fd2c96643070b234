//! Transfers: host → device (`upload`), device → host (`download`) and the word-sized buffer
//! copies under them. WebGPU copies move whole 4-byte words, so an unaligned range is widened
//! to word boundaries inside the 16-byte-padded buffers (a padded copy).

use std::sync::Arc;

use dlport_core::backend::{Buffer, compact_bytes};
use dlport_core::{Error, Tensor, TensorRef};

use super::{GpuDevice, NAME, Source, error, round_up};

impl GpuDevice {
    /// Copies `size` bytes (a multiple of 4) from `src` at `from` to `dst` at `to`, on the GPU.
    pub(super) fn copy_range(
        &self,
        src: &Source,
        from: u64,
        dst: &wgpu::Buffer,
        to: u64,
        size: u64,
    ) -> Result<(), Error> {
        match src {
            Source::Wgpu(buffer) => {
                let mut enc = self.device.create_command_encoder(&Default::default());
                enc.copy_buffer_to_buffer(buffer, from, dst, to, size);
                self.queue.submit([enc.finish()]);
                Ok(())
            }
            #[cfg(target_arch = "wasm32")]
            Source::Js(buffer) => {
                crate::foreign_buffer::copy(&self.device, buffer, from, dst, to, size)
            }
        }
    }

    /// Host tensor (any host-accessible memory, any layout) → a compact WebGPU tensor whose
    /// first element sits at `byte_offset` in its buffer.
    pub fn upload(
        self: &Arc<Self>,
        src: &TensorRef<'_>,
        byte_offset: u64,
    ) -> Result<Tensor, Error> {
        if !src.device().is_host_accessible() {
            return Err(error::not_host_accessible(src.device()));
        }
        let len = compact_bytes(src.dtype(), src.shape())?;
        // A compact source at a word-aligned place goes straight to the queue, with no staging.
        if src.contiguity().is_row_major()
            && byte_offset.is_multiple_of(4)
            && (len as u64).is_multiple_of(4)
            && len > 0
        {
            let storage = self.alloc(byte_offset + len as u64)?;
            self.queue
                .write_buffer(&storage.wgpu_buffer(), byte_offset, src.as_bytes()?);
            self.queue.submit(std::iter::empty());
            return Tensor::builder(
                Buffer::new(Box::new(storage)),
                NAME,
                src.dtype(),
                src.shape(),
            )
            .byte_offset(byte_offset)
            .build();
        }
        // Stage [round_down4(offset), round_up4(offset + len)) so that the write is whole words.
        let start = byte_offset / 4 * 4;
        let end = round_up(byte_offset + len as u64, 4);
        let mut staged = vec![0u8; (end - start) as usize];
        let lead = (byte_offset - start) as usize;
        src.copy_to_compact(&mut staged[lead..lead + len])?;
        let storage = self.alloc(end)?;
        if !staged.is_empty() {
            self.queue
                .write_buffer(&storage.wgpu_buffer(), start, &staged);
        }
        self.queue.submit(std::iter::empty());
        Tensor::builder(
            Buffer::new(Box::new(storage)),
            NAME,
            src.dtype(),
            src.shape(),
        )
        .byte_offset(byte_offset)
        .build()
    }

    /// WebGPU tensor → its elements as compact bytes, in row-major order (a strided tensor is
    /// compacted on the GPU first). Natively this blocks on the device; on wasm it awaits the
    /// buffer mapping.
    pub async fn download(self: &Arc<Self>, t: &TensorRef<'_>) -> Result<Vec<u8>, Error> {
        let len = compact_bytes(t.dtype(), t.shape())?;
        if len == 0 {
            return Ok(Vec::new());
        }
        // A strided tensor is compacted on the GPU first; `_compacted` keeps that buffer in the
        // table until the readback is done.
        let (source, offset, _compacted) = if t.contiguity().is_row_major() {
            (self.source_of(t)?.0, t.byte_offset(), None)
        } else {
            let c = self.compact_on_gpu(t)?;
            let (source, offset) = {
                let guard = c.view()?;
                let view = guard.tensor_ref();
                (self.source_of(&view)?.0, view.byte_offset())
            };
            (source, offset, Some(c))
        };
        let start = offset / 4 * 4;
        let end = round_up(offset + len as u64, 4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dlport readback"),
            size: end - start,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.copy_range(&source, start, &staging, 0, end - start)?;
        let (tx, rx) = futures_channel::oneshot::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|_| {
                error::backend("poll", "the device was lost while waiting for a readback")
            })?;
        rx.await
            .map_err(|_| error::backend("mapAsync", "the readback was cancelled"))?
            .map_err(|_| error::backend("mapAsync", "mapping the readback buffer failed"))?;
        let lead = (offset - start) as usize;
        let out = {
            let view = staging.slice(..).get_mapped_range().map_err(|_| {
                error::backend("getMappedRange", "the readback buffer is not mapped")
            })?;
            view[lead..lead + len].to_vec()
        };
        staging.unmap();
        Ok(out)
    }
}
