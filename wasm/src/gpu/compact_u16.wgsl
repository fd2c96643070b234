
// 2-byte elements at an even offset, in rows of a multiple of 16 bytes: one invocation writes
// 8 elements of one row, from one seek; no element straddles two source words.
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;

fn half_at(b: i32) -> u32 {
  let u = u32(b);
  return (src[u / 4u] >> ((u % 4u) * 8u)) & 0xffffu;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let q = invocation(gid, nwg);
  if (q * 16u >= p.out_bytes) { return; }
  let step = last_stride() * 2;
  let base = i32(p.src_offset) + seek(q * 8u) * 2;
  var out = vec4<u32>();
  for (var j = 0; j < 4; j = j + 1) {
    let b = base + 2 * j * step;
    out[j] = half_at(b) | (half_at(b + step) << 16u);
  }
  dst[q] = out;
}
