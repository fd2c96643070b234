#!/usr/bin/env bash
# The module-graph check's own test, then the check on every crate with Rust sources.
#  1. A planted cycle through a root function (scripts/tests/module-graph/root-cycle: lib.rs's
#     `helper()` names `room` by its bare name, room.rs calls `crate::helper()`) must fail,
#     naming the cycle; the same code with a root that only declares and re-exports
#     (scripts/tests/module-graph/rooms) must pass.
#  2. Every crate's src: core native wasm capi testkit python python/pyo3.
# Only Python's standard library; about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
check=scripts/module-graph-check.py
fixtures=scripts/tests/module-graph
if out=$(python3 "$check" "$fixtures/root-cycle/src" 2>&1); then
  echo "[module-graph] FAILED: the planted cycle through a root function was not found:" >&2
  echo "$out" >&2
  exit 1
fi
echo "$out" | grep -q "module cycle in $fixtures/root-cycle/src: crate -> crate::room -> crate" || {
  echo "[module-graph] FAILED: the planted cycle was not named:" >&2
  echo "$out" >&2
  exit 1
}
echo "[module-graph] the planted cycle through a root function fails the check, named:"
echo "$out" | sed 's/^/    /'
python3 "$check" "$fixtures/rooms/src"
status=0
for crate in core native wasm capi testkit python; do
  python3 "$check" "$crate/src" || status=1
done
# python/pyo3 still holds one knot (the Tensor class's methods reach buffer, exchange, pickle and
# ready, which build Tensors): it is printed on every run and does not fail it until the class's
# methods are split into rooms (issue #48).
python3 "$check" python/pyo3/src || echo "[module-graph] python/pyo3/src: the knot above is known and open (issue #48); not a failure yet"
exit $status
