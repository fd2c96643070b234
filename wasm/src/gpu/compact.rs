//! WebGPU → WebGPU compaction: any layout and offset into a new compact tensor, by a bare
//! buffer copy when the source is already compact and word-aligned, else by a gather kernel.
//!
//! The layout is simplified first (axes of extent 1 dropped, axes that continue each other
//! merged), then the kernel is picked for it: a contiguous run at an odd offset is shifted
//! (`compact_run.wgsl`); rows of a multiple of 16 bytes of 4-, 8- or 16-byte elements at a word
//! offset, of 2-byte elements at an even offset, or of bytes, are gathered 16 output bytes per
//! invocation with one index computation (`compact_words`, `compact_u16`, `compact_u8`);
//! anything else is gathered byte by byte (`compact_any`). On a software adapter (lavapipe) a
//! kernel costs every branch it contains, taken or not, so each layout class has its own.

use std::sync::Arc;

use dlport_core::backend::{Buffer, compact_bytes};
use dlport_core::{Error, Tensor, TensorRef};

use super::kernel::{COMPACT_ANY, COMPACT_RUN, COMPACT_U8, COMPACT_U16, COMPACT_WORDS, Kernel};
use super::{GpuDevice, MAX_GPU_NDIM, NAME, error, round_up};

impl GpuDevice {
    /// WebGPU → WebGPU: a compact copy of any layout and offset, done by a compute shader that
    /// gathers bytes (whole-word `copyBufferToBuffer` when the source is already compact and
    /// 4-aligned). The CPU never touches the data.
    pub fn compact_on_gpu(self: &Arc<Self>, src: &TensorRef<'_>) -> Result<Tensor, Error> {
        let len = compact_bytes(src.dtype(), src.shape())? as u64;
        let (from, from_size) = self.source_of(src)?;
        let storage = self.alloc(len)?;
        let to = storage.wgpu_buffer();
        let out = Tensor::builder(
            Buffer::new(Box::new(storage)),
            NAME,
            src.dtype(),
            src.shape(),
        )
        .build()?;
        if len == 0 {
            return Ok(out.with_copied(true));
        }
        if src.contiguity().is_row_major()
            && src.byte_offset().is_multiple_of(4)
            && len.is_multiple_of(4)
        {
            self.copy_range(&from, src.byte_offset(), &to, 0, len)?;
        } else {
            let plan = plan(src, from_size, len)?;
            self.dispatch(
                plan.kernel,
                &from,
                from_size,
                &to,
                bytemuck::cast_slice(&plan.params),
                len.div_ceil(plan.bytes_per_invocation),
            )?;
        }
        Ok(out.with_copied(true))
    }
}

/// A compaction: the kernel, its parameters and the output bytes each invocation writes.
struct Plan {
    kernel: &'static Kernel,
    /// ndim, elem, out_bytes, src_offset, then shape[8] (u32) and strides[8] (i32), of the
    /// simplified layout.
    params: [u32; 4 + 2 * MAX_GPU_NDIM],
    bytes_per_invocation: u64,
}

/// The layout with axes of extent 1 dropped and each axis merged into the one before it
/// where that one steps over it exactly (`stride[k] == stride[k + 1] · shape[k + 1]`): the
/// same elements in the same row-major order, in as few axes as possible (one, for a compact
/// tensor).
fn simplify(shape: &[i64], strides: &[i64]) -> (Vec<i64>, Vec<i64>) {
    let (mut s, mut t): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    for (&e, &st) in shape.iter().zip(strides) {
        if e == 1 {
            continue;
        }
        match (s.last_mut(), t.last_mut()) {
            (Some(pe), Some(pt)) if *pt == st * e => {
                *pe *= e;
                *pt = st;
            }
            _ => {
                s.push(e);
                t.push(st);
            }
        }
    }
    if s.is_empty() {
        (vec![1], vec![1])
    } else {
        (s, t)
    }
}

/// Checks the source's bounds and picks the kernel for its (simplified) layout.
fn plan(src: &TensorRef<'_>, from_size: u64, len: u64) -> Result<Plan, Error> {
    let bits = src.layout().element_bits;
    let strides: Vec<i64> = src.strides().collect();
    let (shape, strides) = simplify(src.shape(), &strides);
    if bits % 8 != 0 || shape.len() > MAX_GPU_NDIM {
        return Err(error::unsupported(
            "GPU compaction of packed sub-byte tensors or tensors of more than 8 axes",
        ));
    }
    let elem = u64::from(bits / 8);
    let offset = src.byte_offset();
    let lo = i64::try_from(offset).unwrap_or(i64::MAX) + src.byte_span().lo;
    let needed = offset + src.byte_span().hi as u64;
    // The source is bound as whole words: the word holding the last byte must be in it.
    if lo < 0 || round_up(needed, 4) > from_size / 4 * 4 || len > u64::from(u32::MAX) {
        return Err(error::storage_too_small(round_up(needed, 4), from_size));
    }
    let row_bytes = *shape.last().expect("at least one axis") as u64 * elem;
    let rows_of_16 = row_bytes.is_multiple_of(16);
    let (kernel, bytes_per_invocation) = match elem {
        _ if shape.len() == 1 && strides[0] == 1 => (&COMPACT_RUN, 16),
        4 | 8 | 16 if offset.is_multiple_of(4) && rows_of_16 => (&COMPACT_WORDS, 16),
        2 if offset.is_multiple_of(2) && rows_of_16 => (&COMPACT_U16, 16),
        1 if rows_of_16 => (&COMPACT_U8, 16),
        _ => (&COMPACT_ANY, 4),
    };
    let mut params = [0u32; 4 + 2 * MAX_GPU_NDIM];
    params[0] = shape.len() as u32;
    params[1] = elem as u32;
    params[2] = len as u32;
    params[3] = offset as u32;
    for (k, (&e, &s)) in shape.iter().zip(&strides).enumerate() {
        params[4 + k] = e as u32;
        params[4 + MAX_GPU_NDIM + k] = s as i32 as u32;
    }
    Ok(Plan {
        kernel,
        params,
        bytes_per_invocation,
    })
}

#[cfg(test)]
mod tests {
    use super::{plan, simplify};
    use core::ffi::c_void;
    use dlport_core::backend::TensorStorage;
    use dlport_core::{DataType, Device, ExportBuilder};

    /// 4 KiB that claim to be a WebGPU buffer, so that the export keeps its `byte_offset` apart
    /// from `data`, as a buffer-table handle's does (host memory's is folded into `data`).
    struct OnGpu(Vec<u8>);

    // SAFETY: the Vec's heap buffer does not move with the value and is owned by the export
    // alone; the tests only plan over the view and never read through `data`.
    unsafe impl TensorStorage for OnGpu {
        fn data_ptr(&mut self) -> *mut c_void {
            self.0.as_mut_ptr().cast()
        }
        fn byte_len(&self) -> usize {
            self.0.len()
        }
        fn device(&self) -> Device {
            Device::webgpu(0)
        }
    }

    /// The kernel `plan` picks for a layout over a 4 KiB buffer.
    fn kernel(dtype: DataType, shape: &[i64], strides: &[i64], offset: u64) -> &'static str {
        let m = ExportBuilder::new(OnGpu(vec![0u8; 4096]), dtype, shape)
            .strides(strides)
            .byte_offset(offset)
            .build()
            .unwrap();
        let view = m.view();
        let len = (view.numel() * dtype.size_bytes() as u64).max(1);
        plan(&view, 4096, len).unwrap().kernel.label
    }

    #[test]
    fn each_layout_class_gets_its_kernel() {
        use DataType as D;
        let run = "dlport compact (run)";
        let words = "dlport compact (words)";
        let any = "dlport compact (any)";
        assert_eq!(kernel(D::UINT8, &[37], &[1], 3), run);
        assert_eq!(kernel(D::FLOAT32, &[5, 1, 7], &[7, 3, 1], 2), run);
        assert_eq!(kernel(D::FLOAT64, &[2, 4], &[-4, -1], 56), words);
        assert_eq!(kernel(D::COMPLEX128, &[4, 4], &[1, 4], 16), words);
        assert_eq!(kernel(D::FLOAT32, &[1, 4, 12], &[5, 1, 4], 4), words);
        assert_eq!(
            kernel(D::FLOAT32, &[5, 3], &[1, 5], 0),
            any,
            "rows of 12 bytes"
        );
        assert_eq!(kernel(D::FLOAT32, &[8, 16], &[1, 8], 2), any, "offset 2");
        assert_eq!(
            kernel(D::FLOAT16, &[4, 8], &[1, 4], 2),
            "dlport compact (u16)"
        );
        assert_eq!(kernel(D::FLOAT16, &[4, 8], &[1, 4], 1), any, "odd offset");
        assert_eq!(
            kernel(D::UINT8, &[3, 16], &[1, 3], 5),
            "dlport compact (u8)"
        );
        assert_eq!(
            kernel(D::UINT8, &[4, 32], &[0, 1], 1),
            "dlport compact (u8)"
        );
        assert_eq!(
            kernel(D::UINT8, &[5, 7], &[0, 1], 3),
            any,
            "rows of 7 bytes"
        );
        // 12-byte elements (3 lanes of float32) are gathered byte by byte.
        let rgb = DataType {
            lanes: 3,
            ..D::FLOAT32
        };
        assert_eq!(kernel(rgb, &[4, 4], &[1, 4], 0), any);
    }

    #[test]
    fn layouts_simplify_to_the_fewest_axes_in_the_same_order() {
        // Compact: one axis.
        assert_eq!(simplify(&[2, 3, 4], &[12, 4, 1]), (vec![24], vec![1]));
        // Reversed throughout: one axis, stepping back.
        assert_eq!(simplify(&[4, 8], &[-8, -1]), (vec![32], vec![-1]));
        // A transpose stays two axes; extent-1 axes go, whatever their stride.
        assert_eq!(
            simplify(&[1, 8, 1, 16], &[99, 1, 7, 8]),
            (vec![8, 16], vec![1, 8])
        );
        // Broadcast rows: the zero stride does not continue the row.
        assert_eq!(simplify(&[5, 7], &[0, 1]), (vec![5, 7], vec![0, 1]));
        // A gap stops a merge: blocks of 2 × 2 bytes every 8, in 2 × 3 rows of blocks.
        assert_eq!(
            simplify(&[2, 3, 2, 2], &[24, 8, 2, 1]),
            (vec![6, 4], vec![8, 1])
        );
        // A scalar, and all-ones: one element.
        assert_eq!(simplify(&[], &[]), (vec![1], vec![1]));
        assert_eq!(simplify(&[1, 1], &[5, 3]), (vec![1], vec![1]));
    }
}
