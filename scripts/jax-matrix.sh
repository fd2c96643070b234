#!/usr/bin/env bash
# dlport.jax on a second JAX release (issue #55): .venv has the JAX the peers pin (0.12.0.1,
# python/requirements-dev.txt); this runs python/tests/test_jax_interpose.py again under the
# newer release below, whose private surfaces differ (jaxlib's dlpack_managed_tensor_to_buffer
# takes a sixth argument, `layout`).
#  - the venv: CPython 3.12 with python/requirements-jax-next.txt (JAX 0.12.1, about 100 MB from
#    PyPI), made once in the cache (scripts/venv-lib.sh) and reused while its pins stay the same;
#    where it cannot be made, SKIPPED with the reason.
#  - the dlport wheel scripts/python-build.sh left in python/target/wheels, installed into it.
# Needs DLPORT_PJRT_PLUGIN (scripts/pjrt-test.sh sets it and calls this script).
# --venv-only: the venv alone, nothing run (scripts/test.sh makes it in the background).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv-lib.sh
req=python/requirements-jax-next.txt
venv_only=""
[ "${1:-}" != --venv-only ] || venv_only=yes
if [ -z "$venv_only" ] && [ -z "${DLPORT_PJRT_PLUGIN:-}" ]; then
  echo "[jax-matrix] SKIPPED: DLPORT_PJRT_PLUGIN is not set (scripts/pjrt-test.sh sets it)"
  exit 0
fi
wheel=$(ls -t python/target/wheels/dlport-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$venv_only" ] && [ -z "$wheel" ]; then
  echo "[jax-matrix] SKIPPED: no dlport wheel in python/target/wheels (scripts/python-build.sh builds it)"
  exit 0
fi
venv=$(venv_cached_dir jax-next "$req")
rc=0
venv_make jax-matrix "$venv" 3.12 DLPORT_PYTHON "$req" yes || rc=$?
[ -z "$venv_only" ] || exit "$rc"
if [ "$rc" != 0 ]; then
  echo "[jax-matrix] SKIPPED: the venv of $req could not be made (above)"
  exit 0
fi
venv_add_wheel jax-matrix "$venv"
echo "[jax-matrix] JAX $("$venv/bin/python" -c 'import jax; print(jax.__version__)'), wheel $(basename "$wheel")"
# Through scripts/checked-run.sh, which records it for scripts/flake-hunt.sh plugins.
bash scripts/checked-run.sh jax-matrix:test_jax_interpose '[0-9]+ passed' \
  env DLPORT_PJRT_PLUGIN="$DLPORT_PJRT_PLUGIN" \
  "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider python/tests/test_jax_interpose.py
