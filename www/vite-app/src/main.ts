// A user's app: `npm install dlport-<version>.tgz`, then plain imports, no Vite configuration.
import initWasm, { init, Tensor, wasmBuild, type TensorArray, type TensorData } from 'dlport';

interface Result {
  build: 'simd128' | 'scalar';
  shape: number[];
  float32: number[];
  int32: number[];
  int64: string[];
  bfloat16Bits: number[];
  kinds: string[];
  dtype: string;
  webgpu: number[] | string;
}

async function main(): Promise<Result> {
  await initWasm();
  const data: TensorData = new Float32Array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
  const t = new Tensor(data, [2, 3]);
  const shape: number[] = t.shape;
  const f = t.toArray();
  if (!(f instanceof Float32Array)) throw new Error(`float32 gave ${f.constructor.name}`);
  const i = new Tensor(new Int32Array([7, -8, 9])).toArray() as Int32Array;
  const big = new Tensor(new BigInt64Array([2n ** 40n, -3n])).toArray();
  if (!(big instanceof BigInt64Array)) throw new Error(`int64 gave ${big.constructor.name}`);
  const bf: TensorArray = new Tensor(new Uint16Array([0x3f80, 0xc000]), [2], 'bfloat16').toArray();
  const release: () => void = t[Symbol.dispose]; // `using t = …` where the target allows it
  void release;

  // @ts-expect-error a plain array is not a typed array: the data argument is typed
  void (() => new Tensor([1, 2, 3]));
  // @ts-expect-error shape is number[]
  void (() => new Tensor(new Float32Array(2), ['2']));

  let webgpu: number[] | string;
  try {
    await init();
    const g = t.toDevice('webgpu');
    const back = await g.toHost();
    webgpu = Array.from(back.toArray() as Float32Array);
    g.free();
    back.free();
  } catch (e) {
    webgpu = `no WebGPU: ${(e as Error).message}`;
  }
  const result: Result = {
    build: wasmBuild(),
    shape,
    float32: Array.from(f),
    int32: Array.from(i),
    int64: Array.from(big, (x) => x.toString()),
    bfloat16Bits: Array.from(bf as Uint16Array),
    kinds: [f, i, big, bf].map((a) => a.constructor.name),
    dtype: t.dtype,
    webgpu,
  };
  t.free();
  return result;
}

const out = document.getElementById('out')!;
main().then(
  (r) => {
    out.textContent = JSON.stringify(r, null, 2);
    out.dataset.done = 'ok';
  },
  (e: unknown) => {
    out.textContent = `error: ${e instanceof Error ? e.stack ?? e.message : String(e)}`;
    out.dataset.done = 'error';
  },
);
