#!/usr/bin/env bash
# Builds the Python package dlport (python/) with maturin and installs the wheel into .venv
# (made by scripts/python-env.sh): the release wheel's configuration, abi3 for CPython >= 3.10
# (python/Cargo.toml's feature abi3-py310), in python/target/wheels.
# The build directory python/target is kept between runs, so a rebuild only compiles what changed.
# Usage: scripts/python-build.sh [--release]   (default: the dev profile, with debug assertions)
# DLPORT_PY_FEATURES: cargo features of python/Cargo.toml to build with (scripts/bench.sh: bench).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=dev
if [ "${1:-}" = "--release" ]; then profile=release; fi
rm -rf python/target/wheels
echo "[python] building the wheel (maturin, $profile profile: a few minutes on 2 cores from scratch, seconds when only dlport changed)"
start=$SECONDS
.venv/bin/maturin build --quiet -m python/Cargo.toml --profile "$profile" --locked \
  --compatibility linux --interpreter .venv/bin/python --out python/target/wheels \
  --features "abi3-py310${DLPORT_PY_FEATURES:+,$DLPORT_PY_FEATURES}"
echo "[python] wheel built in $((SECONDS - start)) s"
.venv/bin/python -m pip install --quiet --force-reinstall --no-deps python/target/wheels/dlport-*.whl
echo "[python] installed $(basename python/target/wheels/dlport-*.whl) ($profile) into .venv"
