#!/usr/bin/env bash
# The Python package's tests on CPython 3.9, the oldest the package supports: the wheel for the
# stable ABI's 3.9 floor (python/Cargo.toml: --no-default-features --features abi3-py39), in
# .venv39 with python/requirements-py39.txt. The interpreter: $DLPORT_PYTHON39, else python3.9
# on PATH, else pyenv's 3.9. The environment is made once (scripts/venv-lib.sh); the build
# directory python/target is shared with scripts/python-build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv-lib.sh
venv_make python39 .venv39 3.9 DLPORT_PYTHON39 python/requirements-py39.txt
rm -rf python/target/wheels39
start=$SECONDS
.venv/bin/maturin build --quiet -m python/Cargo.toml --locked --no-default-features \
  --features abi3-py39 --compatibility linux --interpreter .venv39/bin/python \
  --out python/target/wheels39
.venv39/bin/python -m pip install --quiet --force-reinstall --no-deps python/target/wheels39/dlport-*.whl
echo "[python39] built and installed $(basename python/target/wheels39/dlport-*.whl) in $((SECONDS - start)) s"
# test_jax.py and test_seed.py need JAX 0.12 (Python >= 3.12); test_share.py's child processes
# write through numpy.from_dlpack, which NumPy 2.0 imports read-only, and its parent then waits
# on the child without a timeout: it runs on 3.12 only.
.venv39/bin/python -m pytest -q -p no:cacheprovider python/tests \
  --ignore=python/tests/test_jax.py --ignore=python/tests/test_seed.py --ignore=python/tests/test_share.py
