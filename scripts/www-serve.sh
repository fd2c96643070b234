#!/usr/bin/env bash
# Builds the demo and serves it at http://localhost:${PORT:-8000}/ (a browser with WebGPU:
# Chrome or Chromium; in headless Chromium pass --enable-unsafe-webgpu). The npm package in
# wasm/pkg is rebuilt only when it is missing or stale (scripts/www-build.sh), and a tarball
# made there with `npm pack` stays.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/www-build.sh
echo "[www] open http://localhost:${PORT:-8000}/"
exec python3 -m http.server -d www/dist "${PORT:-8000}"
