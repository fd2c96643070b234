#!/usr/bin/env bash
# Warnings are errors for every crate built alone, with every feature set it declares.
# In the workspace, cargo unifies features: a feature that one crate turns on for another (dlport-
# capi's pjrt for dlport-native, say) hides the warnings that crate has without it, so the
# workspace-wide clippy runs of scripts/test.sh cannot see them. Here each library crate is
# checked alone (`cargo clippy -p CRATE`), with no default features, its defaults, each declared
# feature alone and all of them, warnings and clippy's lints denied. Its library and binaries are
# checked: its tests and examples are checked with the workspace's feature sets by the clippy step.
# Usage: scripts/warnings-check.sh [CRATE...]   (default: every crate that publishes or links)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
deny=(-D warnings -D clippy::incompatible_msrv)

# The crates and their features, from cargo metadata: "manifest crate target feature..." per line.
crates=("$@")
[ ${#crates[@]} -gt 0 ] || crates=(dlport-core dlport-native dlport-capi dlport-wasm dlport-pyo3)
features() { # $1: manifest path, $2: crate; prints the crate's declared features (not "default")
  cargo metadata --manifest-path "$1" --no-deps --format-version 1 --locked | python3 -c '
import json, sys
meta = json.load(sys.stdin)
pkg = next(p for p in meta["packages"] if p["name"] == sys.argv[1])
print(" ".join(sorted(f for f in pkg["features"] if f != "default")))' "$2"
}

checked=0
for crate in "${crates[@]}"; do
  manifest=Cargo.toml target=()
  case "$crate" in
    dlport-pyo3) manifest=python/Cargo.toml ;;
    # dlport-wasm builds for the browser alone (wasm-bindgen, web-sys).
    dlport-wasm) target=(--target wasm32-unknown-unknown) ;;
  esac
  sets=("--no-default-features" "")
  for f in $(features "$manifest" "$crate"); do
    # abi3-py3N picks the stable ABI's floor for a wheel; pyo3 accepts one of them at a time.
    sets+=("--no-default-features --features $f")
  done
  sets+=("--all-features")
  for set in "${sets[@]}"; do
    # shellcheck disable=SC2086 # $set is a list of cargo flags
    if ! out=$(cargo clippy -q --manifest-path "$manifest" -p "$crate" "${target[@]}" --locked \
      --lib --bins $set -- "${deny[@]}" 2>&1); then
      echo "$out"
      echo "[warnings] FAILED: $crate alone with ${set:-its default features} warns (above); rerun: cargo clippy --manifest-path $manifest -p $crate ${target[*]} --lib --bins $set -- ${deny[*]}"
      exit 1
    fi
    checked=$((checked + 1))
    echo "[warnings] $crate ${target[*]:+(${target[*]}) }with ${set:-its default features}: no warning"
  done
done
echo "[warnings] $checked crate and feature sets built alone, warnings denied: none"
