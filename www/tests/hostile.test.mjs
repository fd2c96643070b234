// Hostile JavaScript against the npm package under Node (issue 29, items 1, 3, 4 and 6): 10^5
// calls that hand dlport detached buffers, throwing getters, Proxies, sparse arrays, huge
// lengths and throwing callbacks (www/tests/hostile.mjs), each refused with a dlport Error
// naming the argument; then a normal call with the right values, wasm memory unchanged and
// the JS heap flat. Refused calls with huge inputs grow no wasm memory; every fromGpuBuffer
// refusal calls onRelease exactly once; nothing dlport refused stays reachable from it; a
// freed tensor is refused by name. Both wasm builds of the package are attacked.
// Run: `node --test www/tests/` after `scripts/wasm-build.sh`. DLPORT_PKG=<dir> points it at
// another build of the package (to see the old code fail).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { hostileCases, runHostile, normalCall } from './hostile.mjs';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const pkg = process.env.DLPORT_PKG
  ? pathToFileURL(`${process.env.DLPORT_PKG.replace(/\/$/, '')}/`)
  : new URL('../../wasm/pkg/', import.meta.url);
const CALLS = 100_000;
const builds = {};
let instances = 0;

async function load(file) {
  const m = await import(new URL(`dlport.js?hostile=${instances++}`, pkg).href);
  const wasm = m.initSync({ module: readFileSync(new URL(file, pkg)) });
  return { m, wasm };
}

/** What stands in for GPUBuffers without WebGPU: objects with the fields dlport reads. */
const fakeBuffers = () => ({
  buffer: { size: 64, usage: 0x84, mapState: 'unmapped' },
  uniformBuffer: { size: 64, usage: 0x40, mapState: 'unmapped' },
  gpu: false,
});

before(async () => {
  builds.simd128 = await load('dlport_bg.wasm');
  builds.scalar = await load('dlport_scalar_bg.wasm');
});

async function settle() {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 0));
  }
}

for (const build of ['simd128', 'scalar']) {
  test(`${build}: ${CALLS} hostile calls, each a dlport Error; then a normal call works; memory flat`, async () => {
    const { m, wasm } = builds[build];
    const env = { ...fakeBuffers(), memory: wasm.memory };
    // A first round warms every path (and the JIT); the heap is measured around the rest.
    runHostile(m, env, 0);
    await settle();
    const heapBefore = process.memoryUsage().heapUsed;
    const rssBefore = process.memoryUsage().rss;
    const r = runHostile(m, env, CALLS);
    await settle();
    const heapAfter = process.memoryUsage().heapUsed;
    const rssAfter = process.memoryUsage().rss;
    console.log(`[hostile] ${build}: ${r.calls} calls over ${r.cases} cases in ${r.ms} ms; onRelease ran ${r.releases} times, console.error ${r.reports}; wasm memory ${r.memoryBefore} -> ${r.memoryAfter} bytes; JS heap ${heapBefore} -> ${heapAfter}, rss ${rssBefore} -> ${rssAfter}`);
    assert.deepEqual(r.failures, [], `${r.failures.length} cases misbehaved`);
    assert.equal(r.calls, CALLS);
    assert.equal(r.memoryAfter, r.memoryBefore, 'wasm memory grew');
    assert.ok(heapAfter - heapBefore < 8 << 20, `the JS heap grew by ${heapAfter - heapBefore} bytes`);
    assert.ok(rssAfter - rssBefore < 64 << 20, `rss grew by ${rssAfter - rssBefore} bytes`);
    assert.deepEqual(normalCall(m), []);
  });
}

test('refused calls with huge inputs are refused before anything is reserved: wasm memory does not grow', () => {
  const { m, wasm } = builds.simd128;
  const { Tensor } = m;
  const base = new Tensor(new Float32Array(6), [2, 3]);
  const big = new Float32Array(2 ** 26); // 256 MiB
  const huge = new Uint8Array(2 ** 31 + 16); // above wasm32's isize::MAX: the allocation limit
  const calls = [
    [() => new Tensor(big, [3]), /new Tensor: shape \[3\] of float32 covers 12 bytes, and the array has 268435456/],
    [() => new Tensor(big, [2 ** 26 + 1]), /covers 268435460 bytes, and the array has 268435456/],
    [() => new Tensor(big, undefined, 'float64x'), /new Tensor: dtype = "float64x"/],
    [() => new Tensor(huge), /new Tensor: .*2147483664 bytes, above the allocation limit/],
    [() => new Tensor(new Float32Array(4), new Array(2 ** 27)), /shape has 134217728 axes/],
    [() => new Tensor(new Float32Array(4), new Array(2 ** 32 - 1)), /shape has 4294967295 axes/],
    [() => new Tensor(new Float32Array(4), { length: 2 ** 32 - 1 }), /shape must be an array of extents, got an object/],
    [() => base.normalize(big, [1]), /normalize: mean has 67108864 values; at most 64/],
    [() => base.normalize([0], new Array(2 ** 32 - 1)), /normalize: std has 4294967295 values/],
    [() => base.toDevice('w'.repeat(50_000_000)), /toDevice: device = "w{40}"… \(50000000 characters\)/],
    [() => Tensor.fromGpuBuffer({ size: 64, usage: 0x84 }, { shape: new Array(2 ** 32 - 1) }), /options\.shape has 4294967295 axes/],
  ];
  const before = wasm.memory.buffer.byteLength;
  for (const [call, message] of calls) {
    assert.throws(call, (e) => e instanceof Error && e.message.startsWith('dlport: ') && message.test(e.message), String(message));
    assert.equal(wasm.memory.buffer.byteLength, before, `wasm memory grew on the call refused with ${message}`);
  }
  base.free();
  assert.deepEqual(normalCall(m), []);
});

test('fromGpuBuffer: onRelease runs exactly once on every refusal (22 kinds), never when it could not be read', () => {
  const { m, wasm } = builds.simd128;
  const env = { ...fakeBuffers(), memory: wasm.memory, released: 0, long: 'x' };
  const cases = hostileCases(m, env).filter((c) => c.name.startsWith('fromGpuBuffer: '));
  const refusals = cases.filter((c) => c.releases > 0);
  assert.ok(refusals.length >= 10, `${refusals.length} refusal kinds`);
  const consoleError = console.error;
  let reports = 0;
  console.error = () => { reports++; };
  try {
    for (const c of cases) {
      const [released, reported] = [env.released, reports];
      assert.throws(() => c.call(), c.message, c.name);
      assert.equal(env.released - released, c.releases, `${c.name}: onRelease calls`);
      assert.equal(reports - reported, c.reports ?? 0, `${c.name}: console.error reports`);
    }
  } finally {
    console.error = consoleError;
  }
  console.log(`[hostile] fromGpuBuffer: ${refusals.length} refusal kinds with onRelease, ${cases.length - refusals.length} without a readable one`);
});

/** Refused calls whose arguments (and what they reference) only WeakRefs in `refs` see. */
function refuseAndForget(m, refs) {
  const payload = new Float64Array(1 << 17); // 1 MiB the callback keeps alive
  const onRelease = () => payload.length;
  const shape = [1, 2.5];
  const array = new Float32Array(1 << 18);
  refs.push(new WeakRef(onRelease), new WeakRef(payload), new WeakRef(shape), new WeakRef(array));
  assert.throws(() => m.Tensor.fromGpuBuffer({ size: 64, usage: 0x84 }, { shape, onRelease }), /options\.shape\[1\] = 2\.5/);
  assert.throws(() => new m.Tensor(array, shape), /shape\[1\] = 2\.5/);
  let e;
  try {
    m.Tensor.fromGpuBuffer({ size: 64, usage: 0x84 }, { shape: [1], get dtype() { throw new Error('mine'); }, onRelease });
  } catch (err) {
    e = err;
  }
  assert.equal(e.cause?.message, 'mine', 'the caller\'s exception is the cause');
  // A shape whose getter throws, with the callback: a throw that once unwound through wasm
  // frames, leaving what they held (this options object, so the callback) in the table.
  const throwing = [1];
  Object.defineProperty(throwing, 0, { get() { throw new Error('mine'); } });
  refs.push(new WeakRef(throwing));
  assert.throws(() => m.Tensor.fromGpuBuffer({ size: 64, usage: 0x84 }, { shape: throwing, onRelease }), /reading options\.shape\[0\] threw/);
}

test('nothing dlport refused stays reachable from it: callbacks, shapes and arrays are collected', async () => {
  const { m } = builds.simd128;
  const refs = [];
  // In a function of its own: an async test's own block scopes may outlive the loop.
  for (let i = 0; i < 20; i++) refuseAndForget(m, refs);
  await settle();
  const alive = refs.filter((r) => r.deref() !== undefined).length;
  assert.equal(alive, 0, `${alive} of ${refs.length} objects dlport refused are still alive`);
  assert.equal(refs.length, 100);
});

test('a freed tensor, the prototype and other `this` values are refused by name; free() twice does nothing', () => {
  const { m, wasm } = builds.simd128;
  const t = new m.Tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
  t.free();
  const before = wasm.memory.buffer.byteLength;
  for (let i = 0; i < 20_000; i++) {
    assert.throws(() => t.shape, /^Error: dlport: Tensor\.shape: this is an object, not a live Tensor \(was it freed\?\)$/);
    assert.throws(() => t.toBytes(), /dlport: Tensor\.toBytes: .*not a live Tensor/);
    assert.throws(() => Object.getOwnPropertyDescriptor(m.Tensor.prototype, 'dtype').get.call(m.Tensor.prototype), /dlport: Tensor\.dtype/);
    assert.throws(() => m.Tensor.prototype.toDLPack.call(5), /dlport: Tensor\.toDLPack: this is 5/);
    assert.throws(() => m.Tensor.prototype.toArray.call(new Proxy({}, { getOwnPropertyDescriptor() { throw new Error('trap'); } })), /dlport: Tensor\.toArray/);
    assert.equal(t.free(), undefined);
    t[Symbol.dispose]?.();
  }
  assert.equal(wasm.memory.buffer.byteLength, before);
  assert.deepEqual(normalCall(m), []);
});

test('lying typed arrays give their real bytes: own byteOffset/length/buffer, subclasses, offsets into a larger buffer', () => {
  const { m } = builds.simd128;
  const backing = new Float32Array([9, 8, 1, 2, 3, 4, 7]);
  const a = backing.subarray(2, 6);
  Object.defineProperty(a, 'byteOffset', { value: 0 });
  Object.defineProperty(a, 'length', { value: 100 });
  Object.defineProperty(a, 'buffer', { value: new ArrayBuffer(1) });
  class Mine extends Float32Array {}
  for (const array of [a, new Mine([1, 2, 3, 4])]) {
    const t = new m.Tensor(array, [2, 2]);
    assert.deepEqual([...t.toArray()], [1, 2, 3, 4]);
    assert.equal(t.dtype, 'float32');
    t.free();
  }
});
