// Helpers for the npm package's CPU copy tests and the wasm copy bench (not a test file itself):
// loading one of the package's two wasm builds as a module instance of its own, strided views
// made through DLPack, and the naive reference copy they are checked against.
//
// The package's JS API makes only compact host tensors (`new Tensor(typedArray, shape)`); a
// strided one comes, as in any DLPack exchange, from a DLManagedTensorVersioned in wasm memory:
// `toDLPack()` exports a compact tensor, its shape, strides and byte_offset are rewritten in
// place (same ndim, inside the same buffer), and `Tensor.fromDLPack()` takes it back as the
// strided view. `toBytes()` of that view is the strided → compact copy under test.
import { readFileSync } from 'node:fs';

export const pkg = new URL('../../wasm/pkg/', import.meta.url);
export const files = { simd128: 'dlport_bg.wasm', scalar: 'dlport_scalar_bg.wasm' };

let instances = 0;

/** A fresh instance of the package's module (a query string makes it a module of its own). */
export function freshModule() {
  return import(new URL(`dlport.js?instance=${instances++}`, pkg).href);
}

/** The package's module instantiated synchronously from one build's bytes: `{m, wasm}`. */
export async function loadBuild(build) {
  const m = await freshModule();
  const wasm = m.initSync({ module: readFileSync(new URL(files[build], pkg)) });
  return { m, wasm };
}

// DLManagedTensorVersioned on wasm32: version (2 × u32), manager_ctx, deleter (4-byte
// pointers), flags (u64) at 16, then DLTensor at 24: data 0, device 4, ndim 12, dtype 16,
// shape 20, strides 24 (pointers to ndim i64 each), byte_offset 32 (u64).
const DL_TENSOR = 24;

/**
 * The strided view `{shape, strides, byteOffset}` (strides in elements, offset in bytes from
 * the buffer's start) over `base`, a compact tensor of the same ndim. `base` is consumed.
 */
export function view({ m, wasm }, base, { shape, strides, byteOffset = 0 }) {
  const address = base.toDLPack();
  const dv = new DataView(wasm.memory.buffer);
  const t = address + DL_TENSOR;
  const ndim = dv.getInt32(t + 12, true);
  if (ndim !== shape.length || ndim !== strides.length) throw new Error(`ndim ${ndim} != ${shape.length}`);
  const shapes = dv.getUint32(t + 20, true);
  const stridePtr = dv.getUint32(t + 24, true);
  // The export is what the layout above says: its extents are base's.
  base.shape.forEach((e, i) => {
    if (dv.getBigInt64(shapes + 8 * i, true) !== BigInt(e)) throw new Error('unexpected DLTensor layout');
  });
  shape.forEach((e, i) => dv.setBigInt64(shapes + 8 * i, BigInt(e), true));
  strides.forEach((s, i) => dv.setBigInt64(stridePtr + 8 * i, BigInt(s), true));
  dv.setBigUint64(t + 32, dv.getBigUint64(t + 32, true) + BigInt(byteOffset), true);
  base.free();
  return m.Tensor.fromDLPack(address);
}

/** The bytes `toBytes()` must return for the view: element by element, row-major. */
export function reference(source, elem, { shape, strides, byteOffset = 0 }) {
  const numel = shape.reduce((a, b) => a * b, 1);
  const out = new Uint8Array(numel * elem);
  const index = new Array(shape.length).fill(0);
  for (let n = 0; n < numel; n++) {
    let at = byteOffset;
    for (let k = 0; k < shape.length; k++) at += index[k] * strides[k] * elem;
    for (let b = 0; b < elem; b++) out[n * elem + b] = source[at + b];
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

/** Unsigned typed arrays by element size (the copies move bytes; the dtype is irrelevant). */
export const arrays = { 1: Uint8Array, 2: Uint16Array, 4: Uint32Array, 8: BigUint64Array };

/** `bytes` random bytes from a fixed seed (xorshift32), so a failure reproduces. */
export function randomBytes(bytes, seed = 0x9e3779b9) {
  const out = new Uint8Array(bytes);
  let x = seed >>> 0;
  for (let i = 0; i < bytes; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** A compact tensor of `shape` holding `bytes` as elements of `elem` bytes. */
export function compact({ m }, bytes, elem, shape) {
  const Array = arrays[elem];
  return new m.Tensor(new Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / elem), shape);
}
