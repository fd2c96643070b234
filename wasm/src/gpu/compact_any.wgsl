
// Any element size, any offset, any layout: one invocation writes one output word, byte by
// byte, from wherever the layout puts each byte.
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = invocation(gid, nwg);
  if (w * 4u >= p.out_bytes) { return; }
  var word = 0u;
  for (var b = 0u; b < 4u; b = b + 1u) {
    let ob = w * 4u + b;
    if (ob >= p.out_bytes) { break; }
    let at = i32(p.src_offset) + seek(ob / p.elem) * i32(p.elem) + i32(ob % p.elem);
    word = word | (byte_at(at) << (b * 8u));
  }
  dst[w] = word;
}
