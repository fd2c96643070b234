//! Raw WebGPU calls (wasm32) for foreign `GPUBuffer`s, which wgpu cannot wrap: a buffer copy
//! and a compute dispatch, through a small JS snippet bundled with the package. The same WGSL
//! kernels run here as through wgpu.

use wasm_bindgen::prelude::*;

use dlport_core::Error;

#[wasm_bindgen(module = "/js/webgpu.js")]
extern "C" {
    #[wasm_bindgen(js_name = dlportCopy, catch)]
    fn js_copy(
        device: &JsValue,
        src: &JsValue,
        src_offset: f64,
        dst: &JsValue,
        dst_offset: f64,
        size: f64,
    ) -> Result<(), JsValue>;

    #[wasm_bindgen(js_name = dlportDispatch, catch)]
    #[allow(clippy::too_many_arguments)]
    fn js_dispatch(
        device: &JsValue,
        label: &str,
        code: &str,
        src: &JsValue,
        src_size: f64,
        dst: &JsValue,
        params: &[u8],
        x: u32,
        y: u32,
    ) -> Result<(), JsValue>;
}

fn raw_error(operation: &'static str) -> Error {
    crate::gpu::error::backend(
        operation,
        "the browser's WebGPU API threw; is the buffer from dlport.device() and not destroyed?",
    )
}

fn js_device(device: &wgpu::Device) -> Result<JsValue, Error> {
    device
        .as_webgpu()
        .map(|d| JsValue::from(d.clone()))
        .ok_or(raw_error("device"))
}

fn js_buffer(buffer: &wgpu::Buffer) -> Result<JsValue, Error> {
    buffer
        .as_webgpu()
        .map(|b| JsValue::from(b.clone()))
        .ok_or(raw_error("buffer"))
}

/// `copyBufferToBuffer` from a foreign buffer into one of wgpu's, submitted at once.
pub(crate) fn copy(
    device: &wgpu::Device,
    src: &wgpu::webgpu::GpuBuffer,
    from: u64,
    dst: &wgpu::Buffer,
    to: u64,
    size: u64,
) -> Result<(), Error> {
    js_copy(
        &js_device(device)?,
        src,
        from as f64,
        &js_buffer(dst)?,
        to as f64,
        size as f64,
    )
    .map_err(|_| raw_error("copyBufferToBuffer"))
}

/// Runs the kernel `label` (its WGSL source `wgsl`) reading a foreign buffer (its first
/// `src_size` bytes) into one of wgpu's.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch(
    device: &wgpu::Device,
    label: &str,
    wgsl: &str,
    src: &wgpu::webgpu::GpuBuffer,
    src_size: u64,
    dst: &wgpu::Buffer,
    params: &[u8],
    x: u32,
    y: u32,
) -> Result<(), Error> {
    js_dispatch(
        &js_device(device)?,
        label,
        wgsl,
        src,
        src_size as f64,
        &js_buffer(dst)?,
        params,
        x,
        y,
    )
    .map_err(|_| raw_error("dispatch"))
}
