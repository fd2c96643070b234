// Compile-time check of the npm package's generated TypeScript types (tsc --noEmit): the API
// the demo uses type-checks, and misuse is a type error (each @ts-expect-error must fire).
import initWasm, { device, init, Tensor, wasmBuild, type GpuBufferOptions, type TensorArray } from '../../wasm/pkg/dlport.js';

export async function typed(buffer: GPUBuffer, release: () => void): Promise<number[]> {
  await initWasm();
  const build: 'simd128' | 'scalar' = wasmBuild();
  void build;
  await init();
  const gpu: GPUDevice = device();
  gpu.pushErrorScope('validation');
  const options: GpuBufferOptions = { dtype: 'int32', shape: [1, 64, 64, 3], byteOffset: 0, onRelease: release };
  const x: Tensor = Tensor.fromGpuBuffer(buffer, options);
  const y: Tensor = x.normalize(new Float32Array([0.485, 0.456, 0.406]), new Float32Array([0.229, 0.224, 0.225]), 1 / 255);
  const b: GPUBuffer = y.gpuBuffer;
  const host: Tensor = await y.toHost();
  const bytes: Uint8Array = host.toBytes();
  const values: TensorArray = host.toArray();
  const made = new Tensor(new Int32Array([1, 2, 3, 4]), [2, 2]);
  const extents: number[] = made.shape;
  void values;
  void extents;
  const address: number = y.toDLPack();
  using again = Tensor.fromDLPack(address);
  const legacyAddress: number = made.toDLPack(true);
  using legacy = Tensor.fromDLPack(legacyAddress, true);
  void legacy;
  x.free();
  void b;
  void bytes;
  return [...again.shape, ...y.strides, y.byteOffset];
}

export function misuse(buffer: GPUBuffer): void {
  // @ts-expect-error shape is required
  Tensor.fromGpuBuffer(buffer, { dtype: 'float32' });
  // @ts-expect-error shape holds numbers
  Tensor.fromGpuBuffer(buffer, { shape: ['64'] });
  // @ts-expect-error onRelease is a function
  Tensor.fromGpuBuffer(buffer, { shape: [1], onRelease: 'dispose' });
  // @ts-expect-error the first argument is a GPUBuffer
  Tensor.fromGpuBuffer(new ArrayBuffer(8), { shape: [2] });
  // @ts-expect-error the data is a typed array, not any value
  void new Tensor([1, 2, 3]);
  // @ts-expect-error shape is a number[]
  void new Tensor(new Float32Array(4), new Float64Array([2, 2]));
  // @ts-expect-error a DLPack address is the number toDLPack() returned
  Tensor.fromDLPack('8');
  // @ts-expect-error wasmBuild() names the build: 'simd128' or 'scalar', no other string
  const other: 'relaxed-simd' = wasmBuild();
  void other;
  // @ts-expect-error device() is a GPUDevice, not a string
  const s: string = device();
  void s;
}
