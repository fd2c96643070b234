#!/usr/bin/env bash
# The README's "Getting started" commands as a user types them: now a part of
# scripts/snippets-test.sh, which runs every block of every README that way (a fresh $HOME and
# venv, from a copy of the repository). Kept for the names it had:
#   c       README.md (its C door, and the other blocks of README.md)
#   python  python/README.md
# Usage: scripts/getting-started.sh {c|python}...
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- c python
readmes=()
for block in "$@"; do
  case "$block" in
    c) readmes+=(README.md) ;;
    python) readmes+=(python/README.md) ;;
    *) echo "usage: $0 {c|python}... (got '$block')" >&2; exit 2 ;;
  esac
done
exec bash scripts/snippets-test.sh "${readmes[@]}"
