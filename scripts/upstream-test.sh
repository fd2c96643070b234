#!/usr/bin/env bash
# The upstream cases (tests/upstream, issue #57): every DLPack failure still open in the newest
# JAX, PyTorch and NumPy, each confirmed with the framework alone (or reported "fixed upstream
# in VERSION") and then taken across by one dlport call, on two stacks:
#   - the peers' venv (scripts/peers-env.sh): CPython 3.12, the newest JAX, PyTorch, NumPy;
#   - the JAX 0.10.2 stack (scripts/upstream-env.sh): CPython 3.11, whose newest JAX is 0.10.2.
# Both venvs are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/dlport and get this checkout's
# wheel (built first when python/target/wheels has none). Case 13 also runs
# python/examples/pjrt/roundtrip.py on the JAX 0.10.2 stack with the XLA CPU plugin, when
# scripts/pjrt-test.sh has cached it.
# It prints each case's outcome per stack, writes tests/upstream/last-run.json, checks that
# python/README.md's "Errors dlport gets past" agrees with it, and ends with
# 'upstream: N passed, N failed'. A stack whose venv cannot be made (PyPI unreachable) is
# skipped, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls python/target/wheels/dlport-*.whl >/dev/null 2>&1; then
  bash scripts/python-env.sh
  bash scripts/python-build.sh
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
plugin=${XDG_CACHE_HOME:-$HOME/.cache}/dlport/pjrt/xla-cpu-pjrt-0.0.1
results=()
for stack in peers jax-py311; do
  rc=0
  if [ "$stack" = peers ]; then
    venv=$(bash scripts/peers-env.sh) || rc=$?
  else
    venv=$(bash scripts/upstream-env.sh) || rc=$?
  fi
  if [ "$rc" = 3 ]; then
    echo "[upstream] SKIPPED the $stack stack: its venv needs PyPI, which cannot be reached" >&2
    continue
  elif [ "$rc" != 0 ]; then
    exit "$rc"
  fi
  echo "[upstream] the $stack stack: $venv"
  env_plugin=()
  if [ "$stack" = jax-py311 ] && [ -d "$plugin/xla_plugins" ]; then
    env_plugin=(DLPORT_XLA_CPU_PJRT_DIR="$plugin")
  fi
  # A failing case is reported by the merge below (with the other stack's outcomes).
  (cd tests/upstream && env "${env_plugin[@]}" DLPORT_UPSTREAM_RESULTS="$out/$stack.json" \
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider .) || true
  [ -f "$out/$stack.json" ] || { echo "[upstream] the $stack stack wrote no results" >&2; exit 1; }
  results+=("$out/$stack.json")
done
[ "${#results[@]}" -gt 0 ] || { echo "[upstream] SKIPPED: no stack could be made"; exit 0; }
python3 scripts/upstream_report.py merge tests/upstream/last-run.json "${results[@]}"
