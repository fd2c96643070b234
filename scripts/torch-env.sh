#!/usr/bin/env bash
# Creates .venv-torch (CPython 3.12; a symlink to the cache, below) with python/requirements-torch.txt (torch 2.15.0 from PyPI with
# its dependencies, about 6 GB; NumPy; pytest) and installs the dlport wheel that
# scripts/python-build.sh built into python/target/wheels. Idempotent: the environment is kept
# while its stamp holds the pins' hash; the dlport wheel is reinstalled on every run (seconds).
# When PyPI cannot be reached, it says so and exits 3: scripts/test.sh then skips the torch stage
# visibly. The interpreter: $DLPORT_PYTHON, else python3.12 on PATH, else pyenv's 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
req=python/requirements-torch.txt
want=$(sha256sum "$req" | cut -d' ' -f1)
# The environment lives in the cache, keyed by the pins' hash, outside the clone, so that a fresh
# clone (as CI makes) reuses it; .venv-torch in the clone is a symlink to it. An environment of
# other pins is removed (6 GB each), and so is an in-clone .venv-torch of an older checkout.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport
venv=$cache/venv-torch-${want:0:16}
stamp=$venv/.requirements.sha256
mkdir -p "$cache"
for old in "$cache"/venv-torch-*; do
  [ "$old" = "$venv" ] || [ ! -e "$old" ] || { echo "[torch] removing $old (other pins)"; rm -rf "$old"; }
done
[ ! -e .venv-torch ] || [ -L .venv-torch ] || rm -rf .venv-torch
ln -sfn "$venv" .venv-torch
start=$SECONDS
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "[torch] $venv up to date"
else
  py=$(bash scripts/find-python.sh 3.12 DLPORT_PYTHON) || { echo "[torch] see above" >&2; exit 1; }
  if ! "$py" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/torch/", timeout=15)' 2>/dev/null; then
    echo "[torch] SKIPPED: PyPI (https://pypi.org) cannot be reached, so torch 2.15.0 cannot be installed" >&2
    exit 3
  fi
  echo "[torch] creating $venv ($py) with $req: torch 2.15.0 and its CUDA runtime wheels (about 6 GB; minutes)"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # No pip cache: the wheels (about 4 GB) would take that much disk a second time.
  "$venv/bin/python" -m pip install --quiet --no-cache-dir -r "$req"
  echo "$want" > "$stamp"
fi
wheel=$(ls python/target/wheels/dlport-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "[torch] no dlport wheel in python/target/wheels: run scripts/python-build.sh first" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
echo "[torch] $venv ready in $((SECONDS - start)) s: $("$venv/bin/python" -c 'import sys, torch, numpy; print("Python", sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__)')"
