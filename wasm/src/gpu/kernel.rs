//! The compute kernels: `(label, WGSL)` pairs with one binding convention (the source at 0,
//! the destination at 1, a uniform at 2, entry point `main`), their pipelines cached per device
//! by label, and their dispatch. Parameters are written at the uniform's creation, never with
//! `writeBuffer`.

use std::borrow::Cow;

use dlport_core::Error;
use wgpu::util::DeviceExt;

use super::{GpuDevice, Source, error};

/// A compute kernel: a label (also its pipeline-cache key) and its WGSL, whose entry point
/// `main` binds the source at 0, the destination at 1 and a uniform at 2.
pub(crate) struct Kernel {
    pub(crate) label: &'static str,
    pub(crate) wgsl: &'static str,
}

/// A compaction kernel: `compact_common.wgsl` followed by the kernel's own file.
macro_rules! compaction {
    ($label:literal, $file:literal) => {
        Kernel {
            label: $label,
            wgsl: concat!(include_str!("compact_common.wgsl"), include_str!($file)),
        }
    };
}

/// Strided → compact, any element size, offset and layout, byte by byte (`compact_any.wgsl`).
pub(super) const COMPACT_ANY: Kernel = compaction!("dlport compact (any)", "compact_any.wgsl");

/// Strided → compact for 4-, 8- and 16-byte elements, word by word (`compact_words.wgsl`).
pub(super) const COMPACT_WORDS: Kernel =
    compaction!("dlport compact (words)", "compact_words.wgsl");

/// Strided → compact for 2-byte elements (`compact_u16.wgsl`).
pub(super) const COMPACT_U16: Kernel = compaction!("dlport compact (u16)", "compact_u16.wgsl");

/// Strided → compact for 1-byte elements (`compact_u8.wgsl`).
pub(super) const COMPACT_U8: Kernel = compaction!("dlport compact (u8)", "compact_u8.wgsl");

/// A contiguous run at any byte offset, shifted into place (`compact_run.wgsl`).
pub(super) const COMPACT_RUN: Kernel = compaction!("dlport compact (run)", "compact_run.wgsl");

/// `(x · scale − mean[c]) / std[c]` (`normalize.wgsl`).
pub(super) const NORMALIZE: Kernel = Kernel {
    label: "dlport normalize",
    wgsl: include_str!("normalize.wgsl"),
};

/// Threads per workgroup, as every kernel's `@workgroup_size` says.
pub(super) const WORKGROUP: u64 = 64;

impl GpuDevice {
    /// Runs a one-source, one-destination compute kernel over `invocations` threads
    /// (workgroups of [`WORKGROUP`]), with `params` in a uniform buffer written at creation (no
    /// `writeBuffer`). The source is bound as its first `src_size` bytes, rounded down to words.
    pub(super) fn dispatch(
        &self,
        kernel: &Kernel,
        src: &Source,
        src_size: u64,
        dst: &wgpu::Buffer,
        params: &[u8],
        invocations: u64,
    ) -> Result<(), Error> {
        let groups = invocations.div_ceil(WORKGROUP);
        let (x, y) = (groups.min(65535) as u32, groups.div_ceil(65535));
        let bind_size = src_size / 4 * 4;
        if y > 65535 || bind_size == 0 {
            return Err(error::backend(
                "dispatch",
                "the tensor is empty or larger than one dispatch covers (2^38 elements)",
            ));
        }
        let y = y as u32;
        match src {
            Source::Wgpu(from) => {
                let pipeline = self.pipeline(kernel);
                let uniform = self
                    .device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some(kernel.label),
                        contents: params,
                        usage: wgpu::BufferUsages::UNIFORM,
                    });
                let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(kernel.label),
                    layout: &pipeline.get_bind_group_layout(0),
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: from,
                                offset: 0,
                                size: std::num::NonZeroU64::new(bind_size),
                            }),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: dst.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: uniform.as_entire_binding(),
                        },
                    ],
                });
                let mut enc = self.device.create_command_encoder(&Default::default());
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    pass.set_pipeline(&pipeline);
                    pass.set_bind_group(0, &bind, &[]);
                    pass.dispatch_workgroups(x, y, 1);
                }
                self.queue.submit([enc.finish()]);
                Ok(())
            }
            #[cfg(target_arch = "wasm32")]
            Source::Js(from) => crate::foreign_buffer::dispatch(
                &self.device,
                kernel.label,
                kernel.wgsl,
                from,
                bind_size,
                dst,
                params,
                x,
                y,
            ),
        }
    }

    fn pipeline(&self, kernel: &Kernel) -> wgpu::ComputePipeline {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(kernel.label)
            .or_insert_with(|| {
                let module = self
                    .device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(kernel.label),
                        source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(kernel.wgsl)),
                    });
                self.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(kernel.label),
                        layout: None,
                        module: &module,
                        entry_point: Some("main"),
                        compilation_options: Default::default(),
                        cache: None,
                    })
            })
            .clone()
    }
}
