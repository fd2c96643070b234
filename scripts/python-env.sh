#!/usr/bin/env bash
# Makes .venv (CPython 3.12) with python/requirements-dev.txt: maturin, pytest and the real
# DLPack peers (NumPy, JAX, tvm-ffi, Paddle; pip downloads about 350 MB, a few minutes, once).
# Kept while it runs 3.12 with exactly these pins (scripts/venv-lib.sh).
# The interpreter: $DLPORT_PYTHON, else python3.12 on PATH, else pyenv's 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv-lib.sh
venv_make python .venv 3.12 DLPORT_PYTHON python/requirements-dev.txt
echo "[python] .venv: $(.venv/bin/python -c 'import sys, numpy, jax, tvm_ffi, paddle; print("Python", sys.version.split()[0], "numpy", numpy.__version__, "jax", jax.__version__, "tvm_ffi", tvm_ffi.__version__, "paddle", paddle.__version__)' 2>/dev/null)"
