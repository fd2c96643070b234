// The hostile calls of www/tests/hostile.mjs against the npm package in a page of Debian's
// headless Chromium (driven by playwright-core), with WebGPU (SwiftShader): 10^5 calls, each a
// dlport Error naming the argument, onRelease counted exactly, GPUBuffers real (a fake one
// is refused by GPUBuffer's own brand check); then a normal call with the right values, a
// foreign GPUBuffer adopted, read back and released exactly once, wasm memory unchanged and
// the JS heap flat; and nothing the buffer table held for a released adopted buffer (the
// GPUBuffer, onRelease and what it references) stays alive.
// Run: `node --test www/tests/` after `scripts/wasm-build.sh`; DLPORT_PKG=<dir> as in
// hostile.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { join, dirname, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = process.env.DLPORT_PKG ?? join(here, '..', '..', 'wasm', 'pkg');
const CALLS = 100_000;
const types = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

let server;
let browser;
let page;
let origin;
const consoleLines = [];

before(async () => {
  // /pkg/ serves the package, /tests/ this folder, / an empty page.
  server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const [root, rest] = path.startsWith('/pkg/') ? [pkgDir, path.slice(5)]
      : path.startsWith('/tests/') ? [here, path.slice(7)] : [null, ''];
    try {
      if (root === null) {
        res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>dlport hostile</title>');
        return;
      }
      const file = normalize(join(root, rest));
      if (!file.startsWith(root)) throw new Error('outside');
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': types[file.slice(file.lastIndexOf('.'))] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox', '--enable-unsafe-webgpu', '--disable-gpu-sandbox',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-first-run', '--disable-quic', '--js-flags=--expose-gc', '--enable-precise-memory-info',
    ],
  });
  page = await browser.newPage();
  page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`[pageerror] ${e.message}`));
  await page.goto(`${origin}/`);
});

after(async () => {
  await browser?.close();
  server?.close();
});

test(`Chromium: ${CALLS} hostile calls, each a dlport Error; then normal calls work; memory flat`, async () => {
  const r = await page.evaluate(async (calls) => {
    const m = await import('/pkg/dlport.js');
    const wasm = await m.default();
    await m.init();
    const { runHostile, normalCall } = await import('/tests/hostile.mjs');
    const device = m.device();
    const env = {
      buffer: device.createBuffer({ size: 64, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC }),
      uniformBuffer: device.createBuffer({ size: 64, usage: GPUBufferUsage.UNIFORM }),
      gpu: true,
      memory: wasm.memory,
    };
    runHostile(m, env, 0);
    globalThis.gc();
    const heapBefore = performance.memory.usedJSHeapSize;
    const out = runHostile(m, env, calls);
    globalThis.gc();
    out.heapBefore = heapBefore;
    out.heapAfter = performance.memory.usedJSHeapSize;
    out.normal = normalCall(m);
    // A foreign GPUBuffer after the storm: wrapped without a copy, read back, released once.
    const values = new Float32Array([1, -2, 3.5, 4, 5, 6]);
    const b = device.createBuffer({ size: 16 + 24, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC, mappedAtCreation: true });
    new Float32Array(b.getMappedRange(16)).set(values);
    b.unmap();
    let released = 0;
    const t = m.Tensor.fromGpuBuffer(b, { shape: [2, 3], byteOffset: 16, onRelease: () => { released++; } });
    const host = await t.toHost();
    out.gpuValues = [...host.toArray()];
    host.free();
    out.releasedBeforeFree = released;
    t.free();
    t.free();
    out.releasedAfterFree = released;
    // What the buffer table held for an adopted buffer (its GPUBuffer and onRelease, with
    // what the callback references) is collectable once the tensor is released.
    const refs = [];
    const adoptAndRelease = () => {
      const payload = new Float64Array(1 << 17);
      const onRelease = () => payload.length;
      const gb = device.createBuffer({ size: 64, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
      refs.push(new WeakRef(onRelease), new WeakRef(payload), new WeakRef(gb));
      const a = m.Tensor.fromGpuBuffer(gb, { shape: [16], onRelease });
      const exported = a.toDLPack();
      a.free();
      m.Tensor.fromDLPack(exported).free();
    };
    for (let i = 0; i < 10; i++) adoptAndRelease();
    for (let i = 0; i < 5; i++) {
      globalThis.gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    out.pinned = refs.filter((r) => r.deref() !== undefined).length;
    out.memoryEnd = wasm.memory.buffer.byteLength;
    return out;
  }, CALLS);
  console.log(`[hostile] chromium: ${r.calls} calls over ${r.cases} cases in ${r.ms} ms; onRelease ran ${r.releases} times, console.error ${r.reports}; wasm memory ${r.memoryBefore} -> ${r.memoryAfter} bytes; JS heap ${r.heapBefore} -> ${r.heapAfter}`);
  assert.deepEqual(r.failures, [], `${r.failures.length} cases misbehaved\n${consoleLines.slice(-20).join('\n')}`);
  assert.equal(r.calls, CALLS);
  assert.equal(r.memoryAfter, r.memoryBefore, 'wasm memory grew');
  assert.ok(r.heapAfter - r.heapBefore < 8 << 20, `the JS heap grew by ${r.heapAfter - r.heapBefore} bytes`);
  assert.deepEqual(r.normal, []);
  assert.deepEqual(r.gpuValues, [1, -2, 3.5, 4, 5, 6]);
  assert.equal(r.releasedBeforeFree, 0);
  assert.equal(r.releasedAfterFree, 1, 'onRelease ran exactly once, at free()');
  assert.equal(r.pinned, 0, `${r.pinned} of 30 objects behind released adopted buffers are still alive`);
});
