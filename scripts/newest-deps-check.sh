#!/usr/bin/env bash
# Builds the published crates against the newest semver-compatible versions of their
# dependencies, as a user who adds dlport to a project gets them: the workspace is copied to a
# temporary directory, `cargo update` moves every dependency to the newest version its caret
# requirement allows, and `cargo check --all-features` builds dlport-core, dlport-native and
# dlport-capi (dlport-wasm for the host target too). The committed Cargo.lock, which pins CI,
# is left untouched. Needs the network (crates.io); prints what moved.
# Usage: scripts/newest-deps-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The sources and manifests only, not what a build writes (scripts/tree-copy.sh: test.sh's
# background builds write into fuzz/target/ while this step runs).
bash scripts/tree-copy.sh "$tmp"
cd "$tmp"
echo "[newest-deps] cargo update (the committed lock stays as it is in the repository)"
# The newest versions whatever Rust they need (a user on a newer toolchain gets them), not
# the newest that the declared rust-version allows.
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=allow cargo update 2>&1 | sed 's/^/    /'
# One target dir shared between runs of this check, outside the repository's.
export CARGO_TARGET_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dlport/newest-deps-target"
for crate in dlport-core dlport-native dlport-capi dlport-wasm; do
  echo "[newest-deps] cargo check -p $crate --all-features"
  cargo check -q -p "$crate" --all-features
done
echo "[newest-deps] the published crates build against the newest compatible dependencies"
