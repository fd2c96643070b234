
// 1-byte elements in rows of a multiple of 16 bytes: one invocation writes 16 elements of one
// row, from one seek.
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let q = invocation(gid, nwg);
  if (q * 16u >= p.out_bytes) { return; }
  let step = last_stride();
  let base = i32(p.src_offset) + seek(q * 16u);
  var out = vec4<u32>();
  for (var j = 0; j < 4; j = j + 1) {
    let b = base + 4 * j * step;
    out[j] = byte_at(b) | (byte_at(b + step) << 8u) | (byte_at(b + 2 * step) << 16u)
      | (byte_at(b + 3 * step) << 24u);
  }
  dst[q] = out;
}
