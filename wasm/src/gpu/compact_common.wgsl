// Shared by the compaction kernels (compact_*.wgsl, each appended to this text): the
// parameters, the source, where an element lies in it, and the invocation's index.
struct Params {
  ndim: u32, elem: u32, out_bytes: u32, src_offset: u32,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<i32>, 2>,
};
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

// The offset of element `e` (row-major) from the first element, in elements.
fn seek(e: u32) -> i32 {
  var rem = e;
  var off = 0i;
  for (var k = i32(p.ndim) - 1; k >= 0; k = k - 1) {
    let ext = p.shape[k / 4][k % 4];
    off = off + i32(rem % ext) * p.strides[k / 4][k % 4];
    rem = rem / ext;
  }
  return off;
}

// The source's byte at byte index `b`.
fn byte_at(b: i32) -> u32 {
  let u = u32(b);
  return (src[u / 4u] >> ((u % 4u) * 8u)) & 0xffu;
}

// The stride of the last axis, in elements.
fn last_stride() -> i32 {
  let k = i32(p.ndim) - 1;
  return p.strides[k / 4][k % 4];
}

// Workgroups of 64 along x, then rows of them along y.
fn invocation(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * 64u;
}
