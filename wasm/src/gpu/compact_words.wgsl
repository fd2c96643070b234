
// Elements of 4, 8 or 16 bytes at a word-aligned offset, in rows of a multiple of 16 bytes:
// one invocation writes 16 output bytes, all in one row, from one seek and four word loads.
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let q = invocation(gid, nwg);
  if (q * 16u >= p.out_bytes) { return; }
  let words = p.elem / 4u;
  let step = last_stride() * i32(words);
  let base = i32(p.src_offset / 4u) + seek(q * 16u / p.elem) * i32(words);
  var out = vec4<u32>();
  for (var j = 0u; j < 4u; j = j + 1u) {
    out[j] = src[u32(base + i32(j / words) * step + i32(j % words))];
  }
  dst[q] = out;
}
