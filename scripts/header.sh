#!/usr/bin/env bash
# Generates capi/include/dlport.h from the Rust source with cbindgen (pinned in
# scripts/install-deps.sh; config capi/cbindgen.toml).
#   scripts/header.sh           rewrites the header
#   scripts/header.sh --check   fails (and shows the diff) when the committed header is stale
set -euo pipefail
cd "$(dirname "$0")/.."
want="cbindgen 0.29.4"
have=$(cbindgen --version 2>/dev/null || true)
[ "$have" = "$want" ] || { echo "[header] need $want (scripts/install-deps.sh installs it), found '${have:-none}'" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cbindgen --quiet --config capi/cbindgen.toml --output "$tmp" capi
# cbindgen's "type" style names types as dlpack.h does (`DLTensor`, not `struct DLTensor`, which
# would be a different, incomplete type after dlpack.h's anonymous typedefs), but it cannot tag
# the two self-referential structs; tag them as dlpack.h does. Exactly two of each, or fail.
perl -0 -i -pe '
  $n = s/typedef struct \{((?:(?!typedef).)*?)\} (DLManagedTensor(?:Versioned)?);/typedef struct $2 {$1} $2;/gs;
  $m = s/\(\*deleter\)\((DLManagedTensor(?:Versioned)?) \*/(*deleter)(struct $1 */g;
  die "[header] expected to tag 2 self-referential structs, tagged $n and $m\n" unless $n == 2 && $m == 2;
' "$tmp"
if [ "${1:-}" = "--check" ]; then
  if ! diff -u capi/include/dlport.h "$tmp"; then
    echo "[header] FAILED: capi/include/dlport.h is not what the Rust source generates; run scripts/header.sh and commit the result" >&2
    exit 1
  fi
  echo "[header] capi/include/dlport.h matches the Rust source ($want)"
else
  cp "$tmp" capi/include/dlport.h
  echo "[header] wrote capi/include/dlport.h ($want)"
fi
