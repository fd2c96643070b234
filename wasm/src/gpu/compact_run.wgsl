
// One contiguous run of bytes at any offset (a compact tensor whose offset or length is not
// word-aligned): one invocation writes 16 output bytes from five source words, shifted.
// Bytes past the tensor in the last word come from the source (the padding is never exposed).
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let q = invocation(gid, nwg);
  if (q * 16u >= p.out_bytes) { return; }
  let a = p.src_offset / 4u + q * 4u;
  let s = (p.src_offset % 4u) * 8u;
  let w1 = src[a + 1u];
  let w2 = src[a + 2u];
  let w3 = src[a + 3u];
  let x = vec4<u32>(src[a], w1, w2, w3);
  let next = vec4<u32>(w1, w2, w3, src[a + 4u]);
  // A shift by 32 - 0 would be a shift by 0 in WGSL: an aligned run is the words themselves.
  dst[q] = select((x >> vec4<u32>(s)) | (next << vec4<u32>(32u - s)), x, s == 0u);
}
