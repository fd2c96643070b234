#!/usr/bin/env bash
# Creates (once) the peers' venv with python/requirements-peers.txt: PyTorch 2.15.0 (about 6 GB
# with its CUDA runtime wheels), JAX, Ray, Dask distributed, NumPy and pytest for CPython 3.12.
# It lives outside the clone, under ${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-peers-<sha256 of
# the pins, 16 hex digits>, so that a fresh clone (as CI makes) reuses it; .venv-peers in the
# clone is a symlink to it. A venv of other pins is removed (6 GB each). Then it installs the
# dlport wheel scripts/python-build.sh built into python/target/wheels (every run: seconds).
# Messages go to stderr; the venv's path is the last line on stdout.
# When PyPI cannot be reached it says so and exits 3: the callers then skip visibly.
# The interpreter: $DLPORT_PYTHON, else python3.12 on PATH, else pyenv's 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
req=python/requirements-peers.txt
want=$(sha256sum "$req" | cut -d' ' -f1)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport
venv=$cache/venv-peers-${want:0:16}
stamp=$venv/.requirements.sha256
mkdir -p "$cache"
for old in "$cache"/venv-peers-* "$cache"/venv-torch-* "$cache"/venv-engines-*; do
  [ "$old" = "$venv" ] || [ ! -e "$old" ] || { echo "[peers] removing $old (other pins)" >&2; rm -rf "$old"; }
done
for link in .venv-peers .venv-torch; do
  [ ! -e "$link" ] || [ -L "$link" ] || rm -rf "$link"
done
rm -f .venv-torch
ln -sfn "$venv" .venv-peers
start=$SECONDS
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "[peers] $venv up to date" >&2
else
  py=$(bash scripts/find-python.sh 3.12 DLPORT_PYTHON) || { echo "[peers] see above" >&2; exit 1; }
  if ! "$py" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/torch/", timeout=15)' 2>/dev/null; then
    echo "[peers] SKIPPED: PyPI (https://pypi.org) cannot be reached, so $req cannot be installed" >&2
    exit 3
  fi
  echo "[peers] creating $venv ($py) with $req: torch 2.15.0 with its CUDA runtime wheels, JAX, Ray, Dask (about 6.5 GB; minutes)" >&2
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  # No pip cache: the wheels (about 4 GB) would take that much disk a second time.
  "$venv/bin/python" -m pip install --quiet --no-cache-dir -r "$req" >&2
  echo "$want" > "$stamp"
fi
wheel=$(ls -t python/target/wheels/dlport-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "[peers] no dlport wheel in python/target/wheels: run scripts/python-build.sh first" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel" >&2
echo "[peers] ready in $((SECONDS - start)) s: $("$venv/bin/python" -c 'import sys, torch, jax, ray, distributed, numpy; print("Python", sys.version.split()[0], "torch", torch.__version__, "jax", jax.__version__, "ray", ray.__version__, "distributed", distributed.__version__, "numpy", numpy.__version__)')" >&2
echo "$venv"
