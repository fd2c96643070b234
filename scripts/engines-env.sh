#!/usr/bin/env bash
# Creates (once) the engines venv with python/requirements-engines.txt: Ray, Dask distributed,
# NumPy, JAX and pytest for CPython 3.12, cached outside the repository under
# ${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-engines-<sha256 of the pins, 16 hex digits>, so
# fresh clones reuse it; then installs the dlport wheel scripts/python-build.sh built into
# python/target/wheels (every run: seconds). Prints the venv's path on its last line.
# When PyPI cannot be reached it says so and exits 3 (scripts/engines-test.sh then skips
# visibly). The interpreter: $DLPORT_PYTHON, else python3.12 on PATH, else pyenv's 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
req=python/requirements-engines.txt
hash=$(sha256sum "$req" | cut -c1-16)
venv=${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-engines-$hash
start=$SECONDS
if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
  echo "[engines] $venv up to date" >&2
else
  py=$(bash scripts/find-python.sh 3.12 DLPORT_PYTHON) || { echo "[engines] see above" >&2; exit 1; }
  if ! "$py" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/ray/", timeout=15)' 2>/dev/null; then
    echo "[engines] SKIPPED: PyPI (https://pypi.org) cannot be reached, so Ray and Dask cannot be installed" >&2
    exit 3
  fi
  echo "[engines] creating $venv ($py) with $req (about 400 MB; a few minutes)" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet -r "$req" >&2
  touch "$venv/.complete"
fi
wheel=$(ls -t python/target/wheels/dlport-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "[engines] no dlport wheel in python/target/wheels: run scripts/python-build.sh first" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel" >&2
echo "[engines] ready in $((SECONDS - start)) s: $("$venv/bin/python" -c 'import sys, ray, dask, distributed, numpy; print("Python", sys.version.split()[0], "ray", ray.__version__, "dask", dask.__version__, "distributed", distributed.__version__, "numpy", numpy.__version__)')" >&2
echo "$venv"
