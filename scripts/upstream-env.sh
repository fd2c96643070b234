#!/usr/bin/env bash
# Makes (once) the JAX 0.10.2 stack for tests/upstream: CPython 3.11 (the newest JAX it can
# install is 0.10.2) with python/requirements-jax-py311.txt (about 150 MB), in
# ${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-jax-py311-<16 hex of the pins' sha256>
# (scripts/venv-lib.sh); then installs the dlport wheel scripts/python-build.sh built (abi3,
# cp310: it installs on 3.11). Messages go to stderr; the venv's path is the last line on stdout.
# When PyPI cannot be reached it says so and exits 3: the callers then skip visibly.
# The interpreter: $DLPORT_PYTHON311, else python3.11 on PATH, else pyenv's 3.11.
# --no-wheel: the venv alone (scripts/test.sh makes it in the background before the wheel exists).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv-lib.sh
req=python/requirements-jax-py311.txt
venv=$(venv_cached_dir jax-py311 "$req")
venv_make jax-py311 "$venv" 3.11 DLPORT_PYTHON311 "$req" yes || exit $?
[ "${1:-}" != --no-wheel ] || exit 0
venv_add_wheel jax-py311 "$venv"
echo "[jax-py311] ready: $("$venv/bin/python" -c 'import sys, jax, numpy, ml_dtypes; print("Python", sys.version.split()[0], "jax", jax.__version__, "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__)')" >&2
echo "$venv"
