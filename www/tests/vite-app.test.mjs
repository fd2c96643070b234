// The npm package as users get it: `npm pack` of wasm/pkg, installed into a fresh copy of the
// Vite + TypeScript app in www/vite-app (as `npm create vite@latest` makes it today: create-vite
// 9.3.0's vanilla-ts template, TypeScript 7.0.2, plus strict and skipLibCheck: false; no Vite
// configuration), then `tsc` on TypeScript 7.0.2 and on the oldest TypeScript the README names
// (5.2.2, from www/vite-app/typescript-5.2), `vite build` with the built page opened in
// Chromium, and the dev server, which must serve the wasm (200, application/wasm) and compute
// the same values. Both wasm builds ship; Chromium (with WebAssembly SIMD) fetches only the
// simd128 one, dlport_bg.wasm. npm installs from its cache (--prefer-offline) after the first
// run: about 20 s for the two TypeScripts and Vite then, plus the builds and the browser.
//
// Why a tarball: `npm install ../wasm/pkg` (a folder) links node_modules/dlport to a folder
// outside the app, and Vite's dev server refuses files outside its root
// (`403 Forbidden … /@fs/…/dlport_bg.wasm`, see server.fs.allow). A tarball is copied into
// node_modules, like a package from the registry. The last test shows the 403 for the record.
// Run: `node --test www/tests/` after `scripts/wasm-build.sh`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cp, mkdtemp, readdir, rm, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const www = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = join(www, '..', 'wasm', 'pkg');
const template = join(www, 'vite-app');

let work;
let app;
let browser;
const children = [];

/** Runs a command; a failure carries its whole output (tsc prints its errors on stdout). */
function run(cmd, args, cwd) {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    throw new Error(`${cmd} ${args.join(' ')} failed (${e.status}):\n${e.stdout}\n${e.stderr}`);
  }
}
const npm = (args, cwd) => run('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline'], cwd);

async function freePort() {
  const probe = createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address();
  await new Promise((r) => probe.close(r));
  return port;
}

/** Starts `vite <args>` on a free port and waits until it answers. */
async function vite(args) {
  const port = await freePort();
  const child = spawn(join(app, 'node_modules', '.bin', 'vite'), [...args, '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
    cwd: app, stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  const origin = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${origin}/`)).ok) break;
    } catch {
      if (i > 300 || child.exitCode !== null) throw new Error(`vite ${args.join(' ')} did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { origin, child, log: () => log };
}

/** Opens the app in Chromium; returns its result and every .wasm response. */
async function openApp(origin) {
  const page = await browser.newPage();
  const wasm = [];
  const consoleLines = [];
  page.on('response', (r) => {
    if (new URL(r.url()).pathname.endsWith('.wasm')) wasm.push({ url: r.url(), status: r.status(), type: r.headers()['content-type'] });
  });
  page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`[pageerror] ${e.message}`));
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => document.getElementById('out')?.dataset.done, null, { timeout: 60_000 });
  const done = await page.evaluate(() => document.getElementById('out').dataset.done);
  const text = await page.evaluate(() => document.getElementById('out').textContent);
  await page.close();
  assert.equal(done, 'ok', `${text}\n${consoleLines.join('\n')}`);
  return { result: JSON.parse(text), wasm };
}

function checkResult(r) {
  assert.equal(r.build, 'simd128', 'Chromium validates WebAssembly SIMD: the default init loads dlport_bg.wasm');
  assert.deepEqual(r.shape, [2, 3]);
  assert.deepEqual(r.float32, [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
  assert.deepEqual(r.int32, [7, -8, 9]);
  assert.deepEqual(r.int64, [String(2n ** 40n), '-3']);
  assert.deepEqual(r.bfloat16Bits, [0x3f80, 0xc000]);
  assert.deepEqual(r.kinds, ['Float32Array', 'Int32Array', 'BigInt64Array', 'Uint16Array']);
  assert.equal(r.dtype, 'float32');
  assert.deepEqual(r.webgpu, [0.5, 1.5, 2.5, 3.5, 4.5, 5.5], 'the round trip through a WebGPU buffer');
}

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'dlport-vite-'));
  // What a user does: pack the built package, make an app, install the tarball.
  const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', work], pkg))[0];
  app = join(work, 'app');
  await cp(template, app, { recursive: true, filter: (src) => !src.includes('node_modules') && !src.includes('dist') });
  // The type test of the whole API (www/tests/types.ts, also checked against wasm/pkg by the
  // test command's tsc step) as app code importing the installed package, so that both
  // TypeScripts below check it too.
  const types = await readFile(join(www, 'tests', 'types.ts'), 'utf8');
  const from = "from '../../wasm/pkg/dlport.js';";
  assert.ok(types.includes(from), `www/tests/types.ts imports ${from}`);
  await writeFile(join(app, 'src', 'api-types.ts'), types.replace(from, "from 'dlport';"));
  npm(['ci', '--ignore-scripts'], app);
  npm(['install', '--ignore-scripts', join(work, packed.filename)], app);
  const installed = JSON.parse(await readFile(join(app, 'node_modules', 'dlport', 'package.json'), 'utf8'));
  assert.equal(installed.name, 'dlport');
  console.log(`# ${packed.filename} (${packed.size} bytes, ${packed.entryCount} files) installed into a fresh Vite app`);
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox', '--enable-unsafe-webgpu', '--disable-gpu-sandbox',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-first-run', '--disable-quic',
    ],
  });
});

after(async () => {
  for (const c of children) c.kill();
  await browser?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

/** The app's tsconfig.json (create-vite writes it with comments: JSON with comments). */
async function appTsconfig() {
  const text = await readFile(join(app, 'tsconfig.json'), 'utf8');
  return JSON.parse(text.replace(/\/\*[\s\S]*?\*\//g, ''));
}

/** The declaration files tsc read (`--listFiles`), those of node_modules/dlport and @webgpu. */
function packageFiles(listing) {
  return listing.split('\n').map((l) => l.trim()).filter((l) => /node_modules\/(dlport|@webgpu)\//.test(l))
    .map((l) => l.slice(l.indexOf('node_modules/') + 'node_modules/'.length)).sort();
}

test('tsc 7.0.2: the package type-checks in the app create-vite makes, strict, skipLibCheck: false', async () => {
  const tsconfig = await appTsconfig();
  assert.equal(tsconfig.compilerOptions.strict, true);
  assert.equal(tsconfig.compilerOptions.skipLibCheck, false);
  const tsc = join(app, 'node_modules', '.bin', 'tsc');
  assert.match(run(tsc, ['--version'], app), /Version 7\.0\.2\b/);
  // Throws with tsc's messages on any error (the @ts-expect-error lines must fire, too). Its DOM
  // lib declares WebGPU, so the package's types must not bring @webgpu/types in as well
  // ("Duplicate identifier 'GPUCommandBufferDescriptor'").
  const files = packageFiles(run(tsc, ['--noEmit', '-p', '.', '--listFiles'], app));
  assert.deepEqual(files, ['dlport/dlport.d.ts']);
});

test('tsc 5.2.2: the package type-checks in the same app on the oldest TypeScript the README names', async () => {
  const ts52 = join(app, 'typescript-5.2');
  npm(['ci', '--ignore-scripts'], ts52);
  const tsc = join(ts52, 'node_modules', '.bin', 'tsc');
  assert.match(run(tsc, ['--version'], app), /Version 5\.2\.2\b/);
  // The app's tsconfig as TypeScript 5.2 can read it: two of create-vite's options are newer
  // (target "es2023": 5.7, erasableSyntaxOnly: 5.8), everything else as it is.
  const tsconfig = await appTsconfig();
  assert.equal(tsconfig.compilerOptions.target, 'es2023');
  assert.equal(tsconfig.compilerOptions.erasableSyntaxOnly, true);
  tsconfig.compilerOptions.target = 'es2022';
  delete tsconfig.compilerOptions.erasableSyntaxOnly;
  await writeFile(join(app, 'tsconfig.ts5.2.json'), JSON.stringify(tsconfig, null, 2));
  // Before 6.0 the DOM lib has no WebGPU: typesVersions sends 5.x to ts5/dlport.d.ts, which
  // brings in @webgpu/types.
  const files = packageFiles(run(tsc, ['--noEmit', '-p', 'tsconfig.ts5.2.json', '--listFiles'], app));
  assert.deepEqual(files, ['@webgpu/types/dist/index.d.ts', 'dlport/dlport.d.ts', 'dlport/ts5/dlport.d.ts']);
});

test('vite build: the built page computes the right values in Chromium', async () => {
  run(join(app, 'node_modules', '.bin', 'vite'), ['build'], app);
  const assets = await readdir(join(app, 'dist', 'assets'));
  // Both builds are assets (the loader names each with `new URL('…', import.meta.url)`).
  for (const name of ['dlport_bg', 'dlport_scalar_bg']) {
    assert.ok(assets.some((f) => f.startsWith(`${name}-`) && f.endsWith('.wasm')), `the build emits ${name}.wasm: ${assets}`);
  }
  const server = await vite(['preview']);
  const { result, wasm } = await openApp(server.origin);
  checkResult(result);
  assert.equal(wasm.length, 1, JSON.stringify(wasm));
  assert.match(new URL(wasm[0].url).pathname, /\/dlport_bg-[^/]*\.wasm$/, 'only the SIMD build is fetched');
  assert.equal(wasm[0].status, 200);
  assert.equal(wasm[0].type, 'application/wasm');
  server.child.kill();
});

test('vite dev server: serves the wasm (200, application/wasm) and computes the same values', async () => {
  const server = await vite([]);
  const { result, wasm } = await openApp(server.origin);
  checkResult(result);
  assert.equal(wasm.length, 1, JSON.stringify(wasm));
  assert.match(new URL(wasm[0].url).pathname, /\/dlport_bg\.wasm$/, 'only the SIMD build is fetched');
  assert.equal(wasm[0].status, 200, `${JSON.stringify(wasm)}\n${server.log()}`);
  assert.equal(wasm[0].type, 'application/wasm');
  console.log(`# dev server: ${new URL(wasm[0].url).pathname} ${wasm[0].status} ${wasm[0].type}`);
  // For the record: a folder install would link to wasm/pkg, outside the app's root, which the
  // dev server refuses.
  const outside = await fetch(`${server.origin}/@fs${join(pkg, 'dlport_bg.wasm')}`);
  assert.equal(outside.status, 403);
  server.child.kill();
});
