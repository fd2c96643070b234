#!/usr/bin/env bash
# Runs every fenced code block of every README as a user pastes it (scripts/snippets.py says
# how each kind of block runs): each README in a fresh $HOME with a fresh venv, from a copy of
# the repository's files (a fresh clone, with this working tree's contents), with neither
# LD_LIBRARY_PATH nor PKG_CONFIG_PATH set. So the READMEs and the tests cannot drift: the test
# reads the READMEs. Prints one line per block (FILE:LINE LANG passed|failed|SKIPPED) and
# `snippets: N passed, N failed, N skipped`; fails when a block fails.
#
# Builds are shared by every block and kept between runs, outside the clone, so that a fresh
# clone (as CI makes) reuses them: the copy and cargo's builds in
# ${XDG_CACHE_HOME:-~/.cache}/dlport/snippets/state (CARGO_TARGET_DIR; the copy's path stays the
# same, so a warm run rebuilds only what changed). pip and npm download into the caches of the
# user running this (pip's ${XDG_CACHE_HOME:-~/.cache}/pip, npm's ~/.npm), not the sessions' fresh
# ones: the test command's venvs and npm builds have fetched most of the same files by then, and
# a download cache changes how long a block takes, not what it does (npm prefers its cache, so
# `npm create vite@latest` reuses the scaffold it fetched). Cold, on 2 cores: the C library, the
# Python wheel and both wasm builds, about 15 minutes; warm: a few.
# Usage: scripts/snippets-test.sh [README ...]   (default: every README)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
# DLPORT_SNIPPETS_STATE: another folder for the copy and the builds (a cold run, timed).
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport/snippets
state=${DLPORT_SNIPPETS_STATE:-$cache/state}
clone=$state/dlport
pip_cache=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}
npm_cache=${npm_config_cache:-$HOME/.npm}
mkdir -p "$pip_cache" "$npm_cache"

# What the READMEs ask the user to install with apt (blocks the runner skips: they need root).
need=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers cmake pkg-config)
if ! dpkg -s "${need[@]}" >/dev/null 2>&1; then bash scripts/apt-install.sh "${need[@]}"; fi

# A clone: the files git tracks or would track, as they are in the working tree, so what is not
# yet committed is tested too (scripts/tree-copy.sh).
rm -rf "$clone"
bash scripts/tree-copy.sh "$clone"
echo "[snippets] clone: $(find "$clone" -type f | wc -l) files (tracked or trackable) copied into $clone"

# cargo and rustup stay where they are installed; everything else of the user is new.
export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo} RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export CARGO_TARGET_DIR=$state/target PIP_CACHE_DIR=$pip_cache
export npm_config_cache=$npm_cache npm_config_prefer_offline=true npm_config_update_notifier=false
# npm_config_yes: the "Ok to proceed? (y)" a user answers before `npm create` fetches create-vite.
export npm_config_yes=true npm_config_fund=false npm_config_audit=false PIP_DISABLE_PIP_VERSION_CHECK=1
unset LD_LIBRARY_PATH PKG_CONFIG_PATH VIRTUAL_ENV PYTHONPATH
# The sessions' $HOMEs: outside the repository (a cargo project there would be taken for a
# member of dlport's workspace), removed at the end.
homes=$(mktemp -d "${TMPDIR:-/tmp}/dlport-snippets.XXXXXX")
trap 'rm -rf "$homes"' EXIT
python3 scripts/snippets.py --clone "$clone" --state "$state" --homes "$homes" "$@"
