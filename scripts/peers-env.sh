#!/usr/bin/env bash
# Makes (once) the peers' venv with python/requirements-peers.txt: PyTorch 2.15.0 (about 6 GB
# with its CUDA runtime wheels, kept out of pip's cache), JAX, Ray, Dask distributed, NumPy and
# pytest for CPython 3.12, in ${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-peers-<16 hex of the
# pins' sha256> (scripts/venv-lib.sh), linked as .venv-peers; then installs the dlport wheel
# scripts/python-build.sh built. Messages go to stderr; the venv's path is the last line on
# stdout. When PyPI cannot be reached it says so and exits 3: the callers then skip visibly.
# The interpreter: $DLPORT_PYTHON, else python3.12 on PATH, else pyenv's 3.12.
# --no-wheel: the venv alone (scripts/test.sh makes it in the background before the wheel exists).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv-lib.sh
req=python/requirements-peers.txt
venv=$(venv_cached_dir peers "$req")
[ ! -e .venv-peers ] || [ -L .venv-peers ] || rm -rf .venv-peers
ln -sfn "$venv" .venv-peers
start=$SECONDS
PIP_NO_CACHE_DIR=1 venv_make peers "$venv" 3.12 DLPORT_PYTHON "$req" yes || exit $?
[ "${1:-}" != --no-wheel ] || exit 0
venv_add_wheel peers "$venv"
echo "[peers] ready in $((SECONDS - start)) s: $("$venv/bin/python" -c 'import sys, torch, jax, ray, distributed, numpy; print("Python", sys.version.split()[0], "torch", torch.__version__, "jax", jax.__version__, "ray", ray.__version__, "distributed", distributed.__version__, "numpy", numpy.__version__)')" >&2
echo "$venv"
