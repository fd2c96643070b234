#!/usr/bin/env bash
# Installs what building the npm package needs (idempotent; seconds when all is present):
# the wasm32 target, wasm-bindgen-cli at exactly the wasm-bindgen crate's version (without
# --locked: the registry's lock lags; it brings wasm-bindgen, which scripts/wasm-build.sh runs
# after cargo, and wasm-bindgen-test-runner, cargo's runner for the wasm32 tests), and wasm-opt
# from the npm package binaryen (wasm/tools/package-lock.json, `npm ci`). With --wasm-pack, also
# wasm-pack (scripts/wasm-pack-test.sh: `wasm-pack test`, which finds that wasm-bindgen-cli on
# PATH); building the package does not need it.
# Used by scripts/install-deps.sh (with --wasm-pack) and scripts/wasm-build.sh.
# Usage: scripts/install-wasm-tools.sh [--wasm-pack]
set -euo pipefail
cd "$(dirname "$0")/.."
with_wasm_pack=false
case "${1:-}" in
  --wasm-pack) with_wasm_pack=true ;;
  "") ;;
  *) echo "usage: scripts/install-wasm-tools.sh [--wasm-pack]" >&2; exit 2 ;;
esac

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
  log "wasm-bindgen-cli 0.2.130: installing (cargo install: it compiles about 160 crates, once per machine; wasm/README.md has the times)"
  start=$SECONDS
  bash scripts/cargo-tool-install.sh wasm-bindgen-cli --version 0.2.130 --force
  # The line a log is searched for (grep '\[build-time\]'), with the load the time was taken under.
  echo "[build-time] wasm-bindgen-cli: $((SECONDS - start)) s (cargo install, scripts/cargo-tool-install.sh; load $(cut -d' ' -f1-3 /proc/loadavg))"
fi
# wasm-pack from crates.io (no wheel on PyPI carries it; its npm package downloads the binary
# from outside the registries at install time). A failed install is reported and left to
# scripts/wasm-pack-test.sh, which skips visibly without wasm-pack: nothing else needs it.
if ! $with_wasm_pack; then
  :
elif wasm-pack --version 2>/dev/null | grep -q "^wasm-pack 0.15.0$"; then
  log "wasm-pack 0.15.0: present"
else
  log "wasm-pack 0.15.0: installing (cargo install --locked: it compiles about 200 crates, 10 minutes on 2 busy cores; once per machine)"
  bash scripts/cargo-tool-install.sh wasm-pack --version 0.15.0 --locked --force \
    || log "wasm-pack 0.15.0: the install failed (above); scripts/wasm-pack-test.sh will skip"
fi
if [[ -f wasm/tools/node_modules/.package-lock.json && ! wasm/tools/package-lock.json -nt wasm/tools/node_modules/.package-lock.json ]] \
  && wasm/tools/node_modules/.bin/wasm-opt --version >/dev/null 2>&1; then
  log "binaryen (wasm-opt) from wasm/tools/package-lock.json: present"
else
  log "binaryen (wasm-opt): npm ci in wasm/tools (about 20 s from the network, seconds from npm's cache)"
  (cd wasm/tools && npm ci --no-audit --no-fund --ignore-scripts)
fi
