//! Moving tensors between wasm memory and the shared WebGPU device, the `GPUBuffer` behind a
//! WebGPU tensor, and the GPU kernels (`normalize`).

use dlport_core::backend::{Backend, CpuBackend};
use dlport_core::{Device, ExportBuilder};
use wasm_bindgen::prelude::*;

use super::{Tensor, args, backend, js_err};
use crate::gpu::{MAX_CHANNELS, Normalize};

#[wasm_bindgen]
impl Tensor {
    /// Moves the tensor to a device: "webgpu" uploads (no copy if it is already there).
    #[wasm_bindgen(js_name = toDevice)]
    pub fn to_device(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] device: JsValue,
    ) -> Result<Tensor, JsValue> {
        let device = args::name("toDevice", "device", &device, false)?.unwrap_or_default();
        match device.as_str() {
            "webgpu" | "webgpu:0" => {
                if self.inner.device() == Device::webgpu(0) {
                    return Ok(Tensor {
                        inner: self.inner.clone(),
                    });
                }
                let b = backend()?;
                let guard = self.inner.view().map_err(js_err)?;
                let t = b.gpu().upload(&guard.tensor_ref(), 0).map_err(js_err)?;
                Ok(Tensor { inner: t })
            }
            "cpu" => Err(args::refuse(
                "toDevice",
                "use `await tensor.toHost()` to read a tensor back",
            )),
            other => Err(args::refuse(
                "toDevice",
                format_args!("unknown device {other:?}; use \"webgpu\" or toHost()"),
            )),
        }
    }

    /// Reads a WebGPU tensor back into wasm memory (a Promise); a host tensor resolves to
    /// itself.
    #[wasm_bindgen(js_name = toHost)]
    pub async fn to_host(&self) -> Result<Tensor, JsError> {
        if self.inner.device().is_host_accessible() {
            return Ok(Tensor {
                inner: self.inner.clone(),
            });
        }
        let b = backend()?;
        let bytes = {
            let guard = self.inner.view().map_err(js_err)?;
            b.gpu()
                .download(&guard.tensor_ref())
                .await
                .map_err(js_err)?
        };
        let m = ExportBuilder::new(bytes, self.inner.dtype(), self.inner.shape())
            .copied(true)
            .build()
            .map_err(js_err)?;
        let inner = CpuBackend.view_external(m, Device::cpu()).map_err(js_err)?;
        Ok(Tensor { inner })
    }

    /// The `GPUBuffer` behind a WebGPU tensor (its data starts at `byteOffset`): dlport's own,
    /// or the foreign buffer a `fromGpuBuffer` tensor wraps.
    #[wasm_bindgen(getter, js_name = gpuBuffer, unchecked_return_type = "GPUBuffer")]
    pub fn gpu_buffer(&self) -> Result<JsValue, JsError> {
        let b = backend()?;
        if self.inner.device() != Device::webgpu(0) {
            return Err(JsError::new(&format!(
                "dlport: this tensor is on {}, not in a WebGPU buffer; call toDevice(\"webgpu\")",
                self.inner.device()
            )));
        }
        let buffer = b
            .gpu()
            .js_buffer(self.inner.buffer().ptr() as usize)
            .ok_or_else(|| JsError::new("dlport: the tensor's WebGPU buffer was released"))?;
        Ok(JsValue::from(buffer))
    }

    /// Normalizes on the GPU with a dlport WGSL kernel: `(x · scale − mean[c]) / std[c]`, `c`
    /// the index along the last axis, into a new float32 WebGPU tensor. Reads float32, int32,
    /// uint32 and uint8 tensors; `mean` and `std` hold one value or one per channel.
    pub fn normalize(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Float32Array | number[]")] mean: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Float32Array | number[]")] std: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] scale: JsValue,
    ) -> Result<Tensor, JsValue> {
        const CALL: &str = "normalize";
        let mean = args::numbers(CALL, "mean", &mean, MAX_CHANNELS)?;
        let std = args::numbers(CALL, "std", &std, MAX_CHANNELS)?;
        let scale = args::number(CALL, "scale", &scale)?.map_or(1.0, |x| x as f32);
        let b = backend()?;
        let guard = self.inner.view().map_err(js_err)?;
        let inner = b
            .gpu()
            .normalize(
                &guard.tensor_ref(),
                &Normalize {
                    mean: &mean,
                    std: &std,
                    scale,
                },
            )
            .map_err(|e| JsError::new(&format!("dlport: normalize: {e}")))?;
        Ok(Tensor { inner })
    }
}
