#!/usr/bin/env bash
# Generates native/include/dlport.h from the Rust source with cbindgen (pinned in
# scripts/install-deps.sh; config native/cbindgen.toml).
#   scripts/header.sh           rewrites the header
#   scripts/header.sh --check   fails (and shows the diff) when the committed header is stale
set -euo pipefail
cd "$(dirname "$0")/.."
want="cbindgen 0.29.4"
have=$(cbindgen --version 2>/dev/null || true)
[ "$have" = "$want" ] || { echo "[header] need $want (scripts/install-deps.sh installs it), found '${have:-none}'" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cbindgen --quiet --config native/cbindgen.toml --output "$tmp" native
if [ "${1:-}" = "--check" ]; then
  if ! diff -u native/include/dlport.h "$tmp"; then
    echo "[header] FAILED: native/include/dlport.h is not what the Rust source generates; run scripts/header.sh and commit the result" >&2
    exit 1
  fi
  echo "[header] native/include/dlport.h matches the Rust source ($want)"
else
  cp "$tmp" native/include/dlport.h
  echo "[header] wrote native/include/dlport.h ($want)"
fi
