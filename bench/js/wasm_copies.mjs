// The npm package's CPU copies in Node: a 16 MiB strided -> compact copy (the transpose of a
// matrix of 1-, 2-, 4- or 8-byte elements, and reversed rows) through `toBytes()`, the simd128
// build (dlport_bg.wasm) against the scalar build (dlport_scalar_bg.wasm), both loaded in this
// process and timed in alternation, round by round, with the compact 16 MiB `toBytes()` (a
// memcpy) as the baseline. `toBytes()` also zeroes the destination and copies it out to a JS
// Uint8Array, the same in every row. Times are the process's CPU time. The simd128 build runs
// the portable kernel for 8-byte transposes (core/src/copy/arch/wasm32.rs says why). Writes
// target/bench/wasm_copies.json (read by bench/python/report.py for BENCHMARKS.md).
// Usage: node bench/js/wasm_copies.mjs [--quick]   (after scripts/wasm-build.sh)
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadBuild, view, reference, randomBytes, compact, files } from '../../www/tests/strided.mjs';

const quick = process.argv.includes('--quick');
const rounds = quick ? 7 : 41;
const MiB = 1 << 20;
const builds = { simd128: await loadBuild('simd128'), scalar: await loadBuild('scalar') };
for (const [name, b] of Object.entries(builds)) {
  if (b.m.wasmBuild() !== name) throw new Error(`${files[name]} says it is ${b.m.wasmBuild()}`);
}

// Each case: a compact [r, c] source of `elem`-byte elements and the view that is copied.
const transpose = (r, c) => ({ source: [r, c], shape: [c, r], strides: [1, c] });
const reversedRows = (r, c, elem) => ({ source: [r, c], shape: [r, c], strides: [c, -1], byteOffset: (c - 1) * elem });
const cases = [
  { name: 'transpose, 4-byte elements (2048 x 2048)', elem: 4, ...transpose(2048, 2048) },
  { name: 'transpose, 1-byte elements (4096 x 4096)', elem: 1, ...transpose(4096, 4096) },
  { name: 'transpose, 2-byte elements (2048 x 4096)', elem: 2, ...transpose(2048, 4096) },
  { name: 'transpose, 8-byte elements (1024 x 2048)', elem: 8, ...transpose(1024, 2048) },
  { name: 'reversed rows a[:, ::-1], 1-byte elements (4096 x 4096)', elem: 1, ...reversedRows(4096, 4096, 1) },
  { name: 'reversed rows a[:, ::-1], 4-byte elements (4096 x 1024)', elem: 4, ...reversedRows(4096, 1024, 4) },
  { name: 'memcpy (compact, 16 MiB)', elem: 1, source: [4096, 4096], shape: [4096, 4096], strides: [4096, 1], compact: true },
];

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  return s[Math.floor(i)] + (s[Math.ceil(i)] - s[Math.floor(i)]) * (i - Math.floor(i));
};

const rows = [];
for (const c of cases) {
  const source = randomBytes(16 * MiB, 0x2545f491 + c.elem);
  const expected = reference(source, c.elem, c);
  const views = {};
  for (const [name, b] of Object.entries(builds)) {
    views[name] = view(b, compact(b, source, c.elem, c.source), c);
    // Checked once, so a fast wrong copy cannot be timed.
    if (!Buffer.from(views[name].toBytes()).equals(Buffer.from(expected))) throw new Error(`${name}: ${c.name} is wrong`);
  }
  const ms = { simd128: [], scalar: [] };
  for (let r = 0; r < rounds + 1; r++) {
    for (const name of r % 2 ? ['scalar', 'simd128'] : ['simd128', 'scalar']) {
      // The process's CPU time (getrusage, microseconds), as the Rust copy bench takes the
      // copying thread's: the time the scheduler gives to other processes on a shared
      // machine is left out; memory stalls count.
      const t0 = process.cpuUsage();
      const out = views[name].toBytes();
      const t1 = process.cpuUsage(t0);
      const dt = (t1.user + t1.system) / 1000;
      if (out.length !== 16 * MiB) throw new Error('short copy');
      if (r > 0) ms[name].push(dt); // round 0 warms up
    }
  }
  for (const v of Object.values(views)) v.free();
  const row = { case: c.name, elem: c.elem, bytes: 16 * MiB, compact: !!c.compact };
  for (const name of Object.keys(ms)) {
    row[name] = { median_ms: quantile(ms[name], 0.5), p25_ms: quantile(ms[name], 0.25), p75_ms: quantile(ms[name], 0.75) };
  }
  row.speedup = row.scalar.median_ms / row.simd128.median_ms;
  rows.push(row);
}
const memcpy = rows.find((r) => r.compact);
for (const r of rows) {
  for (const name of ['simd128', 'scalar']) r[name].x_memcpy = memcpy[name].median_ms / r[name].median_ms;
}

const fmt = (t) => `${t.median_ms.toFixed(1)} ms (${t.p25_ms.toFixed(1)}–${t.p75_ms.toFixed(1)})`;
console.log(`node ${process.versions.node} (V8 ${process.versions.v8}), ${rounds} rounds`);
console.log('| case | simd128 | scalar | simd128 speed-up |');
for (const r of rows) console.log(`| ${r.case} | ${fmt(r.simd128)} | ${fmt(r.scalar)} | ${r.speedup.toFixed(2)} × |`);
const out = new URL('../../target/bench/', import.meta.url);
mkdirSync(out, { recursive: true });
writeFileSync(new URL('wasm_copies.json', out), JSON.stringify({ node: process.versions.node, v8: process.versions.v8, rounds, rows }, null, 2) + '\n');
