// The strided -> compact gather: one invocation writes one output word, byte by byte, from
// wherever the source layout puts each byte (any element size, any offset, negative and zero
// strides).
struct Params {
  ndim: u32, elem: u32, out_bytes: u32, src_offset: u32,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<i32>, 2>,
};
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.x + gid.y * nwg.x * 64u;
  if (w * 4u >= p.out_bytes) { return; }
  var word = 0u;
  for (var b = 0u; b < 4u; b = b + 1u) {
    let ob = w * 4u + b;
    if (ob >= p.out_bytes) { break; }
    let e = ob / p.elem;
    let within = ob % p.elem;
    var rem = e;
    var off = 0i;
    for (var k = i32(p.ndim) - 1; k >= 0; k = k - 1) {
      let ext = p.shape[k / 4][k % 4];
      let i = rem % ext;
      rem = rem / ext;
      off = off + i32(i) * p.strides[k / 4][k % 4];
    }
    let sb = u32(i32(p.src_offset) + off * i32(p.elem)) + within;
    let byte = (src[sb / 4u] >> ((sb % 4u) * 8u)) & 0xffu;
    word = word | (byte << (b * 8u));
  }
  dst[w] = word;
}
