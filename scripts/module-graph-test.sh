#!/usr/bin/env bash
# The module-graph check's own test, then the check on every crate with Rust sources.
#  1. A planted cycle through a root function (scripts/tests/module-graph/root-cycle: lib.rs's
#     `helper()` names `room` by its bare name, room.rs calls `crate::helper()`) must fail,
#     naming the cycle; the same code with a root that only declares and re-exports
#     (scripts/tests/module-graph/rooms) must pass.
#  2. The rooms tables: a fixture crate (scripts/tests/module-graph/table/src) against small maps
#     beside it (`--design FILE`): drawn.md draws every edge and passes; undrawn.md leaves out
#     an edge, unlisted.md a module, misdrawn.md names a room below its user and one its user
#     does not use, outside.md points out of the repository: each must fail, naming what it is.
#  3. Every crate's src: core native wasm capi testkit python python/pyo3, against DESIGN.md (the
#     rooms tables of core, native and capi; no pointer out of the repository).
# Only Python's standard library; about two seconds.
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
table=$fixtures/table
python3 "$check" --design "$table/drawn.md" "$table/src"
# Each map that is wrong must fail, and its output must name each fault: expect_fail MAP WANT...
expect_fail() {
  local map=$1 want out
  shift
  if out=$(python3 "$check" --design "$table/$map" "$table/src" 2>&1); then
    echo "[module-graph] FAILED: $map passed the check:" >&2
    echo "$out" >&2
    exit 1
  fi
  for want in "$@"; do
    grep -qF -- "$want" <<<"$out" || {
      echo "[module-graph] FAILED: $map failed without naming '$want':" >&2
      echo "$out" >&2
      exit 1
    }
  done
  echo "[module-graph] $map fails the check, naming it:"
  grep -v '^module-graph check:' <<<"$out" | sed 's/^/    /'
}
expect_fail undrawn.md "edge crate::view -> crate::codes at $table/src/view.rs:1: the rooms table does not draw it: row \`view.rs\` ($table/undrawn.md:8)"
expect_fail unlisted.md "module crate::dtype::check ($table/src/dtype/check.rs) is in no row"
expect_fail misdrawn.md "Uses names \`dtype\`, row \`dtype/\` ($table/misdrawn.md:7), which is below it" \
  "Uses names row \`codes.rs\` ($table/misdrawn.md:6), but no module of the row uses one of it"
expect_fail outside.md "a link out of the repository: $table/outside.md:11" \
  "a link out of the repository: $table/outside.md:12"
status=0
for crate in core native wasm capi testkit python; do
  python3 "$check" "$crate/src" || status=1
done
python3 "$check" python/pyo3/src || status=1
exit $status
