// The normalization kernel: one invocation per element; the source is read as words and the
// element picked by kind (0 float32, 1 int32, 2 uint32, 3 uint8).
struct Params {
  n: u32, channels: u32, kind: u32, src_offset: u32,
  scale: f32, pad0: u32, pad1: u32, pad2: u32,
  mean: array<vec4<f32>, 16>,
  stdev: array<vec4<f32>, 16>,
};
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 64u;
  if (i >= p.n) { return; }
  var x: f32;
  switch p.kind {
    case 0u: { x = bitcast<f32>(src[p.src_offset / 4u + i]); }
    case 1u: { x = f32(bitcast<i32>(src[p.src_offset / 4u + i])); }
    case 2u: { x = f32(src[p.src_offset / 4u + i]); }
    default: {
      let b = p.src_offset + i;
      x = f32((src[b / 4u] >> ((b % 4u) * 8u)) & 0xffu);
    }
  }
  let c = i % p.channels;
  dst[i] = (x * p.scale - p.mean[c / 4u][c % 4u]) / p.stdev[c / 4u][c % 4u];
}
