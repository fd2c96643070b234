#!/usr/bin/env bash
# Every tracked source file over 500 lines must be named, with a reason, in DESIGN.md's
# "Files over 500 lines" list (a line "- `path` — reason"). Generated files (the list marks them
# "generated") are named there too. Lock files and vendored code are not source and are skipped.
# Usage: scripts/file-size-check.sh   (from anywhere; exits 1 naming each unlisted file)
set -euo pipefail
cd "$(dirname "$0")/.."
limit=500
# The list: the lines of DESIGN.md's "Files over 500 lines" section that start with "- `path`".
listed=$(awk '/^## /{on = ($0 ~ /^## Files over 500 lines/)} on && /^- `[^`]+`/ {
  s = $0; sub(/^- `/, "", s); sub(/`.*/, "", s); print s }' DESIGN.md)
fail=0
count=0
while IFS= read -r f; do
  case "$f" in
    */vendor/*|vendor/*|*.lock|*/node_modules/*|*/pkg/*) continue ;;
  esac
  [ -f "$f" ] || continue
  n=$(wc -l <"$f")
  [ "$n" -gt "$limit" ] || continue
  count=$((count + 1))
  if grep -qxF -- "$f" <<<"$listed"; then
    printf '  %5d  %s (listed)\n' "$n" "$f"
  else
    printf '  %5d  %s: over %d lines and not in DESIGN.md "Files over 500 lines"; split it or add "- `%s` — <reason>" there\n' "$n" "$f" "$limit" "$f" >&2
    fail=1
  fi
done < <(git ls-files -- '*.rs' '*.c' '*.h' '*.py' '*.js' '*.mjs' '*.ts' '*.sh')
# A listed file that is gone or back under the limit is a stale entry: the list stays true.
while IFS= read -r f; do
  [ -n "$f" ] || continue
  if [ ! -f "$f" ] || [ "$(wc -l <"$f")" -le "$limit" ]; then
    echo "  DESIGN.md lists \`$f\` as over $limit lines, but it is not (remove the entry)" >&2
    fail=1
  fi
done <<<"$listed"
echo "file-size check: $count files over $limit lines"
exit "$fail"
