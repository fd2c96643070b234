#!/usr/bin/env bash
# dlport-wasm's tests as wasm-pack runs them, the two commands wasm/README.md shows:
#   wasm-pack test --node wasm                 the suites that need no GPU, under Node (the
#                                              DLPack addresses, the JS API on host tensors,
#                                              its refusals): dlpack.rs, js_api.rs
#   wasm-pack test --headless --chrome wasm    the WebGPU suites in headless Chromium
#                                              (SwiftShader): web.rs, dlpack_webgpu.rs
# Each prints how many tests ran, and a run of 0 tests fails. wasm-pack downloads nothing here:
# it uses the wasm-bindgen-cli on PATH (scripts/install-wasm-tools.sh --wasm-pack installs both,
# at the wasm-bindgen version in Cargo.lock) and Debian's ChromeDriver. Where wasm-pack is not
# installed (crates.io was unreachable when scripts/install-wasm-tools.sh --wasm-pack ran), this
# script says so and skips, exit 0.
# Usage: scripts/wasm-pack-test.sh [node|chrome]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}

if ! command -v wasm-pack >/dev/null 2>&1; then
  echo "[wasm-pack] SKIPPED: wasm-pack is not installed (scripts/install-wasm-tools.sh --wasm-pack installs it from crates.io)"
  exit 0
fi
echo "[wasm-pack] $(wasm-pack --version), $(wasm-bindgen --version)"
chromedriver=${CHROMEDRIVER:-/usr/bin/chromedriver}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs `wasm-pack test ARGS wasm --locked` (options after the path go to cargo), shows its
# output, and prints the number of tests the runner reported passing; fails on a failure or on
# 0 tests.
run() {
  local name=$1
  shift
  local start=$SECONDS
  # --mode no-install: wasm-pack uses the tools it finds and never downloads one.
  if ! WASM_BINDGEN_TEST_TIMEOUT=300 wasm-pack test --mode no-install "$@" wasm --locked 2>&1 | tee "$log"; then
    echo "[wasm-pack] FAILED: wasm-pack test $* wasm (above)"
    exit 1
  fi
  local n
  n=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  if [[ $n -eq 0 ]]; then
    echo "[wasm-pack] FAILED: wasm-pack test $* wasm ran 0 tests"
    exit 1
  fi
  echo "[wasm-pack] $name: $n tests passed (wasm-pack test $* wasm, $((SECONDS - start)) s)"
}

modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(node chrome)
for mode in "${modes[@]}"; do
  case "$mode" in
    node) run node --node ;;
    chrome)
      [[ -x $chromedriver ]] || { echo "[wasm-pack] FAILED: no ChromeDriver at $chromedriver (Debian: apt-get install chromium chromium-driver; or set CHROMEDRIVER)"; exit 1; }
      run chrome --headless --chrome --chromedriver "$chromedriver" ;;
    *) echo "usage: scripts/wasm-pack-test.sh [node|chrome]..." >&2; exit 2 ;;
  esac
done
