
// One contiguous run of bytes at any offset (a compact tensor whose offset or length is not
// word-aligned): one invocation writes 16 output bytes from five source words, shifted; bytes
// past the tensor's end are written as 0, as the other kernels leave them.
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
  let words = select((x >> vec4<u32>(s)) | (next << vec4<u32>(32u - s)), x, s == 0u);
  // Bytes of each word that are the tensor's: 4, or fewer in its last word.
  let start = vec4<u32>(q * 16u) + vec4<u32>(0u, 4u, 8u, 12u);
  let left = select(vec4<u32>(0u), vec4<u32>(p.out_bytes) - start, start < vec4<u32>(p.out_bytes));
  let mask = select((vec4<u32>(1u) << (left * 8u)) - vec4<u32>(1u), vec4<u32>(0xffffffffu),
    left >= vec4<u32>(4u));
  dst[q] = words & mask;
}
