# shellcheck shell=bash
# The one way the test command makes a Python venv: sourced by the scripts that name each venv
# (python-env.sh: .venv; python39-test.sh: .venv39; peers-env.sh: the peers' venv; upstream-env.sh:
# the JAX 0.10.2 stack; jax-matrix.sh: the next JAX release). A venv holds exactly one pinned requirements
# file, and a stamp of that file's sha256 keeps it while the pins stay the same; a venv of other
# pins, or of another Python, is made again.
# Functions (each message goes to stderr, prefixed with the caller's LABEL):
#   venv_cached_dir NAME REQ     prints ${XDG_CACHE_HOME:-~/.cache}/dlport/venv-NAME-<16 hex of
#                                REQ's sha256> (outside the clone, so that a fresh clone reuses it)
#                                and removes that folder's siblings of other pins
#   venv_make LABEL DIR MINOR VAR REQ [NEEDS_PYPI]
#                                makes DIR (CPython MINOR: find-python.sh MINOR VAR) with REQ, or
#                                says it is up to date; with NEEDS_PYPI=yes, returns 3 with a
#                                SKIPPED line when PyPI cannot be reached (the callers then skip
#                                visibly). PIP_NO_CACHE_DIR=1 in the caller keeps big wheels out
#                                of pip's cache.
#   venv_add_wheel LABEL DIR     installs the dlport wheel scripts/python-build.sh built last into
#                                python/target/wheels (every run: seconds)
venv_log() { printf '[%s] %s\n' "$1" "$2" >&2; }

venv_cached_dir() {
  local name=$1 req=$2 cache want dir old
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport
  want=$(sha256sum "$req" | cut -d' ' -f1)
  dir=$cache/venv-$name-${want:0:16}
  mkdir -p "$cache"
  for old in "$cache/venv-$name"-*; do
    [ "$old" = "$dir" ] || [ ! -e "$old" ] || { venv_log "$name" "removing $old (other pins)"; rm -rf "$old"; }
  done
  echo "$dir"
}

venv_make() {
  local label=$1 dir=$2 minor=$3 var=$4 req=$5 needs_pypi=${6:-} want have py
  want=$(sha256sum "$req" | cut -d' ' -f1)
  have=$("$dir/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
  if [ "$have" = "$minor" ] && [ "$(cat "$dir/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    venv_log "$label" "$dir up to date (Python $have, $req)"
    return 0
  fi
  py=$(bash scripts/find-python.sh "$minor" "$var") || { venv_log "$label" "see above"; return 1; }
  if [ "$needs_pypi" = yes ] \
    && ! "$py" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15)' 2>/dev/null; then
    venv_log "$label" "SKIPPED: PyPI (https://pypi.org) cannot be reached, so $req cannot be installed"
    return 3
  fi
  venv_log "$label" "creating $dir ($py) with $req"
  rm -rf "$dir"
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2
  echo "$want" >"$dir/.requirements.sha256"
}

venv_add_wheel() {
  local label=$1 dir=$2 wheel
  wheel=$(ls -t python/target/wheels/dlport-*.whl 2>/dev/null | head -n1 || true)
  if [ -z "$wheel" ]; then
    venv_log "$label" "no dlport wheel in python/target/wheels: run scripts/python-build.sh first"
    return 1
  fi
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" >&2
}
