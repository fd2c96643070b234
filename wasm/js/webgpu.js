// Raw WebGPU calls for buffers that wgpu cannot wrap (foreign GPUBuffers from TF.js,
// onnxruntime-web or the page). Bundled into the npm package by wasm-bindgen as a snippet.
// Nothing here reads tensor data on the CPU: copies and kernels are queued on the device.

const pipelines = new WeakMap();

function pipelineFor(device, label, code) {
  let cache = pipelines.get(device);
  if (!cache) {
    cache = new Map();
    pipelines.set(device, cache);
  }
  let pipeline = cache.get(label);
  if (!pipeline) {
    const module = device.createShaderModule({ label, code });
    pipeline = device.createComputePipeline({
      label,
      layout: 'auto',
      compute: { module, entryPoint: 'main' },
    });
    cache.set(label, pipeline);
  }
  return pipeline;
}

export function dlportCopy(device, src, srcOffset, dst, dstOffset, size) {
  const encoder = device.createCommandEncoder({ label: 'dlport copy' });
  encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  device.queue.submit([encoder.finish()]);
}

export function dlportDispatch(device, label, code, src, srcSize, dst, params, x, y) {
  const pipeline = pipelineFor(device, label, code);
  // Parameters are written at creation: no writeBuffer, no mapAsync.
  const uniform = device.createBuffer({
    label: `${label} params`,
    size: params.byteLength,
    usage: GPUBufferUsage.UNIFORM,
    mappedAtCreation: true,
  });
  new Uint8Array(uniform.getMappedRange()).set(params);
  uniform.unmap();
  const bindGroup = device.createBindGroup({
    label,
    layout: pipeline.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: src, offset: 0, size: srcSize } },
      { binding: 1, resource: { buffer: dst } },
      { binding: 2, resource: { buffer: uniform } },
    ],
  });
  const encoder = device.createCommandEncoder({ label });
  const pass = encoder.beginComputePass({ label });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(x, y);
  pass.end();
  device.queue.submit([encoder.finish()]);
  // Work already submitted keeps the uniform alive; destroying it now frees it afterwards.
  uniform.destroy();
}
