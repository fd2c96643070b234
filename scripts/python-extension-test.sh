#!/usr/bin/env bash
# The example PyO3 extension on dlport-pyo3 (python/examples/extension, module dlport_example):
# built with maturin (dev profile, abi3 for CPython >= 3.10) into python/target/wheels-example,
# installed into .venv (made by scripts/python-env.sh; scripts/python-build.sh installs the
# package dlport there, whose exception classes the extension raises), then its tests against
# NumPy, JAX and tvm-ffi. Shares the build directory python/target with scripts/python-build.sh.
# Usage: scripts/python-extension-test.sh [--release] [pytest arguments]
#   (default: the dev profile; --release: the release profile, as bench/python/pyo3_args.py wants)
# DLPORT_EXT_FEATURES: cargo features of the example to build with (scripts/bench.sh: dlpark).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=dev
if [ "${1:-}" = "--release" ]; then profile=release; shift; fi
rm -rf python/target/wheels-example
start=$SECONDS
.venv/bin/maturin build --quiet -m python/examples/extension/Cargo.toml --profile "$profile" --locked \
  --compatibility linux --interpreter .venv/bin/python --out python/target/wheels-example \
  ${DLPORT_EXT_FEATURES:+--features "$DLPORT_EXT_FEATURES"}
.venv/bin/python -m pip install --quiet --force-reinstall --no-deps \
  python/target/wheels-example/dlport_example-*.whl
echo "[extension] built and installed $(basename python/target/wheels-example/dlport_example-*.whl) ($profile) in $((SECONDS - start)) s"
.venv/bin/python -m pytest -q -p no:cacheprovider python/examples/extension/tests "$@"
