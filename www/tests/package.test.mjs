// The npm package's two wasm builds under Node (no browser): `dlport_bg.wasm` (simd128) and
// `dlport_scalar_bg.wasm` (scalar) turn strided host tensors into compact ones with exactly
// the bytes of a naive reference (transposes of 1-, 2-, 4- and 8-byte elements with ragged
// edges, reversed axes, broadcasts), and the package's default initialisation picks the SIMD
// build where `WebAssembly.validate` accepts a SIMD module (Node >= 20 does), the scalar one
// where it does not (stubbed here), while a module, URL or bytes passed in still win.
// Run: `node --test www/tests/` after `scripts/wasm-build.sh` (scripts/test.sh does).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { pkg, files, freshModule, loadBuild, view, reference, randomBytes, compact } from './strided.mjs';

const builds = {};

before(async () => {
  for (const f of Object.values(files)) {
    assert.ok(existsSync(new URL(f, pkg)), `wasm/pkg/${f} is missing: run scripts/wasm-build.sh first`);
  }
  for (const build of Object.keys(files)) builds[build] = await loadBuild(build);
});

// Each case is a view over a compact [rows, cols] (or [batch, rows, cols]) source tensor.
function cases(elem) {
  const out = [];
  const transposes = [[16, 16], [37, 53], [129, 67], [1000, 3], [3, 1000], [1, 301], [256, 512], [517, 263]];
  for (const [r, c] of transposes) {
    out.push({ name: `transpose ${r}x${c}`, source: [r, c], shape: [c, r], strides: [1, c] });
  }
  // a[1:, 2:].T: a byte offset, and rows that start off any 16-byte boundary.
  out.push({ name: 'transpose of a sub-block 131x70 [1:, 2:]', source: [131, 70], shape: [68, 130], strides: [1, 70], byteOffset: (70 + 2) * elem });
  // A batch of transposes: [3, 45, 71] -> [3, 71, 45].
  out.push({ name: 'batched transpose 3x45x71', source: [3, 45, 71], shape: [3, 71, 45], strides: [45 * 71, 1, 71] });
  for (const [r, c] of [[67, 129], [5, 33], [1, 4099], [300, 17]]) {
    out.push({ name: `reversed rows ${r}x${c} [:, ::-1]`, source: [r, c], shape: [r, c], strides: [c, -1], byteOffset: (c - 1) * elem });
    out.push({ name: `both axes reversed ${r}x${c} [::-1, ::-1]`, source: [r, c], shape: [r, c], strides: [-c, -1], byteOffset: (r * c - 1) * elem });
    out.push({ name: `reversed axis 0 ${r}x${c} [::-1]`, source: [r, c], shape: [r, c], strides: [-c, 1], byteOffset: (r - 1) * c * elem });
  }
  // The transpose of a[::-1]: a transpose whose source rows are read downwards.
  out.push({ name: 'transpose of a[::-1] 77x91', source: [77, 91], shape: [91, 77], strides: [1, -91], byteOffset: 76 * 91 * elem });
  out.push({ name: 'broadcast of row 0, 200x37 (stride 0)', source: [200, 37], shape: [200, 37], strides: [0, 1] });
  out.push({ name: 'broadcast of column 0, 37x200 (stride 0)', source: [37, 200], shape: [37, 200], strides: [1, 0] });
  return out;
}

for (const elem of [1, 2, 4, 8]) {
  test(`strided -> compact, ${elem}-byte elements: both builds give the reference's bytes`, () => {
    for (const c of cases(elem)) {
      const numel = c.source.reduce((a, b) => a * b, 1);
      const source = randomBytes(numel * elem, 0x51ed + numel * elem);
      const expected = reference(source, elem, c);
      for (const [build, b] of Object.entries(builds)) {
        const v = view(b, compact(b, source, elem, c.source), c);
        assert.deepEqual(v.shape, c.shape);
        assert.deepEqual(v.strides, c.strides);
        const got = v.toBytes();
        v.free();
        if (!Buffer.from(got).equals(Buffer.from(expected))) {
          const at = got.findIndex((x, i) => x !== expected[i]);
          assert.fail(`${build}, ${c.name}, ${elem}-byte: ${got.length} bytes, expected ${expected.length}; first difference at byte ${at}`);
        }
      }
    }
  });
}

test('wasmBuild() says which build each file is', () => {
  assert.equal(builds.simd128.m.wasmBuild(), 'simd128');
  assert.equal(builds.scalar.m.wasmBuild(), 'scalar');
});

// The default `init()` fetches `new URL(file, import.meta.url)`; Node's fetch has no file:
// URLs, so this stands in for the web server, serving the package folder and noting each URL.
function serveFiles() {
  const requested = [];
  const original = globalThis.fetch;
  globalThis.fetch = async (url) => {
    const u = new URL(String(url));
    requested.push(u.pathname.split('/').pop());
    return new Response(readFileSync(u), { headers: { 'content-type': 'application/wasm' } });
  };
  return { requested, restore: () => { globalThis.fetch = original; } };
}

/** Runs `body` with `WebAssembly.validate` replaced by `stub`; returns what it was asked. */
async function withValidate(stub, body) {
  const original = WebAssembly.validate;
  const asked = [];
  WebAssembly.validate = (bytes) => {
    asked.push(new Uint8Array(bytes));
    return stub(bytes);
  };
  try {
    await body();
  } finally {
    WebAssembly.validate = original;
  }
  return asked;
}

async function defaultInit(options) {
  const server = serveFiles();
  try {
    const m = await freshModule();
    await m.default(options);
    return { m, requested: server.requested };
  } finally {
    server.restore();
  }
}

/** One small transpose through `m`, checked against the reference. */
function checkCopy(m, wasm) {
  const c = { shape: [33, 21], strides: [1, 33] };
  const source = randomBytes(21 * 33 * 4);
  const v = view({ m, wasm }, compact({ m }, source, 4, [21, 33]), c);
  assert.deepEqual(v.toBytes(), reference(source, 4, c));
  v.free();
}

test('default init() on Node loads the simd128 build (Node >= 20 validates SIMD)', async () => {
  assert.ok(Number(process.versions.node.split('.')[0]) >= 20, `Node ${process.versions.node}`);
  let m;
  let requested;
  const asked = await withValidate(WebAssembly.validate.bind(WebAssembly), async () => {
    const server = serveFiles();
    try {
      m = await freshModule();
      const wasm = await m.default();
      requested = server.requested;
      checkCopy(m, wasm);
    } finally {
      server.restore();
    }
  });
  assert.deepEqual(requested, [files.simd128]);
  assert.equal(m.wasmBuild(), 'simd128');
  // What the loader asks is a real SIMD module: the engine accepts it, and it uses v128 (0x7b).
  assert.equal(asked.length, 1);
  assert.ok(WebAssembly.validate(asked[0]));
  assert.ok(asked[0].includes(0x7b) && asked[0].includes(0xfd), 'a v128 type and a SIMD opcode');
});

test('default init() loads the scalar build where WebAssembly.validate says no (or throws)', async () => {
  for (const stub of [() => false, () => { throw new TypeError('no SIMD here'); }]) {
    let loaded;
    await withValidate(stub, async () => {
      const server = serveFiles();
      try {
        const m = await freshModule();
        const wasm = await m.default();
        checkCopy(m, wasm);
        loaded = { m, requested: server.requested };
      } finally {
        server.restore();
      }
    });
    assert.deepEqual(loaded.requested, [files.scalar]);
    assert.equal(loaded.m.wasmBuild(), 'scalar');
  }
});

test('an explicit module, URL or bytes wins over the detection', async () => {
  const bytes = (build) => readFileSync(new URL(files[build], pkg));
  // The scalar build, asked for, on an engine with SIMD: by URL, by bytes, by compiled module.
  const byUrl = await defaultInit({ module_or_path: new URL(files.scalar, pkg) });
  assert.deepEqual(byUrl.requested, [files.scalar]);
  assert.equal(byUrl.m.wasmBuild(), 'scalar');
  const byBytes = await defaultInit({ module_or_path: bytes('scalar') });
  assert.deepEqual(byBytes.requested, []);
  assert.equal(byBytes.m.wasmBuild(), 'scalar');
  const sync = await freshModule();
  sync.initSync({ module: new WebAssembly.Module(bytes('scalar')) });
  assert.equal(sync.wasmBuild(), 'scalar');
  // The SIMD build, passed in while the detection would say no: still the SIMD build.
  await withValidate(() => false, async () => {
    const r = await defaultInit({ module_or_path: new URL(files.simd128, pkg) });
    assert.deepEqual(r.requested, [files.simd128]);
    assert.equal(r.m.wasmBuild(), 'simd128');
  });
});
