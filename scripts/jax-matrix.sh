#!/usr/bin/env bash
# dlport.jax on a second JAX release (issue #55): .venv has the JAX the peers pin (0.12.0.1,
# python/requirements-dev.txt); this runs python/tests/test_jax_interpose.py again under the
# newer release below, whose private surfaces differ (jaxlib's dlpack_managed_tensor_to_buffer
# takes a sixth argument, `layout`).
#  - .venv-jax: CPython 3.12 with jax[cpu]==$JAX, pytest and NumPy, made once (about 100 MB
#    from PyPI) and reused while the pins below stay the same; where it cannot be made, SKIPPED
#    with the reason.
#  - the dlport wheel scripts/python-build.sh left in python/target/wheels, installed into it.
# Needs DLPORT_PJRT_PLUGIN (scripts/pjrt-test.sh sets it and calls this script).
set -euo pipefail
cd "$(dirname "$0")/.."
JAX=0.12.1
pins=("jax[cpu]==$JAX" "jaxlib==$JAX" pytest numpy ml_dtypes)
venv=.venv-jax
stamp=$venv/.pins
if [ -z "${DLPORT_PJRT_PLUGIN:-}" ]; then
  echo "[jax-matrix] SKIPPED: DLPORT_PJRT_PLUGIN is not set (scripts/pjrt-test.sh sets it)"
  exit 0
fi
wheel=$(ls python/target/wheels/dlport-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "[jax-matrix] SKIPPED: no dlport wheel in python/target/wheels (scripts/python-build.sh builds it)"
  exit 0
fi
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
  py=$(bash scripts/find-python.sh 3.12 DLPORT_PYTHON) || { echo "[jax-matrix] SKIPPED: no CPython 3.12"; exit 0; }
  rm -rf "$venv"
  echo "[jax-matrix] creating $venv ($py) with ${pins[*]} (once)"
  if ! { "$py" -m venv "$venv" && "$venv/bin/python" -m pip install --quiet "${pins[@]}"; }; then
    rm -rf "$venv"
    echo "[jax-matrix] SKIPPED: $venv could not be made (no network or no PyPI)"
    exit 0
  fi
  echo "${pins[*]}" > "$stamp"
fi
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
echo "[jax-matrix] JAX $("$venv/bin/python" -c 'import jax; print(jax.__version__)'), wheel $(basename "$wheel")"
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider python/tests/test_jax_interpose.py
