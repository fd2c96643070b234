#!/usr/bin/env bash
# Installs what building the npm package needs (idempotent; seconds when all is present):
# the wasm32 target, wasm-bindgen-cli at exactly the wasm-bindgen crate's version (without
# --locked: the registry's lock lags; it brings wasm-bindgen, which scripts/wasm-build.sh runs
# after cargo, and wasm-bindgen-test-runner, cargo's runner for the wasm32 tests), and wasm-opt
# from the npm package binaryen (wasm/tools/package-lock.json, `npm ci`).
# Used by scripts/install-deps.sh and scripts/wasm-build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install] %s\n' "$*"; }
# `cargo install` through scripts/cargo-tool-install.sh: one shared build directory in the cache,
# opt-level 1.

if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "target wasm32-unknown-unknown: present"
else
  log "target wasm32-unknown-unknown: installing (rustup, about 30 s)"
  rustup target add wasm32-unknown-unknown
fi
if wasm-bindgen --version 2>/dev/null | grep -q "^wasm-bindgen 0.2.130$"; then
  log "wasm-bindgen-cli 0.2.130: present"
else
  log "wasm-bindgen-cli 0.2.130: installing (cargo install: it compiles about 160 crates, several minutes on 2 cores; once per machine)"
  bash scripts/cargo-tool-install.sh wasm-bindgen-cli --version 0.2.130 --force
fi
if [[ -f wasm/tools/node_modules/.package-lock.json && ! wasm/tools/package-lock.json -nt wasm/tools/node_modules/.package-lock.json ]] \
  && wasm/tools/node_modules/.bin/wasm-opt --version >/dev/null 2>&1; then
  log "binaryen (wasm-opt) from wasm/tools/package-lock.json: present"
else
  log "binaryen (wasm-opt): npm ci in wasm/tools (about 20 s from the network, seconds from npm's cache)"
  (cd wasm/tools && npm ci --no-audit --no-fund --ignore-scripts)
fi
