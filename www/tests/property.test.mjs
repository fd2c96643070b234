// A property test of the npm package's JS API under Node, against a reference written here:
// random typed arrays (every kind, at random byte offsets inside larger buffers, some with
// lying own properties, subclasses or a swapped prototype), random shapes (right, wrong,
// non-integer, too many axes, Proxies and throwing getters), random dtype overrides and bad
// names; every outcome (the tensor's dtype, shape, strides and bytes, or the refusal's
// message) is predicted by the reference. Successes are then viewed through DLPack with random
// axis permutations and reversed axes, and the strided -> compact copy is checked byte for
// byte. `Tensor.fromGpuBuffer` gets random options (each field right, wrong or hostile): the
// reference predicts the refusal, and onRelease must run exactly once. The case count is
// printed (FUZZING.md records it). PROPERTY_CASES=<n> and PROPERTY_SEED=<n> change the run.
// Run: `node --test www/tests/` after `scripts/wasm-build.sh`; DLPORT_PKG=<dir> as in
// hostile.test.mjs.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { view, reference } from './strided.mjs';

const pkg = process.env.DLPORT_PKG
  ? pathToFileURL(`${process.env.DLPORT_PKG.replace(/\/$/, '')}/`)
  : new URL('../../wasm/pkg/', import.meta.url);
const CASES = Number(process.env.PROPERTY_CASES ?? 10_000);
const SEED = Number(process.env.PROPERTY_SEED ?? 0x2f6e2b1) >>> 0;

let b;
before(async () => {
  const m = await import(new URL('dlport.js?property', pkg).href);
  const wasm = m.initSync({ module: readFileSync(new URL('dlport_bg.wasm', pkg)) });
  b = { m, wasm };
});

/** xorshift32 from a fixed seed: a failure names its case number and reproduces. */
function rng(seed) {
  let x = seed || 1;
  const next = () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
  const int = (n) => next() % n;
  return { int, pick: (a) => a[int(a.length)], chance: (p) => next() / 2 ** 32 < p };
}

const KINDS = [
  [Float32Array, 'float32', ['int32', 'uint32']],
  [Float64Array, 'float64', ['int64', 'uint64', 'complex64']],
  [Int8Array, 'int8', ['uint8']],
  [Int16Array, 'int16', ['float16', 'bfloat16', 'uint16']],
  [Int32Array, 'int32', ['float32', 'uint32']],
  [BigInt64Array, 'int64', ['float64', 'uint64']],
  [Uint8Array, 'uint8', ['int8', 'float8_e4m3fn']],
  [Uint8ClampedArray, 'uint8', ['int8']],
  [Uint16Array, 'uint16', ['float16', 'bfloat16', 'int16']],
  [Uint32Array, 'uint32', ['float32', 'int32']],
  [BigUint64Array, 'uint64', ['int64', 'float64']],
];
const boom = () => { throw new RangeError('property'); };

/** Random extents of product `n` (0 to 4 axes). */
function factor(r, n) {
  const ndim = n === 1 ? r.int(4) : 1 + r.int(4);
  const shape = [];
  let left = n;
  for (let k = 0; k < ndim - 1; k++) {
    const divisors = [];
    for (let d = 1; d <= left; d++) if (left % d === 0) divisors.push(d);
    const d = left === 0 ? r.pick([0, 1, 3]) : r.pick(divisors);
    shape.push(d);
    left = d === 0 ? left : left / d;
  }
  if (ndim > 0) shape.push(shape.includes(0) && n === 0 ? r.int(3) : left);
  return shape;
}

/** One `new Tensor` case: the arguments, and what the reference expects. */
function tensorCase(r) {
  const [Kind, natural, overrides] = r.pick(KINDS);
  const width = Kind.BYTES_PER_ELEMENT;
  const count = r.pick([0, 1, 2, 3, 6, 12, 24, 60, 1 + r.int(300)]);
  const lead = r.int(5);
  const backing = new Kind(lead + count + r.int(4));
  const big = Kind === BigInt64Array || Kind === BigUint64Array;
  for (let i = 0; i < backing.length; i++) backing[i] = big ? BigInt(r.int(2 ** 31)) - 2n ** 30n : r.int(256) - 64;
  let array = backing.subarray(lead, lead + count);
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength).slice();
  // Decorations that must change nothing.
  const decoration = r.int(5);
  if (decoration === 1) {
    Object.defineProperty(array, 'byteOffset', { value: r.int(1000) });
    Object.defineProperty(array, 'byteLength', { get: boom });
    Object.defineProperty(array, 'buffer', { value: new ArrayBuffer(r.int(9)) });
  } else if (decoration === 2) {
    class Sub extends Kind { get length() { return boom(); } }
    array = new Sub(array);
  } else if (decoration === 3) {
    Object.setPrototypeOf(array, new Proxy({}, { get: boom }));
  }
  let dtype;
  let expect = { dtype: natural, width };
  const d = r.int(10);
  if (d === 1) dtype = natural;
  else if (d === 2 || d === 3) {
    dtype = r.pick(overrides);
    expect = { dtype: dtype === 'float8_e4m3fn' ? 'float8_e4m3fn' : dtype, width: dtype === 'complex64' ? 8 : width };
  } else if (d === 4 && r.chance(0.5)) {
    dtype = r.pick(['float33', 'int7x', '', 'x'.repeat(65)]);
    expect = { error: dtype.length > 64 ? /dtype = "x{40}"… \(65 characters\) is not a name/ : /new Tensor: dtype = "/ };
  } else if (d === 4) {
    dtype = r.pick([7, Symbol('d'), { toString: boom }, true]);
    expect = { error: /new Tensor: dtype must be a string/ };
  }
  const elements = (count * width) / expect.width;
  let shape;
  const s = r.int(12);
  if (expect.error) {
    shape = [count];
  } else if (s === 0) {
    shape = undefined;
    expect.shape = Number.isInteger(elements) ? [elements] : null;
    if (!Number.isInteger(elements)) expect = { error: /not a whole number of/ };
  } else if (s <= 6) {
    if (!Number.isInteger(elements)) {
      shape = [count];
      expect = { error: /covers/ };
    } else {
      shape = factor(r, elements);
      expect.shape = shape;
    }
  } else if (s === 7) {
    shape = [elements + 1 + r.int(3)];
    expect = { error: /new Tensor: shape \[\d+\] of \S+ covers \d+ bytes, and the array has \d+/ };
  } else if (s === 8) {
    const k = r.int(3);
    const bad = r.pick([1.5, NaN, -Infinity, '2', null, undefined, 2 ** 53, 1n]);
    shape = [1, 1, 1];
    shape[k] = bad;
    expect = {
      error: bad === 2 ** 53
        ? new RegExp(`new Tensor: shape\\[${k}\\] = 9007199254740992 is past JavaScript's safe integer range`)
        : new RegExp(`new Tensor: shape\\[${k}\\] = \\S+ is not an integer`),
    };
  } else if (s === 9) {
    const n = r.pick([65, 1000, 2 ** 27, 2 ** 32 - 1]);
    shape = n > 1000 ? new Array(n) : new Array(n).fill(1);
    expect = { error: new RegExp(`new Tensor: shape has ${n} axes; dlport takes at most 64`) };
  } else if (s === 10) {
    const k = r.int(2);
    shape = [1, 1];
    Object.defineProperty(shape, k, { get: boom });
    expect = { error: new RegExp(`new Tensor: reading shape\\[${k}\\] threw`) };
  } else {
    shape = new Proxy([1], { get: (t, key) => (key === 'length' ? boom() : t[key]) });
    expect = { error: /new Tensor: reading shape\.length threw/ };
  }
  if (!expect.error && expect.shape.some((e) => e < 0)) expect = { error: /shape/ };
  return { Kind, array, shape, dtype, bytes, expect, natural: dtype === undefined || dtype === natural };
}

function rowMajor(shape) {
  const strides = new Array(shape.length);
  let step = 1;
  for (let k = shape.length - 1; k >= 0; k--) {
    strides[k] = step;
    step *= Math.max(shape[k], 1); // dlport, like NumPy, steps over an empty axis as over one of 1
  }
  return strides;
}

/** A random permutation or reversal of a compact tensor's axes, as a strided view. */
function randomView(r, shape, width) {
  const strides = rowMajor(shape);
  const order = shape.map((_, k) => k);
  for (let k = order.length - 1; k > 0; k--) {
    const j = r.int(k + 1);
    [order[k], order[j]] = [order[j], order[k]];
  }
  const vShape = order.map((k) => shape[k]);
  const vStrides = order.map((k) => strides[k]);
  let byteOffset = 0;
  const flip = r.int(vShape.length);
  if (r.chance(0.5)) {
    byteOffset += (vShape[flip] - 1) * vStrides[flip] * width;
    vStrides[flip] = -vStrides[flip];
  }
  return { shape: vShape, strides: vStrides, byteOffset };
}

/** One `fromGpuBuffer` case (no WebGPU under Node: every call is refused). */
function gpuCase(r, counter) {
  const expectations = [];
  const onReleaseKind = r.int(8);
  const options = {};
  let releases = 1;
  if (onReleaseKind === 0) {
    Object.defineProperty(options, 'onRelease', { get: boom, enumerable: true });
    expectations.push(/fromGpuBuffer: reading options\.onRelease threw/);
    releases = 0;
  } else if (onReleaseKind === 1) {
    options.onRelease = r.pick(['dispose', 5, {}]);
    expectations.push(/fromGpuBuffer: options\.onRelease must be a function/);
    releases = 0;
  } else if (onReleaseKind === 2) {
    options.onRelease = () => { counter.n++; boom(); };
    counter.throwing++;
  } else {
    options.onRelease = () => { counter.n++; };
  }
  const buffer = { size: 64, usage: r.chance(0.8) ? 0x84 | r.int(2) * 8 : 0x40, mapState: r.pick(['unmapped', 'unmapped', 'mapped']) };
  const field = (name, good, bads) => {
    if (r.chance(0.8)) {
      if (good !== undefined) options[name] = good;
      return;
    }
    const [value, message] = r.pick(bads);
    if (value === boom) Object.defineProperty(options, name, { get: boom, enumerable: true });
    else options[name] = value;
    expectations.push(message);
  };
  field('dtype', r.pick([undefined, 'float32', 'uint8', 'float16']), [
    [boom, /fromGpuBuffer: reading options\.dtype threw/],
    [Symbol('x'), /fromGpuBuffer: options\.dtype must be a string/],
  ]);
  field('shape', [1 + r.int(4), r.int(3)], [
    [boom, /fromGpuBuffer: reading options\.shape threw/],
    [undefined, /fromGpuBuffer: options\.shape must be an array of extents/],
    [[1.25], /fromGpuBuffer: options\.shape\[0\] = 1\.25 is not an integer/],
    [new Array(2 ** 32 - 1), /fromGpuBuffer: options\.shape has 4294967295 axes/],
    [new Proxy([1], { get: (t, k) => (k === 'length' ? boom() : t[k]) }), /fromGpuBuffer: reading options\.shape\.length threw/],
  ]);
  if (!('shape' in options) && expectations.length === 0) expectations.push(/fromGpuBuffer: options\.shape must be an array of extents/);
  field('byteOffset', r.pick([undefined, 0, 16]), [
    [boom, /fromGpuBuffer: reading options\.byteOffset threw/],
    [-1, /fromGpuBuffer: options\.byteOffset = -1 is not a non-negative integer/],
    [0.5, /fromGpuBuffer: options\.byteOffset = 0\.5 is not/],
    ['16', /fromGpuBuffer: options\.byteOffset must be a number, got "16"/],
  ]);
  // The checks after reading, in dlport's order.
  if ((buffer.usage & 0x84) !== 0x84) expectations.push(/fromGpuBuffer: the buffer's usage is 0x40/);
  if (buffer.mapState !== 'unmapped') expectations.push(/fromGpuBuffer: the buffer is "mapped"; unmap it/);
  expectations.push(/fromGpuBuffer: call `await init\(\)` first/);
  // The first refusal in reading order: onRelease, then fields in the order read.
  return { buffer, options, expect: expectations[0], releases };
}

test(`property: random tensors, shapes, dtypes, offsets, strides and hostile objects against a reference (${CASES} cases)`, () => {
  const { m } = b;
  const r = rng(SEED);
  const counts = { made: 0, refused: 0, views: 0, gpu: 0 };
  const counter = { n: 0, throwing: 0 };
  const consoleError = console.error;
  let reports = 0;
  console.error = () => { reports++; };
  try {
    for (let i = 0; i < CASES; i++) {
      const where = `case ${i} (seed ${SEED})`;
      if (r.int(4) === 0) {
        const c = gpuCase(r, counter);
        const before = counter.n;
        assert.throws(() => m.Tensor.fromGpuBuffer(c.buffer, c.options), c.expect, where);
        assert.equal(counter.n - before, c.releases, `${where}: onRelease calls`);
        counts.gpu++;
        continue;
      }
      const c = tensorCase(r);
      if (c.expect.error) {
        assert.throws(() => new m.Tensor(c.array, c.shape, c.dtype), (e) => e instanceof Error && c.expect.error.test(e.message), `${where}: expected ${c.expect.error}`);
        counts.refused++;
        continue;
      }
      const t = new m.Tensor(c.array, c.shape, c.dtype);
      assert.equal(t.dtype, c.expect.dtype, where);
      assert.deepEqual(t.shape, c.expect.shape, where);
      assert.deepEqual(t.strides, rowMajor(c.expect.shape), where);
      assert.equal(t.device, 'cpu');
      assert.ok(Buffer.from(t.toBytes()).equals(Buffer.from(c.bytes)), `${where}: toBytes`);
      if (c.natural) {
        const got = t.toArray();
        const want = new (c.Kind === Uint8ClampedArray ? Uint8Array : c.Kind)(c.bytes.buffer);
        assert.equal(Object.getPrototypeOf(got), Object.getPrototypeOf(want), `${where}: toArray() kind`);
        assert.deepEqual([...got], [...want], `${where}: toArray()`);
      }
      counts.made++;
      const shape = c.expect.shape;
      if (shape.length >= 2 && shape.every((e) => e > 0) && c.expect.width <= 8) {
        const v = randomView(r, shape, c.expect.width);
        const strided = view(b, t, v); // consumes t
        assert.ok(Buffer.from(strided.toBytes()).equals(Buffer.from(reference(c.bytes, c.expect.width, v))), `${where}: strided view ${JSON.stringify(v)}`);
        strided.free();
        counts.views++;
      } else {
        t.free();
      }
    }
  } finally {
    console.error = consoleError;
  }
  assert.equal(reports, counter.throwing, 'each throwing onRelease reported once');
  console.log(`[property] ${CASES} cases (seed ${SEED}): ${counts.made} tensors made and checked, ${counts.views} of them as strided views, ${counts.refused} refusals predicted, ${counts.gpu} fromGpuBuffer refusals with exact onRelease counts (${counter.n} calls)`);
});
