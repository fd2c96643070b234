#!/usr/bin/env bash
# Copies the working tree's source into DEST: the files git tracks or would track (not ignored),
# as they are on disk, so what is not yet committed is copied too, and nothing a build writes
# (target/, fuzz/target/, venvs, node_modules: all ignored), so a copy taken while a background
# build runs (scripts/test.sh's) cannot catch a file in the middle of a write. mtimes are kept,
# so cargo's fingerprints of an unchanged file stay fresh. A file removed while this runs (a
# fuzzer's corpus) is left out.
# Usage: scripts/tree-copy.sh DEST   (DEST is made when missing; run from anywhere)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
mkdir -p "$1"
dest=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - --ignore-failed-read --warning=no-failed-read -cf - | tar -xf - -C "$dest"
