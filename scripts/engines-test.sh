#!/usr/bin/env bash
# dlport.Tensor through the engines Python users scale out with (issue 44): Ray (ray.put/get,
# task arguments and results, a two-node cluster on the loopback, 10^4 round trips for leaks)
# and Dask distributed (LocalCluster with process workers), with the unpickled tensors handed to
# torch and JAX, in the peers' venv (scripts/peers-env.sh: cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/dlport, keyed by the pins' hash, with this checkout's dlport
# wheel installed on every run). Builds the wheel first when python/target/wheels has none.
# About 1 minute warm. When PyPI cannot be reached and the venv is not cached, it says so and
# skips (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls python/target/wheels/dlport-*.whl >/dev/null 2>&1; then
  bash scripts/python-env.sh
  bash scripts/python-build.sh
fi
rc=0
venv=$(bash scripts/peers-env.sh) || rc=$?
if [ "$rc" = 3 ]; then
  echo "[engines] SKIPPED: the Ray and Dask tests need the peers' venv, and PyPI cannot be reached" >&2
  exit 0
elif [ "$rc" != 0 ]; then
  exit "$rc"
fi
start=$SECONDS
# -s: the tests print the zero-copy addresses, the nodes of the two-node case and the leak
# check's counts; -rs: any skip, with its reason.
"$venv/bin/python" -m pytest -q -s -rs -p no:cacheprovider python/tests/engines
echo "[engines] Ray and Dask tests passed in $((SECONDS - start)) s"
