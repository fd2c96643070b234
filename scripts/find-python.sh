#!/usr/bin/env bash
# Prints the CPython interpreter of a given minor version that the venv scripts use: the
# environment variable named (when set), else pythonX.Y on PATH, else pyenv's X.Y.* (under
# PYENV_ROOT, or ~/.pyenv). Exits 1 with what to do when there is none.
# Usage: scripts/find-python.sh MINOR VARIABLE   (e.g. 3.12 DLPORT_PYTHON)
set -euo pipefail
minor=$1 var=$2
py=${!var:-}
if [ -z "$py" ]; then
  for cand in "$(command -v "python$minor" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$minor".*/bin/python3; do
    if [ -n "$cand" ] && [ -x "$cand" ] \
      && "$cand" -c "import sys; sys.exit('%d.%d' % sys.version_info[:2] != '$minor')" 2>/dev/null; then
      py=$cand
      break
    fi
  done
fi
if [ -z "$py" ]; then
  echo "no CPython $minor found: install it (pyenv install $minor) or set $var" >&2
  exit 1
fi
echo "$py"
