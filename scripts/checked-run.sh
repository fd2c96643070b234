#!/usr/bin/env bash
# One checked run of a test program: runs COMMAND, prints its output (each line prefixed with
# "  [NAME] "), and passes when COMMAND exits 0 and, where PATTERN is not empty, printed a line
# matching PATTERN (an extended regex: the proof that its checks ran, e.g. "^c: [0-9]+ passed,
# 0 failed$"). It exits with COMMAND's status (1 when the line is missing).
# The steps of scripts/test.sh run their C and Python test programs through it (scripts/c-test.sh,
# scripts/plugin-test.sh, scripts/pjrt-test.sh), and scripts/flake-hunt.sh reruns the very same
# lines: when DLPORT_HUNT_LIST names a file, each run that passes is also appended there as a line
# of the hunt's plan ("NAME<TAB>DIRECTORY<TAB>WORDS", the words of this call separated by \x1f),
# and the name of each run that fails to DLPORT_HUNT_LIST.failed (a hunt reruns what passes).
# Usage: scripts/checked-run.sh NAME PATTERN COMMAND...   (COMMAND may start with env VAR=VALUE...)
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 NAME PATTERN COMMAND..." >&2; exit 2; }
name=$1 pattern=$2
shift 2
words=("$0" "$name" "$pattern" "$@")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1 </dev/null
status=$?
awk -v prefix="  [$name] " '{ print prefix $0 }' "$log"  # (a name may hold any character but \)
if [ "$status" -eq 0 ] && [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$log"; then
  echo "[checked-run] FAILED: $name did not print a line matching: $pattern"
  status=1
elif [ "$status" -ne 0 ]; then
  echo "[checked-run] FAILED: $name exited with status $status"
else
  echo "[checked-run] ok: $name"
fi
if [ -n "${DLPORT_HUNT_LIST:-}" ]; then
  if [ "$status" -eq 0 ]; then
    words[0]=$(cd "$(dirname "$0")" && pwd)/checked-run.sh
    (IFS=$'\x1f' && printf '%s\t%s\t%s\n' "$name" "$PWD" "bash$IFS${words[*]}") >>"$DLPORT_HUNT_LIST"
  else
    echo "$name" >>"$DLPORT_HUNT_LIST.failed"
  fi
fi
exit "$status"
