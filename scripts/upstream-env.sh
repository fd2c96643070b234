#!/usr/bin/env bash
# Creates (once) the JAX 0.10.2 stack for tests/upstream: CPython 3.11 (the newest JAX it can
# install is 0.10.2) with python/requirements-jax-py311.txt, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/dlport/venv-jax-py311-<sha256 of the pins, 16 hex digits>, so
# that a fresh clone reuses it; a venv of other pins is removed. Then it installs the dlport
# wheel scripts/python-build.sh built into python/target/wheels (abi3, cp310: it installs on 3.11).
# Messages go to stderr; the venv's path is the last line on stdout. When PyPI cannot be
# reached it says so and exits 3: the callers then skip visibly.
# The interpreter: $DLPORT_PYTHON311, else python3.11 on PATH, else pyenv's 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
req=python/requirements-jax-py311.txt
want=$(sha256sum "$req" | cut -d' ' -f1)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport
venv=$cache/venv-jax-py311-${want:0:16}
stamp=$venv/.requirements.sha256
mkdir -p "$cache"
for old in "$cache"/venv-jax-py311-*; do
  [ "$old" = "$venv" ] || [ ! -e "$old" ] || { echo "[jax-py311] removing $old (other pins)" >&2; rm -rf "$old"; }
done
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "[jax-py311] $venv up to date" >&2
else
  py=$(bash scripts/find-python.sh 3.11 DLPORT_PYTHON311) || { echo "[jax-py311] see above" >&2; exit 1; }
  if ! "$py" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/jax/", timeout=15)' 2>/dev/null; then
    echo "[jax-py311] SKIPPED: PyPI (https://pypi.org) cannot be reached, so $req cannot be installed" >&2
    exit 3
  fi
  echo "[jax-py311] creating $venv ($py) with $req (about 150 MB)" >&2
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet -r "$req" >&2
  echo "$want" > "$stamp"
fi
wheel=$(ls -t python/target/wheels/dlport-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "[jax-py311] no dlport wheel in python/target/wheels: run scripts/python-build.sh first" >&2
  exit 1
fi
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel" >&2
echo "[jax-py311] ready: $("$venv/bin/python" -c 'import sys, jax, numpy, ml_dtypes; print("Python", sys.version.split()[0], "jax", jax.__version__, "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__)')" >&2
echo "$venv"
