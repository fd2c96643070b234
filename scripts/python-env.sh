#!/usr/bin/env bash
# Creates .venv (CPython 3.12) with python/requirements-dev.txt: maturin, pytest and the real
# DLPack peers. Idempotent: skipped when .venv already runs 3.12 with exactly these pins; a
# .venv of another Python (an older checkout's 3.11) is replaced.
# The interpreter: $DLPORT_PYTHON, else python3.12 on PATH, else pyenv's 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
req=python/requirements-dev.txt
stamp=.venv/.requirements.sha256
want_minor=3.12
want=$(sha256sum "$req" | cut -d' ' -f1)
have_minor=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
if [ "$have_minor" = "$want_minor" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "[python] .venv up to date (Python $have_minor)"
  exit 0
fi
py=$(bash scripts/find-python.sh 3.12 DLPORT_PYTHON) || { echo "[python] see above" >&2; exit 1; }
if [ -n "$have_minor" ] && [ "$have_minor" != "$want_minor" ]; then
  echo "[python] replacing .venv (Python $have_minor) with Python $want_minor"
  rm -rf .venv
fi
echo "[python] creating .venv ($py) with $req: maturin, pytest, NumPy, JAX, tvm-ffi, Paddle (pip downloads about 350 MB; a few minutes)"
"$py" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r "$req"
echo "$want" > "$stamp"
echo "[python] .venv ready: $(.venv/bin/python -c 'import sys, numpy, jax, tvm_ffi, paddle; print("Python", sys.version.split()[0], "numpy", numpy.__version__, "jax", jax.__version__, "tvm_ffi", tvm_ffi.__version__, "paddle", paddle.__version__)' 2>/dev/null)"
