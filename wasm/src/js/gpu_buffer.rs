//! `Tensor.fromGpuBuffer`: someone else's `GPUBuffer` (TF.js, onnxruntime-web) as a WebGPU
//! tensor, without a copy, with the owner's release callback as its deleter.

use dlport_core::backend::Buffer;
use dlport_core::{DataType, Tensor as CoreTensor};
use wasm_bindgen::prelude::*;

use super::args::{self, Release, refuse};
use super::{Tensor, backend};
use crate::gpu::NAME as WEBGPU;

#[wasm_bindgen(typescript_custom_section)]
const TS_GPU_BUFFER: &'static str = r#"
/** Options of `Tensor.fromGpuBuffer`. */
export interface GpuBufferOptions {
  /** The element type, "float32" by default. */
  dtype?: string;
  /** Extents; the tensor is compact (row-major). */
  shape: number[];
  /** Bytes from the buffer's start to the first element (default 0). */
  byteOffset?: number;
  /** Called exactly once when dlport's last reference goes (also when the call fails):
   *  ORT's `tensor.dispose()`, TF.js's `tensorRef.dispose()`. */
  onRelease?: () => void;
}
"#;

/// `GPUBufferUsage.COPY_SRC | GPUBufferUsage.STORAGE`.
const USAGE_NEEDED: u64 = 0x04 | 0x80;

const CALL: &str = "fromGpuBuffer";

#[wasm_bindgen]
impl Tensor {
    /// Wraps a `GPUBuffer` made by someone else on `dlport.device()` (TF.js's `dataToGPU()`,
    /// an ORT output with `preferredOutputLocation: "gpu-buffer"`) as a compact WebGPU tensor,
    /// without a copy. `onRelease` is its deleter: it runs exactly once, when `free()` (or the
    /// last DLPack export) lets go, and also when this call throws, since ownership passed at
    /// the call. The buffer needs `STORAGE | COPY_SRC` usage and must not be mapped.
    #[wasm_bindgen(js_name = fromGpuBuffer)]
    pub fn from_gpu_buffer(
        #[wasm_bindgen(unchecked_param_type = "GPUBuffer")] buffer: JsValue,
        #[wasm_bindgen(unchecked_param_type = "GpuBufferOptions")] options: JsValue,
    ) -> Result<Tensor, JsValue> {
        // The callback is read first and owned from here on: every return below drops
        // `release` (running onRelease once), unless the tensor's storage has taken it.
        let release = Release::read(CALL, &options)?;
        let a = args::gpu_buffer_args(CALL, &buffer, &options)?;
        if a.usage & USAGE_NEEDED != USAGE_NEEDED {
            return Err(refuse(
                CALL,
                format_args!(
                    "the buffer's usage is {:#x}; dlport needs STORAGE | COPY_SRC (0x84) to read it",
                    a.usage
                ),
            ));
        }
        if let Some(state) = a.map_state.filter(|s| s != "unmapped") {
            return Err(refuse(
                CALL,
                format_args!("the buffer is {state:?}; unmap it before handing it over"),
            ));
        }
        let dtype = match a.dtype {
            Some(name) => name
                .parse::<DataType>()
                .map_err(|e| refuse(CALL, format_args!("options.dtype = {name:?}: {e}")))?,
            None => DataType::FLOAT32,
        };
        let b = backend().map_err(|_| refuse(CALL, "call `await init()` first"))?;
        let storage = b.gpu().adopt_webgpu(
            buffer.unchecked_into(),
            a.size,
            Some(Box::new(move || drop(release))),
        );
        // A refusal here drops the storage, which runs onRelease.
        let inner = CoreTensor::builder(Buffer::new(Box::new(storage)), WEBGPU, dtype, &a.shape)
            .byte_offset(a.byte_offset)
            .build()
            .map_err(|e| refuse(CALL, e))?;
        Ok(Tensor { inner })
    }
}
