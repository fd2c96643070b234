// Hostile calls into the npm package's JS API, shared by www/tests/hostile.test.mjs (Node) and
// the page that test drives in headless Chromium (not a test file itself). Each case hands
// dlport something a caller controls and that misbehaves: detached buffers, own or throwing
// typed-array properties, Proxies with throwing or lying traps, sparse arrays of length 2^27
// and 2^32 - 1, names that are not strings, options objects with throwing getters, callbacks
// that throw or call back into dlport. Every case must be refused with a dlport `Error` that
// names the argument or field, and `Tensor.fromGpuBuffer` must call `onRelease` exactly as
// often as the case says (once per call whenever it could read the callback).
//
// `runHostile(m, env, calls)` makes `calls` such calls, round robin over the cases, and
// returns what it saw: per-case failures, onRelease and console.error counts, and wasm memory
// before and after (after one warm-up round). Nothing here depends on Node or the browser.

const boom = () => {
  throw new TypeError('hostile');
};

/** A sparse array of `n` holes (costs its maker nothing), made once. */
const sparse = {};
function holes(n) {
  sparse[n] ??= new Array(n);
  return sparse[n];
}

/** An array whose index `k` is a getter that throws. */
function throwingIndex(values, k) {
  const a = values.slice();
  Object.defineProperty(a, k, { get: boom });
  return a;
}

/** The cases: `{ name, call(ctx), message: RegExp, releases?, reports? }`. */
export function hostileCases(m, env) {
  const { Tensor } = m;
  const cases = [];
  const add = (name, message, call, extra = {}) => cases.push({ name, message, call, ...extra });

  // new Tensor(array, shape?, dtype?)
  add('detached buffer', /new Tensor: array's buffer is detached/, () => {
    const a = new Float32Array(4);
    structuredClone(a.buffer, { transfer: [a.buffer] });
    return new Tensor(a, [4]);
  });
  add('own byteOffset past the buffer (and a bad shape)', /new Tensor: shape\[1\] = 2\.5 is not an integer/, () => {
    const a = new Float32Array(4);
    Object.defineProperty(a, 'byteOffset', { value: 2 ** 40 });
    Object.defineProperty(a, 'byteLength', { value: 2 ** 31 });
    return new Tensor(a, [2, 2.5]);
  });
  add('throwing buffer/byteLength/length getters (and a wrong shape)', /new Tensor: shape \[5\] of float32 covers 20 bytes, and the array has 16/, () => {
    const a = new Float32Array(4);
    for (const k of ['buffer', 'byteOffset', 'byteLength', 'length', 'constructor']) {
      Object.defineProperty(a, k, { get: boom });
    }
    return new Tensor(a, [5]);
  });
  add('Proxy of a typed array with throwing traps', /new Tensor: array must be a typed array .*, got an object/, () =>
    new Tensor(new Proxy(new Float32Array(4), { get: boom, getPrototypeOf: boom, has: boom, ownKeys: boom })));
  add('subclass with a throwing length (and a string extent)', /new Tensor: shape\[0\] = "2" is not an integer/, () => {
    class Lying extends Float32Array {
      get length() { throw new Error('lying'); }
    }
    return new Tensor(new Lying(2), ['2']);
  });
  add('prototype swapped to a Proxy', /new Tensor: shape\[0\] = -1/, () => {
    const a = new Int32Array(2);
    Object.setPrototypeOf(a, new Proxy({}, { get: boom, getPrototypeOf: boom }));
    return new Tensor(a, [-1]);
  });
  add('shape: Proxy whose length throws', /new Tensor: reading shape\.length threw/, () =>
    new Tensor(new Float32Array(4), new Proxy([2, 2], { get: (t, k) => (k === 'length' ? boom() : t[k]) })));
  add('shape: a throwing index getter', /new Tensor: reading shape\[1\] threw/, () =>
    new Tensor(new Float32Array(4), throwingIndex([2, 2], 1)));
  add('shape: a getter that calls dlport, then throws', /new Tensor: reading shape\[0\] threw/, () => {
    const a = [4];
    Object.defineProperty(a, 0, {
      get() {
        new Tensor(new Float32Array([1, 2])).free();
        boom();
      },
    });
    return new Tensor(new Float32Array(4), a);
  });
  add('shape: a getter that detaches the array', /new Tensor: array's buffer is detached/, () => {
    const a = new Float32Array(4);
    const shape = [];
    Object.defineProperty(shape, 0, { get() { structuredClone(a.buffer, { transfer: [a.buffer] }); return 4; } });
    shape.length = 1;
    return new Tensor(a, shape);
  });
  add('shape: a getter that shrinks a resizable buffer', /new Tensor: shape \[4\] of float32 covers 16 bytes, and the array has 0/, () => {
    const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
    const a = new Float32Array(buffer);
    const shape = [];
    Object.defineProperty(shape, 0, { get() { buffer.resize(0); return 4; } });
    shape.length = 1;
    return new Tensor(a, shape);
  });
  add('shape: sparse, length 2^32 - 1', /new Tensor: shape has 4294967295 axes; dlport takes at most 64/, () =>
    new Tensor(new Float32Array(4), holes(2 ** 32 - 1)));
  add('shape: sparse, length 2^27', /new Tensor: shape has 134217728 axes/, () =>
    new Tensor(new Float32Array(4), holes(2 ** 27)));
  add('shape: Proxy lying length 2^32 - 1', /new Tensor: shape has 4294967295 axes/, () =>
    new Tensor(new Float32Array(4), new Proxy([], { get: (t, k) => (k === 'length' ? 2 ** 32 - 1 : t[k]) })));
  add('shape: Proxy lying length 3 over 1 element', /new Tensor: shape\[1\] = undefined is not an integer/, () =>
    new Tensor(new Float32Array(4), new Proxy([4], { get: (t, k) => (k === 'length' ? 3 : t[k]) })));
  add('shape: 65 axes', /new Tensor: shape has 65 axes/, () =>
    new Tensor(new Float32Array(1), new Array(65).fill(1)));
  add('shape: a revoked Proxy', /new Tensor: shape is a revoked Proxy/, () => {
    const { proxy, revoke } = Proxy.revocable([1], {});
    revoke();
    return new Tensor(new Float32Array(1), proxy);
  });
  add('shape: a string', /new Tensor: shape must be an array of extents, got "4"/, () =>
    new Tensor(new Float32Array(4), '4'));
  add('shape: a String object', /new Tensor: shape must be an array of extents, got an object/, () =>
    new Tensor(new Float32Array(4), new String('4')));
  add('dtype: a symbol', /new Tensor: dtype must be a string, got a symbol/, () =>
    new Tensor(new Uint8Array(2), undefined, Symbol('float32')));
  add('dtype: an object whose toString throws', /new Tensor: dtype must be a string, got an object/, () =>
    new Tensor(new Uint8Array(2), undefined, { toString: boom, valueOf: boom }));
  add('dtype: a megabyte string', /new Tensor: dtype = "x{40}"… \(1000000 characters\) is not a name dlport knows/, () =>
    new Tensor(new Uint8Array(2), undefined, env.long));
  add('not a typed array: a plain array', /new Tensor: array must be a typed array .*, got an array/, () =>
    new Tensor([1, 2, 3]));
  add('not a typed array: a DataView', /new Tensor: array must be a typed array .*, got an object/, () =>
    new Tensor(new DataView(new ArrayBuffer(8))));

  // Methods of a live tensor (env.base, made before the loop).
  add('toDevice(symbol)', /toDevice: device must be a string, got a symbol/, () => env.base.toDevice(Symbol('webgpu')));
  add('toDevice(object whose toString throws)', /toDevice: device must be a string, got an object/, () =>
    env.base.toDevice({ toString: boom }));
  add('normalize: mean a Proxy whose length throws', /normalize: reading mean\.length threw/, () =>
    env.base.normalize(new Proxy([0], { get: (t, k) => (k === 'length' ? boom() : t[k]) }), [1]));
  add('normalize: mean sparse, length 2^32 - 1', /normalize: mean has 4294967295 values; at most 64/, () =>
    env.base.normalize(holes(2 ** 32 - 1), [1]));
  add('normalize: std with a throwing index getter', /normalize: reading std\[0\] threw/, () =>
    env.base.normalize([0], throwingIndex([1], 0)));
  add('normalize: scale whose valueOf throws', /normalize: scale must be a number, got an object/, () =>
    env.base.normalize([0], [1], { valueOf: boom }));
  add('toDLPack("yes")', /toDLPack: legacy must be a boolean, got "yes"/, () => env.base.toDLPack('yes'));
  add('fromDLPack(Proxy with throwing traps)', /fromDLPack: address = an object is not a number/, () =>
    Tensor.fromDLPack(new Proxy({}, { get: boom, getPrototypeOf: boom, ownKeys: boom })));
  add('fromDLPack(address, "legacy")', /fromDLPack: legacy must be a boolean/, () => Tensor.fromDLPack(8, 'legacy'));

  // Tensor.fromGpuBuffer: every call that could read onRelease calls it exactly once.
  const counted = (more) => Object.defineProperty(more, 'onRelease', {
    value: () => { env.released++; },
    enumerable: true,
  });
  const gpu = (name, message, options, extra = {}) =>
    add(`fromGpuBuffer: ${name}`, message, () => Tensor.fromGpuBuffer(extra.buffer ?? env.buffer, options()), { releases: 1, ...extra });
  const iterating = () => {
    const s = [4];
    s[Symbol.iterator] = boom;
    return s;
  };
  gpu('options.shape with a throwing iterator (and byteOffset -1)', /fromGpuBuffer: options\.byteOffset = -1 is not a non-negative integer/,
    () => counted({ shape: iterating(), byteOffset: -1 }));
  gpu('options.shape with a throwing index getter', /fromGpuBuffer: reading options\.shape\[0\] threw/,
    () => counted({ shape: throwingIndex([4], 0) }));
  gpu('options.shape a Proxy whose length throws', /fromGpuBuffer: reading options\.shape\.length threw/,
    () => counted({ shape: new Proxy([4], { get: (t, k) => (k === 'length' ? boom() : t[k]) }) }));
  gpu('options.shape sparse, length 2^32 - 1', /fromGpuBuffer: options\.shape has 4294967295 axes/,
    () => counted({ shape: holes(2 ** 32 - 1) }));
  gpu('options.shape a throwing getter', /fromGpuBuffer: reading options\.shape threw/,
    () => counted({ get shape() { return boom(); } }));
  gpu('options.shape missing', /fromGpuBuffer: options\.shape must be an array of extents/, () => counted({}));
  gpu('options.shape[0] = 1.5', /fromGpuBuffer: options\.shape\[0\] = 1\.5 is not an integer/, () => counted({ shape: [1.5] }));
  gpu('options.dtype a throwing getter', /fromGpuBuffer: reading options\.dtype threw/,
    () => counted({ shape: [1], get dtype() { return boom(); } }));
  gpu('options.dtype unknown', /fromGpuBuffer: options\.dtype = "float33"/, () => counted({ shape: [1], dtype: 'float33' }));
  gpu('options.dtype a symbol', /fromGpuBuffer: options\.dtype must be a string, got a symbol/,
    () => counted({ shape: [1], dtype: Symbol('f') }));
  gpu('options.byteOffset a throwing getter', /fromGpuBuffer: reading options\.byteOffset threw/,
    () => counted({ shape: [1], get byteOffset() { return boom(); } }));
  gpu('options.byteOffset = 0.5', /fromGpuBuffer: options\.byteOffset = 0\.5 is not a non-negative integer/,
    () => counted({ shape: [1], byteOffset: 0.5 }));
  gpu('options a Proxy: onRelease readable, everything else throws', /fromGpuBuffer: reading options\.(dtype|shape) threw/,
    () => new Proxy({}, { get: (_t, k) => (k === 'onRelease' ? () => { env.released++; } : boom()) }));
  gpu('buffer not a GPUBuffer', /fromGpuBuffer: expected a GPUBuffer, got 5/, () => counted({ shape: [1] }), { buffer: 5 });
  gpu('buffer a Proxy with throwing traps', /fromGpuBuffer: (expected a GPUBuffer|reading buffer\.size threw)/,
    () => counted({ shape: [1] }), { buffer: new Proxy({}, { get: boom, getPrototypeOf: boom }) });
  gpu('buffer usage without STORAGE', /fromGpuBuffer: the buffer's usage is 0x40/, () => counted({ shape: [1] }),
    { buffer: env.uniformBuffer });
  gpu('onRelease throws (and a bad shape)', /fromGpuBuffer: options\.shape must be an array of extents, got "nope"/,
    () => ({ shape: 'nope', onRelease: () => { env.released++; boom(); } }), { reports: 1 });
  gpu('onRelease calls fromGpuBuffer again (and a bad dtype)', /fromGpuBuffer: options\.dtype = "nope"/, () => ({
    shape: [1],
    dtype: 'nope',
    onRelease: () => {
      env.released++;
      try {
        Tensor.fromGpuBuffer(5, counted({ shape: [1] }));
      } catch {
        // Refused, and its own onRelease ran: counted.
      }
    },
  }), { releases: 2 });
  gpu(env.gpu ? 'a shape past the end of the buffer' : 'before init()',
    env.gpu ? /fromGpuBuffer: .*bytes/ : /fromGpuBuffer: call `await init\(\)` first/,
    () => counted({ shape: [env.gpu ? 1 << 20 : 1] }));
  // No callback could be read: nothing to call.
  gpu('options null', /fromGpuBuffer: options must be an object, got null/, () => null, { releases: 0 });
  gpu('options.onRelease a throwing getter', /fromGpuBuffer: reading options\.onRelease threw/,
    () => ({ shape: [1], get onRelease() { return boom(); } }), { releases: 0 });
  gpu('options.onRelease not a function', /fromGpuBuffer: options\.onRelease must be a function, got "dispose"/,
    () => ({ shape: [1], onRelease: 'dispose' }), { releases: 0 });
  return cases;
}

/**
 * Makes `calls` hostile calls (round robin over the cases) after one warm-up round, with
 * console.error counted (not printed) meanwhile. `env` needs `buffer` and `uniformBuffer`
 * (GPUBuffers, or objects standing in for them without WebGPU), `gpu` (whether init() ran)
 * and `memory` (the module's WebAssembly.Memory).
 */
export function runHostile(m, env, calls) {
  env.long ??= 'x'.repeat(1_000_000);
  env.released = 0;
  env.base = new m.Tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
  const cases = hostileCases(m, env);
  const failures = new Map();
  let reports = 0;
  const consoleError = console.error;
  console.error = () => { reports++; };
  const note = (c, what) => {
    const f = failures.get(c.name) ?? { count: 0, first: what };
    f.count++;
    failures.set(c.name, f);
  };
  const once = (c) => {
    const released = env.released;
    const reported = reports;
    let error;
    let result;
    try {
      result = c.call();
    } catch (e) {
      error = e;
    }
    if (error === undefined) {
      note(c, 'no error');
      result?.free?.();
    } else if (!(error instanceof Error) || typeof error.message !== 'string') {
      note(c, `threw a non-Error: ${String(error)}`);
    } else if (!error.message.startsWith('dlport: ') || !c.message.test(error.message)) {
      note(c, `message ${JSON.stringify(error.message)} does not match ${c.message}`);
    }
    const dr = env.released - released;
    if (dr !== (c.releases ?? 0)) note(c, `onRelease ran ${dr} times, expected ${c.releases ?? 0}`);
    if (reports - reported !== (c.reports ?? 0)) note(c, `console.error ran ${reports - reported} times, expected ${c.reports ?? 0}`);
  };
  let memoryBefore;
  let made = 0;
  const started = Date.now();
  try {
    for (const c of cases) once(c);
    memoryBefore = env.memory.buffer.byteLength;
    for (; made < calls; made++) once(cases[made % cases.length]);
  } finally {
    console.error = consoleError;
  }
  const memoryAfter = env.memory.buffer.byteLength;
  env.base.free();
  return {
    cases: cases.length,
    calls: made,
    ms: Date.now() - started,
    releases: env.released,
    reports,
    failures: [...failures].map(([name, f]) => `${name}: ${f.count}x, first: ${f.first}`),
    memoryBefore,
    memoryAfter,
  };
}

/** A normal call after the storm: a tensor made, read, exported and taken back, with the
 *  right values; returns a description of anything wrong (empty when all is well). */
export function normalCall(m) {
  const wrong = [];
  const values = [1.5, -2, 3.25, 4, 5, -6];
  const t = new m.Tensor(new Float32Array(values), [2, 3]);
  if (`${t.shape}` !== '2,3' || `${t.strides}` !== '3,1' || t.dtype !== 'float32' || t.device !== 'cpu') {
    wrong.push(`tensor: shape ${t.shape}, strides ${t.strides}, ${t.dtype} on ${t.device}`);
  }
  const back = m.Tensor.fromDLPack(t.toDLPack());
  const got = [...back.toArray()];
  if (`${got}` !== `${values}`) wrong.push(`values ${got}, expected ${values}`);
  const ints = new m.Tensor(new BigInt64Array([2n ** 40n, -3n])).toArray();
  if (ints[0] !== 2n ** 40n || ints[1] !== -3n) wrong.push(`int64 values ${ints}`);
  t.free();
  back.free();
  return wrong;
}
