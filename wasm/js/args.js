// Reads what JavaScript callers hand to dlport, in JavaScript, before anything crosses into
// Rust. Bundled into the npm package by wasm-bindgen as a snippet; every function here is
// imported with `catch`, so whatever a caller's value does (a throwing getter, a Proxy trap, a
// detached buffer, a lying `length`) ends here as a thrown dlport `Error`, which the Rust side
// turns into its own refusal: no JS exception ever unwinds through wasm frames.
//
// Each reader returns plain data (numbers, strings, fresh typed arrays made here) or throws an
// `Error` whose message starts with "dlport: <call>: " and names the argument or field; the
// caller's own exception is its `cause`. Typed arrays are read through the engine's own
// %TypedArray% getters, captured when the module loads, so a subclass, an own `byteOffset`
// property or a later change to the prototypes cannot lie about the bytes. Counts are
// checked against their limits before anything is allocated.

const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
const reflectApply = Reflect.apply;
const uncurry = (f) => Function.prototype.call.bind(f);
const getter = (object, key) => {
  // An engine without the accessor (an older browser's GPUBuffer without `mapState`) reads
  // it as absent.
  const get = Object.getOwnPropertyDescriptor(object, key)?.get;
  return get === undefined ? () => undefined : uncurry(get);
};
const typedArrayName = getter(TypedArrayPrototype, Symbol.toStringTag);
const typedArrayBuffer = getter(TypedArrayPrototype, 'buffer');
const typedArrayByteOffset = getter(TypedArrayPrototype, 'byteOffset');
const typedArrayByteLength = getter(TypedArrayPrototype, 'byteLength');
const typedArrayLength = getter(TypedArrayPrototype, 'length');
const typedArraySet = uncurry(TypedArrayPrototype.set);
const memoryBuffer = getter(WebAssembly.Memory.prototype, 'buffer');
const isArray = Array.isArray;
const isInteger = Number.isInteger;
const stringify = JSON.stringify;
const slice = uncurry(String.prototype.slice);
const DlportError = Error;
// In a browser with WebGPU, a GPUBuffer's fields are read through GPUBuffer.prototype's own
// getters: they brand-check (anything else, a Proxy included, throws) and run no caller code.
const gpuBufferGetters = typeof GPUBuffer === 'function'
  ? {
      size: getter(GPUBuffer.prototype, 'size'),
      usage: getter(GPUBuffer.prototype, 'usage'),
      mapState: getter(GPUBuffer.prototype, 'mapState'),
    }
  : undefined;
const U8 = Uint8Array;
const F32 = Float32Array;
const F64 = Float64Array;

/** The most axes a tensor has (DLPack's `ndim` limit in dlport: `MAX_NDIM`). */
const MAX_NDIM = 64;
/** The longest dtype or device name read (the longest real one is far shorter). */
const MAX_NAME = 64;
/** The largest integer a JS number holds exactly, plus one (2^53). */
const EXACT = 2 ** 53;

/**
 * The exported form of a reader: `[undefined, result]`, or `[error]` when it refused.
 * Returning the refusal instead of throwing it keeps the import on its plain path (a
 * `catch` import that throws costs wasm-bindgen a table slot each time); the imports still
 * have `catch`, for what no reader foresaw.
 */
const settled = (reader) =>
  function settledReader() {
    try {
      return [undefined, reflectApply(reader, undefined, arguments)];
    } catch (e) {
      return [e ?? fail('?', 'a reader threw nothing')];
    }
  };

function fail(call, message, cause) {
  const text = `dlport: ${call}: ${message}`;
  return cause === undefined ? new DlportError(text) : new DlportError(text, { cause });
}

/**
 * `value` in a message, in at most about 60 characters, without running any code of the
 * caller's: no getter, no `toString`, no Proxy trap.
 */
export function dlportShow(value) {
  try {
    switch (typeof value) {
      case 'number':
      case 'boolean':
      case 'undefined':
        return String(value);
      case 'bigint':
        return `${String(value).length > 40 ? 'a large bigint' : String(value)}n`;
      case 'string':
        return value.length > 40
          ? `${stringify(slice(value, 0, 40))}… (${value.length} characters)`
          : stringify(value);
      case 'symbol':
        return 'a symbol';
      case 'function':
        return 'a function';
      default: {
        if (value === null) return 'null';
        const name = typedArrayName(value);
        if (name !== undefined) return `a ${name}`;
        return isArray(value) ? 'an array' : 'an object';
      }
    }
  } catch {
    // A revoked Proxy: `Array.isArray` throws.
    return 'a revoked Proxy';
  }
}

/** What a caller's exception says, shown as `dlportShow` would, or its message when it is a
 *  plain `Error` whose message is a string (read without running the caller's code). */
function thrown(e) {
  try {
    if (e instanceof DlportError) {
      const d = Object.getOwnPropertyDescriptor(e, 'message');
      if (d && typeof d.value === 'string') return stringify(slice(d.value, 0, 80));
    }
  } catch {
    // A Proxy's getPrototypeOf or getOwnPropertyDescriptor trap threw: show it as a value.
  }
  return dlportShow(e);
}

/** Reads `object[key]`; a throwing getter or Proxy trap becomes a dlport Error naming it. */
function read(call, what, object, key) {
  try {
    return object[key];
  } catch (e) {
    throw fail(call, `reading ${what} threw ${thrown(e)}`, e);
  }
}

/** `object` must be an object (or a function) to read fields from. */
function needObject(call, what, object) {
  if (object === null || (typeof object !== 'object' && typeof object !== 'function')) {
    throw fail(call, `${what} must be an object, got ${dlportShow(object)}`);
  }
}

/**
 * A typed array, read through the engine's own getters: `[name, byteLength, bytes]`, `bytes`
 * a fresh `Uint8Array` over the same memory (nothing copied yet). A detached buffer, a Proxy,
 * a DataView or anything else is refused by name.
 */
function typedArrayOf(call, array) {
  const name = typedArrayName(array);
  if (name === undefined) {
    throw fail(call, `array must be a typed array (Float32Array, Int32Array, Uint8Array, …), got ${dlportShow(array)}`);
  }
  const buffer = typedArrayBuffer(array);
  const offset = typedArrayByteOffset(array);
  const length = typedArrayByteLength(array);
  let bytes;
  try {
    bytes = new U8(buffer, offset, length);
  } catch (e) {
    throw fail(call, `array's buffer is detached (transferred to a worker or by ArrayBuffer.prototype.transfer()); pass an array whose buffer is still attached`, e);
  }
  return [name, length, bytes];
}

/** Copies `bytes` (a Uint8Array from `dlportTypedArray`) into wasm memory at `at`, if it
 *  still has the `length` bytes it had when it was read. */
function copyInOf(call, bytes, memory, at, length) {
  if (typedArrayByteLength(bytes) !== length) {
    throw fail(call, `array's buffer changed size while dlport read it (${length} bytes, now ${typedArrayByteLength(bytes)})`);
  }
  typedArraySet(new U8(memoryBuffer(memory), at, length), bytes);
}

/**
 * Extents (or any list of integers) from a JS array: a fresh Float64Array, each an integer of
 * magnitude below 2^53. The length is checked against the 64-axis limit before anything is
 * read or allocated; elements are read by index (no iterator), each read guarded.
 */
function extentsOf(call, what, value) {
  let array;
  try {
    array = isArray(value);
  } catch (e) {
    throw fail(call, `${what} is a revoked Proxy; pass an array of extents`, e);
  }
  if (!array) throw fail(call, `${what} must be an array of extents, got ${dlportShow(value)}`);
  const length = read(call, `${what}.length`, value, 'length');
  if (!(typeof length === 'number' && isInteger(length) && length >= 0 && length <= MAX_NDIM)) {
    throw fail(call, `${what} has ${dlportShow(length)} axes; dlport takes at most ${MAX_NDIM}`);
  }
  const out = new F64(length);
  for (let k = 0; k < length; k++) {
    const x = read(call, `${what}[${k}]`, value, k);
    if (!(typeof x === 'number' && isInteger(x))) {
      throw fail(call, `${what}[${k}] = ${dlportShow(x)} is not an integer`);
    }
    if (!(x > -EXACT && x < EXACT)) {
      // An integer, but one a JS number may hold inexactly: dlport refuses rather than guess.
      throw fail(
        call,
        `${what}[${k}] = ${dlportShow(x)} is past JavaScript's safe integer range ` +
          `(magnitude below 2^53 = ${EXACT}); give a smaller extent`,
      );
    }
    out[k] = x;
  }
  return out;
}

/**
 * A list of numbers (an array or a typed array of numbers, at most `max` of them) as a fresh
 * Float32Array; NaN and infinities are numbers too, the caller's kernel decides.
 */
function numbersOf(call, what, value, max) {
  let length;
  const name = typedArrayName(value);
  if (name !== undefined) {
    if (name === 'BigInt64Array' || name === 'BigUint64Array') {
      throw fail(call, `${what} must hold numbers, got a ${name}`);
    }
    length = typedArrayLength(value);
  } else {
    let array;
    try {
      array = isArray(value);
    } catch (e) {
      throw fail(call, `${what} is a revoked Proxy; pass an array of numbers`, e);
    }
    if (!array) throw fail(call, `${what} must be an array of numbers or a Float32Array, got ${dlportShow(value)}`);
    length = read(call, `${what}.length`, value, 'length');
  }
  if (!(typeof length === 'number' && isInteger(length) && length >= 0 && length <= max)) {
    throw fail(call, `${what} has ${dlportShow(length)} values; at most ${max}`);
  }
  const out = new F32(length);
  for (let k = 0; k < length; k++) {
    const x = read(call, `${what}[${k}]`, value, k);
    if (typeof x !== 'number') throw fail(call, `${what}[${k}] = ${dlportShow(x)} is not a number`);
    out[k] = x;
  }
  return out;
}

/** A short string (a dtype or device name): `undefined` when `value` is undefined or null and
 *  `optional`, else a string of at most 64 characters, or a refusal naming `what`. */
function nameOf(call, what, value, optional) {
  if (optional && (value === undefined || value === null)) return undefined;
  if (typeof value !== 'string') throw fail(call, `${what} must be a string, got ${dlportShow(value)}`);
  if (value.length > MAX_NAME) {
    throw fail(call, `${what} = ${dlportShow(value)} is not a name dlport knows (at most ${MAX_NAME} characters)`);
  }
  return value;
}

/**
 * `options.onRelease` of `Tensor.fromGpuBuffer`, read before anything else: a function, or
 * `undefined` when there is none. Whatever this returns, the caller owns from here on.
 */
function onReleaseOf(call, options) {
  needObject(call, 'options', options);
  const f = read(call, 'options.onRelease', options, 'onRelease');
  if (f === undefined || typeof f === 'function') return f;
  throw fail(call, `options.onRelease must be a function, got ${dlportShow(f)}`);
}

/** A number field: `undefined` when absent and `fallback` is given, else a number. */
function numberField(call, what, object, key, fallback) {
  const x = read(call, what, object, key);
  if (x === undefined && fallback !== undefined) return fallback;
  if (typeof x !== 'number') throw fail(call, `${what} must be a number, got ${dlportShow(x)}`);
  return x;
}

/** `x` must be an integer from 0 to 2^53 - 1. */
function wholeNumber(call, what, x, hint) {
  if (!(isInteger(x) && x >= 0 && x < EXACT)) {
    throw fail(call, `${what} = ${dlportShow(x)} is not a non-negative integer${hint}`);
  }
}

/**
 * Everything else `Tensor.fromGpuBuffer` reads, in this order: `[size, usage, mapState,
 * dtype, shape, byteOffset]` (`mapState` and `dtype` may be undefined, `shape` a Float64Array).
 * `size`, `usage` and `byteOffset` are non-negative integers below 2^53.
 */
function gpuBufferArgsOf(call, buffer, options) {
  if (buffer === null || typeof buffer !== 'object') {
    throw fail(call, `expected a GPUBuffer, got ${dlportShow(buffer)}`);
  }
  let size;
  let usage;
  let mapState;
  if (gpuBufferGetters !== undefined) {
    try {
      size = gpuBufferGetters.size(buffer);
      usage = gpuBufferGetters.usage(buffer);
      mapState = gpuBufferGetters.mapState(buffer);
    } catch (e) {
      throw fail(call, `expected a GPUBuffer, got ${dlportShow(buffer)}`, e);
    }
  } else {
    // No WebGPU here (Node): any object with the fields, each read guarded.
    size = numberField(call, 'buffer.size', buffer, 'size');
    usage = numberField(call, 'buffer.usage', buffer, 'usage');
    mapState = read(call, 'buffer.mapState', buffer, 'mapState');
  }
  wholeNumber(call, 'buffer.size', size, ': is this a GPUBuffer?');
  wholeNumber(call, 'buffer.usage', usage, ': is this a GPUBuffer?');
  if (mapState !== undefined && typeof mapState !== 'string') {
    throw fail(call, `buffer.mapState must be a string, got ${dlportShow(mapState)}`);
  }
  const dtype = nameOf(call, 'options.dtype', read(call, 'options.dtype', options, 'dtype'), true);
  const shapeValue = read(call, 'options.shape', options, 'shape');
  if (shapeValue === undefined) throw fail(call, 'options.shape must be an array of extents');
  const shape = extentsOf(call, 'options.shape', shapeValue);
  const byteOffset = numberField(call, 'options.byteOffset', options, 'byteOffset', 0);
  wholeNumber(call, 'options.byteOffset', byteOffset, '');
  return [size, usage, mapState === undefined ? undefined : slice(mapState, 0, MAX_NAME), dtype, shape, byteOffset];
}

/** Calls a release callback; what it throws is reported on the console, never rethrown (it
 *  runs from `free()`, a FinalizationRegistry or a refusal, where no caller could catch it). */
export function dlportRelease(callback) {
  try {
    callback();
  } catch (e) {
    try {
      console.error('dlport: a fromGpuBuffer onRelease callback threw:', e);
    } catch {
      // A console that throws: nothing left to report to.
    }
  }
}

/**
 * Guards the methods and getters of `Tensor.prototype` (found from `instance`): each checks,
 * before wasm-bindgen's glue hands `this.__wbg_ptr` to Rust, that `this` is an object whose
 * own `__wbg_ptr` is a live (non-zero) handle, and refuses anything else by name: a freed
 * tensor, the prototype itself, an object that is not a Tensor. Rust would otherwise throw
 * from inside wasm (abandoning its frames). `free()` of a freed tensor does nothing.
 */
const GUARDED = Symbol('dlport: Tensor.prototype guarded');

export function dlportGuardTensor(instance) {
  const proto = Object.getPrototypeOf(instance);
  if (proto[GUARDED]) return; // the start function is exported: a second call changes nothing
  Object.defineProperty(proto, GUARDED, { value: true });
  const apply = Reflect.apply;
  const describe = Object.getOwnPropertyDescriptor;
  const live = (self) => {
    try {
      const d = self !== null && typeof self === 'object' ? describe(self, '__wbg_ptr') : undefined;
      return d !== undefined && 'value' in d && typeof d.value === 'number' && d.value !== 0;
    } catch {
      return false; // a Proxy's getOwnPropertyDescriptor trap threw
    }
  };
  const guard = (f, name, isFree) =>
    function guarded(...args) {
      if (!live(this)) {
        if (isFree) return undefined;
        throw fail(`Tensor.${name}`, `this is ${dlportShow(this)}, not a live Tensor (was it freed?)`);
      }
      return apply(f, this, args);
    };
  for (const key of Reflect.ownKeys(proto)) {
    if (key === 'constructor' || key === '__destroy_into_raw') continue;
    const d = describe(proto, key);
    const name = typeof key === 'symbol' ? 'dispose' : key;
    const isFree = key === 'free' || key === Symbol.dispose;
    if (typeof d.value === 'function') d.value = guard(d.value, name, isFree);
    if (typeof d.get === 'function') d.get = guard(d.get, name, false);
    Object.defineProperty(proto, key, d);
  }
}

export const dlportTypedArray = settled(typedArrayOf);
export const dlportExtents = settled(extentsOf);
export const dlportCopyIn = settled(copyInOf);
export const dlportNumbers = settled(numbersOf);
export const dlportName = settled(nameOf);
export const dlportOnRelease = settled(onReleaseOf);
export const dlportGpuBufferArgs = settled(gpuBufferArgsOf);
