#!/usr/bin/env bash
# Builds the browser demo into www/dist: the npm package `dlport` (scripts/wasm-build.sh, only
# when wasm/pkg is missing or older than its sources: `--if-stale` says which), the page, the
# committed ONNX model, and the pinned TF.js and onnxruntime-web files from www/node_modules
# (installed from the npm registry with `npm ci`, skipped when already current).
# Serve it with `python3 -m http.server -d www/dist 8000` (scripts/www-serve.sh does both).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/wasm-build.sh --if-stale

# npm ci only when package-lock.json changed since the last install (idempotent, fast when warm).
if [[ ! -f www/node_modules/.package-lock.json || www/package-lock.json -nt www/node_modules/.package-lock.json ]]; then
  echo "[www] npm ci in www (TF.js, onnxruntime-web, playwright-core, TypeScript: about 30 s from the network, seconds from npm's cache)"
  (cd www && npm ci --no-audit --no-fund --ignore-scripts)
fi

dist=www/dist
rm -rf "$dist"
mkdir -p "$dist/pkg" "$dist/vendor/ort" "$dist/model"
cp www/src/index.html www/src/app.js www/src/style.css "$dist/"
cp www/model/style.onnx www/model/style.json "$dist/model/"
cp -r wasm/pkg/dlport.js wasm/pkg/dlport_bg.wasm wasm/pkg/dlport_scalar_bg.wasm wasm/pkg/snippets "$dist/pkg/"
nm=www/node_modules
cp "$nm/@tensorflow/tfjs-core/dist/tf-core.min.js" "$nm/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js" "$dist/vendor/"
cp "$nm/onnxruntime-web/dist/ort.webgpu.min.mjs" \
   "$nm/onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.mjs" \
   "$nm/onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm" "$dist/vendor/ort/"
versions=$(cd www && node -e 'const l=require("./package-lock.json").packages;for(const n of ["@tensorflow/tfjs-core","@tensorflow/tfjs-backend-webgpu","onnxruntime-web"])console.log(n+"@"+l["node_modules/"+n].version)' | paste -sd' ')
echo "[www] built $dist ($(du -sh "$dist" | cut -f1)): dlport $(node -p 'require("./wasm/pkg/package.json").version'), $versions"
