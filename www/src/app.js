// The dlport demo: TF.js → dlport → WGSL kernel → onnxruntime-web → dlport → TF.js on one
// GPUDevice. It runs once on load; the counter of CPU round trips (one per readback) is shown
// when a run has finished.
import initWasm, * as dlport from './pkg/dlport.js';
import * as ort from './vendor/ort/ort.webgpu.min.mjs';

const tf = globalThis.tf;
const SIZE = 64;
const SHAPE = [1, SIZE, SIZE, 3];
// ImageNet statistics, applied after scaling bytes to [0, 1].
const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];
const TENSOR_BYTES = SIZE * SIZE * 3 * 4;
// `?draw=gpu` draws the result inside the pipeline with tf.browser.draw (a WebGPU canvas). It
// is off by default: in headless Chromium 156 a WebGPU canvas's getCurrentTexture() drops the
// WebGPU instance (every later popErrorScope() rejects with "Instance dropped"), so by default
// the image is drawn from the one readback made after the pipeline's end marker.
const DRAW_ON_GPU = new URLSearchParams(location.search).get('draw') === 'gpu';

const $ = (id) => document.getElementById(id);
const demo = {
  ready: false, runs: 0, roundTrips: 0, roundTripLog: [], size: SIZE, mean: MEAN, std: STD,
  shared: null, ortDevice: null, errorScope: undefined, result: null, inputPixels: null, error: null,
};
Object.assign(globalThis, { demo, dlport, ort });

// ---- The CPU round-trip counter: readbacks and tensor-sized uploads during the pipeline. ----
// One readback counts once: a library's readback (tf `data()`, dlport `toHost()`, ORT
// `getData()`) maps a GPU buffer inside; that inner `mapAsync` is part of the same round trip.
let counting = false;
let inReadback = 0;
function count(what) {
  if (!counting || inReadback > 0) return;
  demo.roundTrips += 1;
  demo.roundTripLog.push(what);
}
function wrap(proto, name, label, when = () => true) {
  const original = proto[name];
  proto[name] = function (...args) {
    if (!when(...args)) return original.apply(this, args);
    count(label);
    inReadback += 1;
    let result;
    try {
      result = original.apply(this, args);
    } catch (e) {
      inReadback -= 1;
      throw e;
    }
    if (typeof result?.then === 'function') {
      return result.finally(() => { inReadback -= 1; });
    }
    inReadback -= 1;
    return result;
  };
}
function writeBytes(data, dataOffset = 0, size) {
  const unit = data.BYTES_PER_ELEMENT ?? 1;
  return size !== undefined ? size * unit : data.byteLength - dataOffset * unit;
}
if (globalThis.GPUBuffer && globalThis.GPUQueue) { // absent in a browser without WebGPU
  wrap(GPUBuffer.prototype, 'mapAsync', 'GPUBuffer.mapAsync');
  wrap(GPUQueue.prototype, 'writeBuffer', 'GPUQueue.writeBuffer',
    (_buffer, _offset, data, dataOffset, size) => writeBytes(data, dataOffset, size) >= TENSOR_BYTES);
}
wrap(ort.Tensor.prototype, 'getData', 'ort.Tensor.getData');
wrap(tf.Tensor.prototype, 'data', 'tf.Tensor.data');
wrap(tf.Tensor.prototype, 'dataSync', 'tf.Tensor.dataSync');
wrap(dlport.Tensor.prototype, 'toHost', 'dlport Tensor.toHost');

/** Shows the counter: only once a run has finished (hidden before, during and after a failure). */
function renderCounter(finished) {
  const el = $('roundtrips');
  el.hidden = !finished;
  el.textContent = finished
    ? `CPU round trips: ${demo.roundTrips}${demo.roundTripLog.length ? ` (${demo.roundTripLog.join(', ')})` : ''}`
    : '';
  el.classList.toggle('bad', demo.roundTrips > 0);
}

/** What to enable for WebGPU in the browser this page runs in. */
function webgpuHelp() {
  const ua = navigator.userAgent;
  if (!globalThis.isSecureContext) {
    return 'WebGPU needs a secure context: open this page over https:// or from http://localhost.';
  }
  if (/Firefox\//.test(ua)) {
    return 'Firefox: WebGPU is on in Firefox 141+ on Windows. Elsewhere open about:config, set '
      + 'dom.webgpu.enabled to true, and reload.';
  }
  if (/Edg\//.test(ua) || /Chrom(e|ium)\//.test(ua)) {
    const browser = /Edg\//.test(ua) ? 'Edge' : 'Chrome';
    const flags = /Edg\//.test(ua) ? 'edge://flags' : 'chrome://flags';
    if (/Linux|Android/.test(ua) && !/CrOS/.test(ua)) {
      return `${browser} on Linux: open ${flags}/#enable-unsafe-webgpu, set it to Enabled (and `
        + `${flags}/#enable-vulkan if your GPU has a Vulkan driver), then relaunch.`;
    }
    return `${browser}: WebGPU is on from version 113; update, or look at chrome://gpu — if `
      + `your GPU is blocklisted, enable ${flags}/#enable-unsafe-webgpu and relaunch.`;
  }
  if (/Safari\//.test(ua)) {
    return 'Safari: WebGPU is on in Safari 26. In Safari 17 and 18 turn on Develop → Feature '
      + 'Flags → WebGPU (Settings → Advanced → "Show features for web developers" first).';
  }
  return 'This browser has no WebGPU. Chrome or Edge 113+, Firefox 141+ (Windows) or Safari 26 have it.';
}
function step(text) {
  const li = document.createElement('li');
  li.textContent = text;
  $('steps').append(li);
}
function fail(e) {
  demo.error = String(e?.stack ?? e);
  $('status').textContent = `Error: ${e?.message ?? e}`;
  $('status').className = 'error';
}
function noWebGpu(detail) {
  demo.webgpuMissing = true;
  $('device').textContent = `WebGPU is not available here (${detail}), so the demo cannot run.`;
  $('help').textContent = webgpuHelp();
  $('help').hidden = false;
}

// ---- onnxruntime-web on dlport's device: its per-session option, or its environment's device. ----
// onnxruntime-web takes an application's GPUDevice in one of two ways: the WebGPU execution
// provider's per-session option (`executionProviders: [{ name: 'webgpu', device }]`, what 1.30.0
// reads), or the environment-wide `ort.env.webgpu.device` set before its first WebGPU session
// (microsoft/onnxruntime#32227, which deprecates the per-session option; 1.30.0 reads
// `env.webgpu.device` nowhere, #26107, so set alone it gets ORT a device of its own).
const ORT_DEVICE_WAYS = {
  'per-session': "its per-session option (executionProviders: [{ name: 'webgpu', device }])",
  environment: 'its environment-wide device (ort.env.webgpu.device)',
};

/**
 * Creates the session on `device` the way this onnxruntime-web takes a device, found by what it
 * does rather than by its version string: it reads the per-session `device` while it builds the
 * session's options, before it opens a device or parses the model. The first attempt offers that
 * option through a getter that throws: a release that has the option stops there, having created
 * nothing, and the session is then made with the per-session option alone. A release without it
 * never reads the getter, and the attempt goes on to make the session on the environment's
 * device, set just before it. Returns `{ session, via }`, `via` being 'per-session' or
 * 'environment'.
 */
async function ortSessionOn(device, model, options) {
  const probe = new Error("dlport: probing onnxruntime-web's per-session device option");
  let read = false;
  const offer = { name: 'webgpu', get device() { read = true; throw probe; } };
  ort.env.webgpu.device = device;
  try {
    const session = await ort.InferenceSession.create(model, { ...options, executionProviders: [offer] });
    if ((await ort.env.webgpu.device) !== device) {
      throw new Error('onnxruntime-web has neither the per-session device option nor the '
        + 'environment-wide ort.env.webgpu.device: it opened a GPUDevice of its own');
    }
    return { session, via: 'environment' };
  } catch (e) {
    if (!read) throw e;
  }
  // The per-session option exists: the session gets the device from it alone (1.30.0's
  // `env.webgpu` is a plain object, and the value set above is removed again).
  delete ort.env.webgpu.device;
  const session = await ort.InferenceSession.create(model, {
    ...options, executionProviders: [{ name: 'webgpu', device }],
  });
  return { session, via: 'per-session' };
}

// ---- Setup: one device, three libraries. ----
let session;
let input;
let previous = null;

async function setup() {
  if (!navigator.gpu) {
    noWebGpu('navigator.gpu is missing');
    throw new Error('this browser exposes no WebGPU');
  }
  await initWasm();
  try {
    await dlport.init();
  } catch (e) {
    noWebGpu('no adapter: requestAdapter() found none');
    throw e;
  }
  const device = dlport.device();

  // TF.js's WebGPU backend, constructed on dlport's device (kernels stay registered under
  // 'webgpu'; only the factory that would open a device of its own is replaced).
  const backend = new tf.WebGPUBackend(device, device.adapterInfo);
  tf.removeBackend('webgpu');
  tf.registerBackend('webgpu', () => backend, 10);
  if (!(await tf.setBackend('webgpu'))) throw new Error('TF.js refused the WebGPU backend');

  // onnxruntime-web's WebGPU bundle on the same device, outputs left on the GPU, no proxy.
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmPaths = new URL('./vendor/ort/', import.meta.url).href;
  const model = new Uint8Array(await (await fetch('model/style.onnx')).arrayBuffer());
  ({ session, via: demo.ortDevice } = await ortSessionOn(device, model, {
    preferredOutputLocation: 'gpu-buffer',
  }));
  demo.shared = tf.backend().device === device;
  const adapter = device.adapterInfo?.description || device.adapterInfo?.vendor || 'WebGPU';
  $('device').textContent = demo.shared
    ? `One GPUDevice (${adapter}) shared by dlport, TF.js and onnxruntime-web, which took it `
      + `through ${ORT_DEVICE_WAYS[demo.ortDevice]}.`
    : 'A library refused dlport\'s device and uses its own: buffers cannot cross without a copy here.';

  // The input: a picture drawn on a 2D canvas, uploaded to TF.js before the pipeline starts.
  const ctx = $('input').getContext('2d');
  const sky = ctx.createLinearGradient(0, 0, 0, SIZE);
  sky.addColorStop(0, '#1d4e89');
  sky.addColorStop(1, '#f2a65a');
  ctx.fillStyle = sky;
  ctx.fillRect(0, 0, SIZE, SIZE);
  ctx.fillStyle = '#ffd23f';
  ctx.beginPath();
  ctx.arc(44, 22, 10, 0, 2 * Math.PI);
  ctx.fill();
  ctx.fillStyle = '#2b2d42';
  ctx.fillRect(0, 46, SIZE, 18);
  const rgba = ctx.getImageData(0, 0, SIZE, SIZE).data;
  const rgb = new Int32Array(SIZE * SIZE * 3);
  for (let i = 0; i < SIZE * SIZE; i++) {
    for (let c = 0; c < 3; c++) rgb[i * 3 + c] = rgba[i * 4 + c];
  }
  demo.inputPixels = Array.from(rgb);
  input = tf.tensor(rgb, SHAPE, 'int32');
  backend.uploadToGPU(input.dataId);

  $('run').disabled = false;
  $('readback').disabled = false;
  demo.ready = true;
}

// ---- The pipeline. ----
async function run({ readback = false } = {}) {
  const device = dlport.device();
  $('steps').replaceChildren();
  $('status').textContent = '';
  if (previous) {
    previous.out.dispose(); // TF.js first: it borrows y's buffer (zeroCopy)
    previous.y.free(); // then dlport, whose onRelease disposes ORT's output
    previous = null;
  }
  demo.roundTrips = 0;
  demo.roundTripLog = [];
  demo.result = null;
  renderCounter(false);

  device.pushErrorScope('validation');
  counting = true;
  performance.mark('dlport-pipeline-start');
  globalThis.dispatchEvent(new Event('dlport:pipeline-start'));
  let out;
  let y;
  try {
    step(`TF.js tensor ${input.shape} ${input.dtype} on backend "${tf.getBackend()}" (dlport's device: ${tf.backend().device === device})`);
    const gpuData = input.dataToGPU();
    const x = dlport.Tensor.fromGpuBuffer(gpuData.buffer, {
      dtype: 'int32', shape: SHAPE, onRelease: () => gpuData.tensorRef.dispose(),
    });
    step(`dataToGPU() → dlport tensor on ${x.device}, ${x.dtype} [${x.shape}] (TF.js's buffer, no copy)`);
    const xn = x.normalize(MEAN, STD, 1 / 255);
    x.free(); // releases TF.js's tensorRef through onRelease
    step(`dlport WGSL kernel: (x / 255 − mean) / std → ${xn.dtype} [${xn.shape}]`);
    const feed = ort.Tensor.fromGpuBuffer(xn.gpuBuffer, { dataType: 'float32', dims: xn.shape });
    const results = await session.run({ image: feed });
    const styled = results.styled;
    xn.free();
    step(`onnxruntime-web (webgpu): ${styled.type} [${styled.dims}] left at "${styled.location}"`);
    y = dlport.Tensor.fromGpuBuffer(styled.gpuBuffer, {
      dtype: styled.type, shape: styled.dims, onRelease: () => styled.dispose(),
    });
    step(`ORT output → dlport tensor on ${y.device} (ORT's buffer, released by its dispose())`);
    out = tf.tensor({ buffer: y.gpuBuffer, zeroCopy: true }, [SIZE, SIZE, 3], 'float32');
    step(`tf.tensor({buffer, zeroCopy: true}) → TF.js ${out.dtype} [${out.shape}]`);
    if (DRAW_ON_GPU) {
      tf.browser.draw(out, $('output'));
      step('tf.browser.draw(): drawn by a TF.js shader into a WebGPU canvas');
    }
    if (readback) {
      const host = await y.toHost(); // one readback: one round trip
      const values = host.toArray();
      host.free();
      step(`deliberate readback: dlport toHost().toArray() brought ${values.length} values `
        + `(${values.constructor.name}, [${y.shape}]) to the CPU`);
      demo.readbackValues = values.length;
    }
    await device.queue.onSubmittedWorkDone();
  } catch (e) {
    fail(e);
  } finally {
    globalThis.dispatchEvent(new Event('dlport:pipeline-end'));
    performance.mark('dlport-pipeline-end');
    counting = false;
    demo.errorScope = await device.popErrorScope();
  }
  if (!out) return demo;
  previous = { out, y };
  demo.runs += 1;
  renderCounter(true);
  // After the end marker: read the result back once, for the picture, the chart and checking.
  // dlport reads exactly the tensor's elements (ORT's buffer is bucketed, larger than them).
  const host = await y.toHost();
  const values = host.toArray();
  host.free();
  demo.result = Array.from(values);
  if (!DRAW_ON_GPU) drawImage(values);
  drawChart(values);
  if (demo.errorScope) fail(`WebGPU validation error: ${demo.errorScope.message}`);
  else $('status').textContent = `Run ${demo.runs} done; WebGPU reported no errors.`;
  return demo;
}

function drawImage(values) {
  const ctx = $('output').getContext('2d');
  const image = ctx.createImageData(SIZE, SIZE);
  for (let i = 0; i < SIZE * SIZE; i++) {
    for (let c = 0; c < 3; c++) image.data[i * 4 + c] = Math.round(values[i * 3 + c] * 255);
    image.data[i * 4 + 3] = 255;
  }
  ctx.putImageData(image, 0, 0);
}

function drawChart(values) {
  const means = [0, 0, 0];
  for (let i = 0; i < values.length; i++) means[i % 3] += values[i] / (values.length / 3);
  demo.channelMeans = means;
  const ctx = $('chart').getContext('2d');
  const { width, height } = ctx.canvas;
  ctx.clearRect(0, 0, width, height);
  ['#d64545', '#3fa34d', '#3f6fd6'].forEach((color, c) => {
    const h = Math.round(means[c] * (height - 16));
    ctx.fillStyle = color;
    ctx.fillRect(16 + c * 60, height - h, 40, h);
    ctx.fillStyle = '#222';
    ctx.fillText(means[c].toFixed(3), 18 + c * 60, height - h - 4);
  });
}

demo.run = run;
$('run').addEventListener('click', () => run());
$('readback').addEventListener('click', () => run({ readback: true }));
// Runs once on load; the buttons run it again.
setup().then(() => {
  demo.setupDone = true;
  return run();
}, (e) => {
  fail(e);
  demo.setupDone = true;
}).finally(() => { demo.loaded = true; });
