#!/usr/bin/env bash
# The crates as crates.io would get them: `cargo publish --dry-run` for dlport-core,
# dlport-native and dlport-wasm, in dependency order (cargo >= 1.90 publishes a workspace in
# order, resolving the not-yet-published path dependencies against a local overlay of the
# packages it just made, and builds each one from its .crate). Then the doc tests (the crate
# READMEs included) run on the unpacked .crate files, outside the workspace, with each
# unpublished dlport dependency patched to its unpacked copy. dlport-capi is not published
# (`publish = false`: the C library ships through scripts/install-c.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
crates=(dlport-core dlport-native dlport-wasm)
version=$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="dlport-core"))')

unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
log=$unpacked/log
# Runs a command quietly; shows its whole output only when it fails.
quiet() { "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "[package] failed: $*" >&2; exit 1; }; }

# The dry run's overlay registry poses as crates.io, so cargo treats its dlport packages as
# immutable registry crates: it keeps them unpacked under $CARGO_HOME/registry/src, cached under
# registry/cache, and their build artifacts are never rebuilt for a change of content (a
# registry crate's fingerprint is its name and version). A machine that ran this check before,
# on older sources of the same version, would verify against those. None of dlport's crates is
# on crates.io, so every copy of them there is a leftover of an earlier run: remove them all,
# and verify in a target directory of this check's own, cleaned of dlport's artifacts.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for c in "${crates[@]}"; do
  rm -rf "$cargo_home"/registry/src/*/"$c"-[0-9]* "$cargo_home"/registry/cache/*/"$c"-[0-9]*.crate
done
export CARGO_TARGET_DIR="$root/target/package-verify"
quiet cargo clean --locked "${crates[@]/#/--package=}"
quiet cargo publish --dry-run --allow-dirty --locked "${crates[@]/#/--package=}"
grep -E '^ *(Packaged|Uploading)' "$log" | sed 's/^ */[package] /'
# The same .crate files again, kept in $CARGO_TARGET_DIR/package (the dry run's are temporary): no build.
quiet cargo package --no-verify --allow-dirty --locked "${crates[@]/#/--package=}"
patch=()
for c in "${crates[@]}"; do
  crate=$CARGO_TARGET_DIR/package/$c-$version.crate
  tar -xzf "$crate" -C "$unpacked"
  dir=$unpacked/$c-$version
  for need in README.md LICENSE-MIT LICENSE-APACHE Cargo.toml; do
    [[ -f $dir/$need ]] || { echo "[package] $crate lacks $need" >&2; exit 1; }
  done
  echo "[package] ${crate#"$root"/}: $(tar -tzf "$crate" | wc -l) files, $(stat -c%s "$crate") bytes, README and both licences"
  # Doc tests of the packaged copy; dlport dependencies come from the unpacked copies. They build
  # in the workspace's target directory: the packaged copies are path packages at other paths,
  # so cargo keeps their artifacts apart from the workspace's (a package's path is part of its
  # artifacts' hash), and the dependencies the test step built with the same features are
  # reused (BENCHMARKS.md, "The test command's background builds"). Unlike the dry run's
  # registry copies above, a path package is rebuilt when its files change.
  (cd "$dir" && quiet env CARGO_TARGET_DIR="$root/target" cargo test --doc --all-features "${patch[@]}")
  grep -E '^test result' "$log" | sed "s/^/[package] $c (packaged copy) doc tests: /"
  patch+=(--config "patch.crates-io.$c.path='$dir'")
done
