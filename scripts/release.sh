#!/usr/bin/env bash
# Publishes one registry's share of a release (README, "Releasing"):
#   crates  dlport-core, dlport-native, dlport-wasm to crates.io, in dependency order, with one
#           `cargo publish` (cargo publishes a workspace's packages in order); then dlport-pyo3
#           (python/'s workspace), which depends on the first two. --dry-run:
#           scripts/package-check.sh (the same `cargo publish --dry-run`, then the doc tests of
#           the packaged copies). dlport-capi is not published (`publish = false`): the C
#           library ships from the repository through scripts/install-c.sh.
#   npm     the npm package `dlport` from wasm/pkg (scripts/wasm-build.sh builds it; the tarball
#           `npm pack` makes there is what is published). --dry-run: `npm publish --dry-run`,
#           which lists the files and uploads nothing.
#   wheels  the Python package `dlport` to PyPI: the abi3 wheel (release profile, with LTO;
#           manylinux tag checked by maturin) and the sdist, built into target/wheels,
#           uploaded with `maturin upload` (MATURIN_PYPI_TOKEN). --dry-run: builds and lists
#           them, uploads nothing.
# A real run (no --dry-run) first checks that the version is one release: the working tree is
# clean, HEAD is tagged v$VERSION, and CHANGELOG.md has a dated "## [$VERSION] - YYYY-MM-DD"
# section; each registry's own credentials are needed (cargo login, npm login,
# MATURIN_PYPI_TOKEN).
# Usage: scripts/release.sh {crates|npm|wheels} [--dry-run]
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 {crates|npm|wheels} [--dry-run]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
what=$1
dry=no
if [ $# -eq 2 ]; then
  [ "$2" = --dry-run ] || usage
  dry=yes
fi
log() { printf '[release] %s\n' "$*"; }

version=$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "dlport-core"))')

if [ "$dry" = no ]; then
  [ -z "$(git status --porcelain)" ] || { log "the working tree has uncommitted changes: commit or remove them first"; exit 1; }
  git tag --points-at HEAD | grep -qx "v$version" \
    || { log "HEAD is not tagged v$version: tag the release commit (git tag v$version) first"; exit 1; }
  grep -Eq "^## \[$version\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md \
    || { log "CHANGELOG.md has no dated '## [$version] - YYYY-MM-DD' section: move Unreleased's entries into it and date it first"; exit 1; }
fi

case "$what" in
  crates)
    if [ "$dry" = yes ]; then
      log "crates $version: cargo publish --dry-run in order, doc tests of the packaged copies (builds the three crates from their .crate files: several minutes on 2 cores)"
      bash scripts/package-check.sh
      # dlport-pyo3 lives in python/'s workspace, so it is published after the others (it
      # depends on dlport-core and dlport-native from crates.io): here, its file list.
      files=$(cargo package --list --allow-dirty --locked --manifest-path python/pyo3/Cargo.toml)
      for need in README.md LICENSE-MIT LICENSE-APACHE Cargo.toml src/lib.rs; do
        grep -qx "$need" <<<"$files" || { log "dlport-pyo3's package lacks $need"; exit 1; }
      done
      log "dlport-pyo3 $version: $(wc -l <<<"$files") files, README and both licences (published after the others)"
    else
      log "crates $version: cargo publish dlport-core, dlport-native, dlport-wasm (in that order), then dlport-pyo3"
      cargo publish --locked --package=dlport-core --package=dlport-native --package=dlport-wasm
      cargo publish --locked --manifest-path python/pyo3/Cargo.toml
    fi
    ;;
  npm)
    [ -f wasm/pkg/package.json ] || { log "wasm/pkg has no package: run scripts/wasm-build.sh first"; exit 1; }
    pkg_version=$(node -p 'require("./wasm/pkg/package.json").version')
    [ "$pkg_version" = "$version" ] \
      || { log "wasm/pkg is version $pkg_version, the crates are $version: rebuild it (scripts/wasm-build.sh)"; exit 1; }
    if [ "$dry" = yes ]; then
      log "npm dlport@$version: npm publish --dry-run (uploads nothing)"
      (cd wasm/pkg && npm publish --dry-run --access public 2>&1) | sed 's/^/[release] npm: /'
    else
      log "npm dlport@$version: npm publish"
      (cd wasm/pkg && npm publish --access public)
    fi
    ;;
  wheels)
    maturin=.venv/bin/maturin
    [ -x "$maturin" ] || { log "no maturin in .venv: run scripts/python-env.sh first"; exit 1; }
    out=target/wheels
    rm -rf "$out"
    # The release builds' own target directory, outside the clone, so that a fresh clone reuses
    # the dependencies' LTO builds (only dlport's crates and the link are redone).
    export CARGO_TARGET_DIR=${DLPORT_RELEASE_TARGET:-${XDG_CACHE_HOME:-$HOME/.cache}/dlport/release-target}
    log "wheels $version: the release abi3 wheels, cp310-abi3 and cp39-abi3 (maturin build --release, with LTO, in $CARGO_TARGET_DIR: 4 to 10 minutes each on 2 cores from scratch, about a minute when the dependencies are built) and the sdist"
    "$maturin" build --release --locked -m python/Cargo.toml --features abi3-py310 --interpreter .venv/bin/python --out "$out"
    "$maturin" build --release --locked -m python/Cargo.toml --features abi3-py39 --interpreter .venv/bin/python --out "$out"
    "$maturin" sdist -m python/Cargo.toml --out "$out"
    for f in "$out"/*; do log "built ${f#"$PWD"/} ($(stat -c%s "$f") bytes)"; done
    for floor in cp310 cp39; do
      ls "$out"/dlport-"$version"-"$floor"-abi3-manylinux_*.whl >/dev/null \
        || { log "no manylinux abi3 wheel (dlport-$version-$floor-abi3-manylinux_*.whl) in $out"; exit 1; }
    done
    sdist=$out/dlport-$version.tar.gz
    [ -f "$sdist" ] || { log "no sdist dlport-$version.tar.gz in $out"; exit 1; }
    # The sdist builds on its own: it holds the Rust sources of the crates the extension needs.
    listing=$(tar -tzf "$sdist")
    for need in python/Cargo.lock core/Cargo.toml core/src/lib.rs native/Cargo.toml native/src/lib.rs \
      python/Cargo.toml python/src/lib.rs python/pyo3/Cargo.toml python/pyo3/src/lib.rs \
      dlport/__init__.py pyproject.toml; do
      grep -qx "dlport-$version/$need" <<<"$listing" || { log "the sdist lacks $need"; exit 1; }
    done
    log "the sdist holds the crates' sources, Cargo.lock and the Python package ($(wc -l <<<"$listing") files)"
    if [ "$dry" = yes ]; then
      log "wheels: dry run, nothing uploaded"
    else
      "$maturin" upload "$out"/*
    fi
    ;;
  *) usage ;;
esac
