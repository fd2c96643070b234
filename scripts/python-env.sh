#!/usr/bin/env bash
# Creates .venv with the pinned Python peers (idempotent: skipped when already satisfied).
set -euo pipefail
cd "$(dirname "$0")/.."
req=tests/python/requirements.txt
stamp=.venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "[python] .venv up to date"
  exit 0
fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r "$req"
echo "$want" > "$stamp"
echo "[python] .venv ready: $(.venv/bin/python -c 'import numpy, jax; print("numpy", numpy.__version__, "jax", jax.__version__)')"
