#!/usr/bin/env bash
# `cargo install ARGS...` as the test command's tool installs run it (scripts/install-deps.sh,
# scripts/install-wasm-tools.sh):
# - every tool builds in one target directory in the cache, so that the crates the tools have in
#   common (same version, same features) compile once, and a second clone or a rerun after a
#   version bump reuses them;
# - at opt-level 1, without LTO or debug info: the tools run for seconds (a header, a wasm
#   file's bindings, a fuzz target's build), and opt-level 3 takes much longer to compile on
#   2 cores.
# Usage: scripts/cargo-tool-install.sh CRATE --version X [--locked] ...
set -euo pipefail
export CARGO_TARGET_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dlport/cargo-install-target"
export CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG=false
exec cargo install "$@"
