// End-to-end test of the demo page in Debian's Chromium, driven by playwright-core:
// the pipeline's result equals a CPU reference computed here, spies installed by this test
// see no CPU round trip between the page's start and end markers, WebGPU reports no
// validation error, TF.js runs on dlport's device, and a deliberate readback counts once.
// onnxruntime-web takes the device through its per-session option (1.30.0 has it), and through the
// environment-wide ort.env.webgpu.device on a page where that option is hidden (a stand-in for a
// release after microsoft/onnxruntime#32227): the page says which, and both make 0 round trips.
// The page runs the pipeline on load; the counter appears only when a run has finished.
// Without WebGPU the page says what to enable in this browser.
// Run: `node --test www/tests/` after `scripts/www-build.sh`. Saves the page after it loaded
// (the pipeline's result, counter 0) as www/screenshot.png, committed for the README.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile, mkdir } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const www = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(www, 'dist');
const results = join(www, 'test-results');

let server;
let browser;
let page;
let origin;
const consoleLines = [];

// Spies, installed before any page script runs. GPU prototypes are wrapped at once; TF.js and
// ORT prototypes once the page exposes them. Only calls between the markers count.
function installSpies() {
  const spy = { active: false, counts: {}, writes: [] };
  globalThis.__spy = spy;
  const bump = (name) => { if (spy.active) spy.counts[name] = (spy.counts[name] ?? 0) + 1; };
  const wrap = (proto, method, name, when = () => true) => {
    const original = proto[method];
    proto[method] = function (...args) {
      if (when(...args)) bump(name);
      return original.apply(this, args);
    };
  };
  // What the counter shows while a run is going: nothing.
  spy.counterDuringRuns = [];
  globalThis.addEventListener('dlport:pipeline-start', () => {
    if (!spy.librariesWrapped) spy.wrapLibraries(); // the first run starts on load
    spy.librariesWrapped = true;
    const el = document.getElementById('roundtrips');
    spy.counterDuringRuns.push({ hidden: el.hidden, text: el.textContent });
    spy.active = true;
  });
  globalThis.addEventListener('dlport:pipeline-end', () => { spy.active = false; });
  if (!globalThis.GPUBuffer) return; // the page without WebGPU
  wrap(GPUBuffer.prototype, 'mapAsync', 'mapAsync');
  wrap(GPUQueue.prototype, 'writeBuffer', 'writeBuffer', (_b, _o, data, dataOffset = 0, size) => {
    const unit = data.BYTES_PER_ELEMENT ?? 1;
    const bytes = size !== undefined ? size * unit : data.byteLength - dataOffset * unit;
    if (spy.active) spy.writes.push(bytes);
    return bytes >= 64 * 64 * 3 * 4; // tensor-sized
  });
  spy.wrapLibraries = () => {
    wrap(globalThis.ort.Tensor.prototype, 'getData', 'ort.getData');
    wrap(globalThis.tf.Tensor.prototype, 'data', 'tf.data');
    wrap(globalThis.tf.Tensor.prototype, 'dataSync', 'tf.dataSync');
  };
}

// Hides onnxruntime-web's per-session device option, installed before any page script runs: a
// stand-in for a release after microsoft/onnxruntime#32227, which takes the application's device
// from the environment-wide ort.env.webgpu.device set before the first WebGPU session and (by
// then) no longer reads the per-session one. 1.30.0, installed here, has only the per-session
// option (it reads env.webgpu.device nowhere, #26107), so the stand-in drops the `device` of
// every WebGPU option without reading it, and hands 1.30.0 the environment's device through the
// one way it has. It patches the module namespace the page exposes as globalThis.ort.
function hidePerSessionDevice() {
  const hidden = { creates: 0, adopted: 0 };
  globalThis.__hidden = hidden;
  let ort;
  Object.defineProperty(globalThis, 'ort', {
    configurable: true,
    get: () => ort,
    set(value) {
      ort = value;
      const create = value.InferenceSession.create.bind(value.InferenceSession);
      value.InferenceSession.create = (model, options = {}, ...rest) => {
        hidden.creates += 1;
        const envDevice = value.env.webgpu.device;
        const executionProviders = (options.executionProviders ?? []).map((ep) => {
          if (typeof ep === 'string' || ep.name !== 'webgpu') return ep;
          const copy = {};
          for (const [key, d] of Object.entries(Object.getOwnPropertyDescriptors(ep))) {
            if (key !== 'device') Object.defineProperty(copy, key, d); // never calls a getter
          }
          if (envDevice instanceof GPUDevice) {
            copy.device = envDevice;
            hidden.adopted += 1;
          }
          return copy;
        });
        return create(model, { ...options, executionProviders }, ...rest);
      };
    },
  });
}

// How the test's log names the page's `demo.ortDevice`.
const WAYS = { 'per-session': 'its per-session option', environment: 'the environment-wide ort.env.webgpu.device' };

/** A free TCP port on 127.0.0.1. */
async function freePort() {
  const probe = createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address();
  await new Promise((r) => probe.close(r));
  return port;
}

before(async () => {
  // The page is served the way the README serves it (scripts/www-serve.sh):
  // python3 -m http.server over the built folder.
  const port = await freePort();
  server = spawn('python3', ['-m', 'http.server', '--bind', '127.0.0.1', '-d', dist, String(port)], {
    stdio: 'ignore',
  });
  origin = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${origin}/`)).ok) break;
    } catch {
      if (i > 100) throw new Error(`python3 -m http.server did not start on port ${port}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox', '--enable-unsafe-webgpu', '--disable-gpu-sandbox',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-first-run', '--disable-quic', '--js-flags=--expose-gc',
    ],
  });
  page = await browser.newPage({ viewport: { width: 900, height: 900 } });
  page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`[pageerror] ${e.message}`));
  await page.addInitScript(installSpies);
  await page.goto(`${origin}/`);
  // The page runs the pipeline on load: wait for that run to finish.
  await page.waitForFunction(() => globalThis.demo?.loaded, null, { timeout: 120_000 });
  const error = await page.evaluate(() => globalThis.demo.error);
  assert.equal(error, null, `setup or first run failed: ${error}\n${consoleLines.join('\n')}`);
});

after(async () => {
  await browser?.close();
  server?.kill();
});

/** The CPU reference: normalize, then Sigmoid(x·W + b) per pixel, in float64. */
function reference(pixels, mean, std, model) {
  const out = new Float64Array(pixels.length);
  for (let p = 0; p < pixels.length; p += 3) {
    const x = [0, 1, 2].map((c) => (pixels[p + c] / 255 - mean[c]) / std[c]);
    for (let j = 0; j < 3; j++) {
      let s = model.b[j];
      for (let i = 0; i < 3; i++) s += x[i] * model.W[i][j];
      out[p + j] = 1 / (1 + Math.exp(-s));
    }
  }
  return out;
}

async function runPipeline(options) {
  // This test's own error scope around the run, on the shared device.
  await page.evaluate(() => globalThis.dlport.device().pushErrorScope('validation'));
  const state = await page.evaluate(async (opts) => {
    globalThis.__spy.counts = {};
    globalThis.__spy.writes = [];
    const d = await globalThis.demo.run(opts);
    return {
      counts: globalThis.__spy.counts, writes: globalThis.__spy.writes, error: d.error,
      pageCounter: document.getElementById('roundtrips').textContent, roundTripLog: d.roundTripLog,
      errorScope: d.errorScope === null ? null : String(d.errorScope?.message ?? d.errorScope),
      result: d.result, inputPixels: d.inputPixels, mean: d.mean, std: d.std,
      readbackValues: d.readbackValues,
      steps: [...document.querySelectorAll('#steps li')].map((li) => li.textContent),
      numTensors: globalThis.tf.memory().numTensors,
    };
  }, options);
  state.ownScope = await page.evaluate(async () => {
    const e = await globalThis.dlport.device().popErrorScope();
    return e === null ? null : String(e.message);
  });
  return state;
}

test('on load: the pipeline runs by itself, the counter appears after it with 0, screenshot', async () => {
  const s = await page.evaluate(() => ({
    runs: globalThis.demo.runs, counts: globalThis.__spy.counts,
    pageCounter: document.getElementById('roundtrips').textContent,
    counterHidden: document.getElementById('roundtrips').hidden,
    during: globalThis.__spy.counterDuringRuns, steps: document.querySelectorAll('#steps li').length,
    status: document.getElementById('status').textContent, result: globalThis.demo.result,
    inputPixels: globalThis.demo.inputPixels, helpHidden: document.getElementById('help').hidden,
    device: document.getElementById('device').textContent, ortDevice: globalThis.demo.ortDevice,
  }));
  await page.screenshot({ path: join(www, 'screenshot.png'), fullPage: true });
  assert.equal(s.runs, 1, 'one run on load, without a click');
  assert.deepEqual(s.during, [{ hidden: true, text: '' }], 'the counter shows nothing while the run goes');
  assert.equal(s.counterHidden, false);
  assert.equal(s.pageCounter, 'CPU round trips: 0');
  assert.deepEqual(s.counts, {}, 'the spies saw no readback during the first run');
  assert.match(s.status, /^Run 1 done; WebGPU reported no errors\.$/);
  assert.ok(s.steps >= 6, `${s.steps} steps listed`);
  assert.equal(s.helpHidden, true);
  // onnxruntime-web 1.30.0 has the per-session option: the page used it, and says so.
  assert.equal(s.ortDevice, 'per-session');
  assert.match(s.device, /^One GPUDevice \(.*\) shared by dlport, TF\.js and onnxruntime-web, which took it through its per-session option \(executionProviders: \[\{ name: 'webgpu', device \}\]\)\.$/);
  // The model's effect is visible: the blue sky of the input (blue the strongest channel in a
  // good part of it) becomes a sepia print (red ≥ green ≥ blue in every pixel), and the output
  // differs from the input by far more than a shade.
  let diff = 0;
  let blueInput = 0;
  let sepia = 0;
  const pixels = s.result.length / 3;
  for (let p = 0; p < s.result.length; p += 3) {
    const [r, g, b] = s.result.slice(p, p + 3);
    const [ri, gi, bi] = s.inputPixels.slice(p, p + 3);
    if (bi > ri && bi > gi) blueInput += 1;
    if (r >= g && g >= b) sepia += 1;
    for (let c = 0; c < 3; c++) diff += Math.abs(s.result[p + c] - s.inputPixels[p + c] / 255);
  }
  diff /= s.result.length;
  assert.ok(blueInput > 0.25 * pixels, `${blueInput} of ${pixels} input pixels are mostly blue`);
  assert.equal(sepia, pixels, `${sepia} of ${pixels} output pixels are sepia (r ≥ g ≥ b)`);
  assert.ok(diff > 0.1, `mean |output − input| = ${diff.toFixed(3)} (of 1)`);
  console.log(`# on load: onnxruntime-web took the device through ${WAYS[s.ortDevice]}; counter "${s.pageCounter}"; ${blueInput} of ${pixels} input pixels mostly blue, `
    + `all sepia after; mean |output − input| = ${diff.toFixed(3)}; saved www/screenshot.png`);
});

test('the pipeline shares one GPUDevice and never goes through the CPU', async () => {
  const sameDevice = await page.evaluate(() => globalThis.tf.backend().device === globalThis.dlport.device());
  assert.equal(sameDevice, true, 'tf.backend().device === dlport.device()');
  // ORT's side of the sharing is shown by the run below: its input is a dlport buffer and its
  // output goes to TF.js, which WebGPU refuses across devices (the error scopes stay null).
  const ort = await page.evaluate(() => ({ via: globalThis.demo.ortDevice, shared: globalThis.demo.shared }));
  assert.deepEqual(ort, { via: 'per-session', shared: true });

  const s = await runPipeline({});
  await mkdir(results, { recursive: true });
  await page.screenshot({ path: join(results, 'demo.png'), fullPage: true });
  assert.equal(s.error, null, `${s.error}\n${consoleLines.join('\n')}`);
  assert.equal(s.errorScope, null, "the page's popErrorScope() is null");
  assert.equal(s.ownScope, null, "this test's popErrorScope() is null");
  assert.deepEqual(s.counts, {}, `no mapAsync, tensor-sized writeBuffer, getData, data or dataSync; writes: ${s.writes}`);
  assert.equal(s.pageCounter, 'CPU round trips: 0');

  const model = JSON.parse(await readFile(join(www, 'model', 'style.json'), 'utf8'));
  const want = reference(s.inputPixels, s.mean, s.std, model);
  assert.equal(s.result.length, want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(s.result[i] - want[i]));
  assert.ok(worst < 1e-4, `largest difference from the CPU reference: ${worst}`);
  // The image is not trivial: the reference spans a real range, so a constant output fails.
  assert.ok(Math.max(...want) - Math.min(...want) > 0.5);
  console.log(`# pipeline: ${want.length} values, max |page − reference| = ${worst.toExponential(2)}, `
    + `${s.writes.length} small writeBuffer calls (largest ${Math.max(0, ...s.writes)} B)`);

  // Twice in a row: buffers from the first run are released and nothing leaks into the second.
  const again = await runPipeline({});
  assert.deepEqual(again.counts, {});
  assert.equal(again.errorScope, null);
  assert.deepEqual(again.result, s.result);
  assert.equal(again.numTensors, s.numTensors, 'TF.js tensors do not pile up across runs');
});

test('a deliberate readback counts one round trip and reports the tensor\'s own values', async () => {
  const s = await runPipeline({ readback: true });
  assert.equal(s.error, null, s.error);
  // This test's spies see the one mapAsync under dlport's toHost(); the page counts it once.
  assert.deepEqual(s.counts, { mapAsync: 1 }, JSON.stringify(s.counts));
  assert.equal(s.pageCounter, 'CPU round trips: 1 (dlport Tensor.toHost)');
  assert.deepEqual(s.roundTripLog, ['dlport Tensor.toHost']);
  // [1, 64, 64, 3] is 12,288 values, and the page says so.
  assert.equal(s.readbackValues, 64 * 64 * 3);
  assert.ok(s.steps.some((t) => t.includes('brought 12288 values (Float32Array, [1,64,64,3])')), s.steps.join('\n'));
  assert.equal(s.ownScope, null);
  await page.screenshot({ path: join(results, 'demo-readback.png'), fullPage: true });
});

test('every spy counts its own call between the markers, and nothing outside them', async () => {
  const { outside, inside } = await page.evaluate(async () => {
    const spy = globalThis.__spy;
    spy.counts = {};
    const d = globalThis.dlport.device();
    const t = globalThis.tf.tensor([1, 2, 3]);
    const o = new globalThis.ort.Tensor('float32', new Float32Array(4), [4]);
    const bytes = 64 * 64 * 3 * 4;
    const b = d.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const readbacks = async () => {
      t.dataSync();
      await t.data();
      await o.getData();
      d.queue.writeBuffer(b, 0, new Uint8Array(bytes));
      d.queue.writeBuffer(b, 0, new Uint8Array(16)); // small: not tensor-sized
      await b.mapAsync(GPUMapMode.READ);
      b.unmap();
    };
    await readbacks();
    const before = { ...spy.counts };
    globalThis.dispatchEvent(new Event('dlport:pipeline-start'));
    await readbacks();
    globalThis.dispatchEvent(new Event('dlport:pipeline-end'));
    b.destroy();
    t.dispose();
    return { outside: before, inside: spy.counts };
  });
  assert.deepEqual(outside, {});
  assert.deepEqual(inside, { 'tf.dataSync': 1, 'tf.data': 1, 'ort.getData': 1, writeBuffer: 1, mapAsync: 1 });
});

test('free(), Symbol.dispose and the FinalizationRegistry each run onRelease exactly once; a throwing callback is reported', async () => {
  // A string, so that Node's parser (no `using` in Node 20) never sees the page's syntax.
  const counts = await page.evaluate(`(async () => {
    const d = dlport.device();
    const make = () => d.createBuffer({ size: 64, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const counts = { free: 0, dispose: 0, finalized: 0 };
    const t = dlport.Tensor.fromGpuBuffer(make(), { shape: [16], onRelease: () => counts.free++ });
    t.free();
    try { t.free(); counts.secondFree = 'no error'; } catch (e) { counts.secondFree = e.message; }
    {
      using u = dlport.Tensor.fromGpuBuffer(make(), { shape: [16], onRelease: () => counts.dispose++ });
    }
    const throwing = dlport.Tensor.fromGpuBuffer(make(), {
      shape: [16], onRelease: () => { counts.threw = (counts.threw ?? 0) + 1; throw new Error('boom'); },
    });
    throwing.free(); // the callback's exception is reported on the console, not rethrown
    (() => { dlport.Tensor.fromGpuBuffer(make(), { shape: [16], onRelease: () => counts.finalized++ }); })();
    for (let i = 0; i < 100 && counts.finalized === 0; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    return counts;
  })()`);
  // A second free() does nothing (never a second release; dlport's guard on Tensor.prototype
  // keeps it from wasm-bindgen's null check, which threw from inside wasm).
  assert.deepEqual(counts, { free: 1, dispose: 1, finalized: 1, threw: 1, secondFree: 'no error' });
  assert.ok(consoleLines.some((l) => l.includes('a fromGpuBuffer onRelease callback threw')), consoleLines.join('\n'));
});

test('Tensor.fromDLPack takes back only live toDLPack exports, once; anything else throws an Error', async () => {
  const r = await page.evaluate(() => {
    const { Tensor } = globalThis.dlport;
    const t = new Tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
    const refusal = (address, legacy) => {
      try {
        Tensor.fromDLPack(address, legacy).free();
        return 'accepted';
      } catch (e) {
        return `${e instanceof Error ? 'Error' : typeof e}: ${e.message}`;
      }
    };
    const address = t.toDLPack();
    const refused = {};
    for (const [name, value] of Object.entries({
      zero: 0, negative: -8, half: 1.5, nan: NaN, big: 2 ** 32, string: String(address),
      inside: address + 4, elsewhere: 12345,
    })) refused[name] = refusal(value);
    refused.legacy = refusal(address, true);
    const back = Tensor.fromDLPack(address);
    const values = Array.from(back.toArray());
    refused.again = refusal(address);
    const legacy = t.toDLPack(true);
    const legacyValues = Array.from(Tensor.fromDLPack(legacy, true).toArray());
    return { address, refused, values, legacyValues };
  });
  const a = r.address;
  const notAddress = 'is not an address (an integer from 1 to 2^32 - 1); pass what toDLPack() returned';
  const notLive = (x) => `Error: dlport: fromDLPack: address = ${x} is not a live DLPack export of this module: `
    + 'it was never returned by toDLPack(), or was taken back already, or its deleter ran';
  assert.deepEqual(r.refused, {
    zero: `Error: dlport: fromDLPack: address = 0 ${notAddress}`,
    negative: `Error: dlport: fromDLPack: address = -8 ${notAddress}`,
    half: `Error: dlport: fromDLPack: address = 1.5 ${notAddress}`,
    nan: `Error: dlport: fromDLPack: address = NaN ${notAddress}`,
    big: `Error: dlport: fromDLPack: address = 4294967296 ${notAddress}`,
    string: `Error: dlport: fromDLPack: address = "${a}" is not a number; pass what toDLPack() returned`,
    inside: notLive(a + 4),
    elsewhere: notLive(12345),
    legacy: `Error: dlport: fromDLPack: address = ${a} is a DLManagedTensorVersioned (toDLPack()), `
      + 'not a legacy DLManagedTensor (legacy = true); pass legacy = false',
    again: notLive(a),
  });
  assert.deepEqual(r.values, [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(r.legacyValues, [1, 2, 3, 4, 5, 6]);
});

test('without the per-session option, onnxruntime-web takes the environment-wide device; still 0 round trips', async () => {
  const context = await browser.newContext();
  const hidden = await context.newPage();
  const lines = [];
  hidden.on('console', (m) => lines.push(`[${m.type()}] ${m.text()}`));
  hidden.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
  await hidden.addInitScript(installSpies);
  await hidden.addInitScript(hidePerSessionDevice);
  await hidden.goto(`${origin}/`);
  await hidden.waitForFunction(() => globalThis.demo?.loaded, null, { timeout: 120_000 });
  const s = await hidden.evaluate(async () => ({
    error: globalThis.demo.error, runs: globalThis.demo.runs, ortDevice: globalThis.demo.ortDevice,
    shared: globalThis.demo.shared, hidden: globalThis.__hidden, counts: globalThis.__spy.counts,
    envDevice: (await globalThis.ort.env.webgpu.device) === globalThis.dlport.device(),
    device: document.getElementById('device').textContent,
    pageCounter: document.getElementById('roundtrips').textContent,
    status: document.getElementById('status').textContent,
    result: globalThis.demo.result, inputPixels: globalThis.demo.inputPixels,
    mean: globalThis.demo.mean, std: globalThis.demo.std,
  }));
  await context.close();
  assert.equal(s.error, null, `${s.error}\n${lines.join('\n')}`);
  assert.equal(s.ortDevice, 'environment');
  assert.match(s.device, /shared by dlport, TF\.js and onnxruntime-web, which took it through its environment-wide device \(ort\.env\.webgpu\.device\)\.$/);
  assert.equal(s.shared, true);
  assert.equal(s.envDevice, true, 'ort.env.webgpu.device is dlport.device()');
  // One session, made on the first attempt (nothing read the hidden option's getter), on the
  // environment's device.
  assert.deepEqual(s.hidden, { creates: 1, adopted: 1 });
  assert.equal(s.runs, 1);
  assert.deepEqual(s.counts, {}, 'the spies saw no readback during the run');
  assert.equal(s.pageCounter, 'CPU round trips: 0');
  assert.match(s.status, /^Run 1 done; WebGPU reported no errors\.$/);
  const model = JSON.parse(await readFile(join(www, 'model', 'style.json'), 'utf8'));
  const want = reference(s.inputPixels, s.mean, s.std, model);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(s.result[i] - want[i]));
  assert.ok(worst < 1e-4, `largest difference from the CPU reference: ${worst}`);
  console.log(`# per-session option hidden: onnxruntime-web took the device through ${WAYS[s.ortDevice]}; `
    + `counter "${s.pageCounter}"; max |page − reference| = ${worst.toExponential(2)}`);
});

test('without WebGPU the page says what to enable in this browser, and shows no counter', async () => {
  const context = await browser.newContext();
  const bare = await context.newPage();
  // A browser without WebGPU: no navigator.gpu and no GPU* classes.
  await bare.addInitScript(() => {
    delete Navigator.prototype.gpu;
    for (const name of ['GPUBuffer', 'GPUQueue', 'GPUDevice', 'GPUAdapter']) delete globalThis[name];
  });
  await bare.goto(`${origin}/`);
  await bare.waitForFunction(() => globalThis.demo?.loaded, null, { timeout: 60_000 });
  const s = await bare.evaluate(() => ({
    device: document.getElementById('device').textContent,
    help: document.getElementById('help').textContent,
    helpHidden: document.getElementById('help').hidden,
    counterHidden: document.getElementById('roundtrips').hidden,
    counter: document.getElementById('roundtrips').textContent,
    ua: navigator.userAgent,
  }));
  await context.close();
  assert.match(s.device, /WebGPU is not available here \(navigator\.gpu is missing\)/);
  assert.equal(s.helpHidden, false);
  // Chromium on Linux: the flag to enable.
  assert.match(s.ua, /Linux/);
  assert.match(s.help, /^Chrome on Linux: open chrome:\/\/flags\/#enable-unsafe-webgpu, set it to Enabled/);
  assert.doesNotMatch(s.help, /mesa|apt|install/i);
  assert.equal(s.counterHidden, true);
  assert.equal(s.counter, '');
});
