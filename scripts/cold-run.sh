#!/usr/bin/env bash
# The test command as a fresh machine runs it: clones the current HEAD into a temporary directory
# and runs scripts/test.sh there (CI set, as .ci/run does) with every cache cold: a fresh, empty
# HOME, CARGO_HOME and XDG_CACHE_HOME (no ~/.cargo/bin tools, no cargo registry, no pip, npm,
# Miri, PoCL, Mesa or Chromium caches, no venvs in the cache) and no target/. The toolchains
# stay (RUSTUP_HOME, /root/.rustup by default), and so do the machine's Debian packages and
# pyenv's interpreters (found through PYENV_ROOT, or DLPORT_PYTHON and DLPORT_PYTHON39).
# Uncommitted changes are not part of the run: commit first.
# Usage: scripts/cold-run.sh [STAGE...]   (the stages of scripts/test.sh; default all)
#   DLPORT_COLD_DIR  where the clone and the fresh homes go (default: a new directory in /tmp).
#                    Afterwards only the log, cold-run.log, stays there: the clone and homes take
#                    about 25 GB, and kept runs fill a shared disk (DLPORT_COLD_KEEP=1 keeps
#                    them, e.g. for scripts/flake-hunt.sh in the clone).
# It samples the directory's size once a minute and prints the largest (a whole run's disk need).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${DLPORT_COLD_DIR:-$(mktemp -d /tmp/dlport-cold.XXXXXX)}
mkdir -p "$dir"
[ ! -e "$dir/clone" ] || { echo "[cold] $dir/clone exists: name an empty DLPORT_COLD_DIR" >&2; exit 2; }
log=$dir/cold-run.log
head=$(git -C "$repo" rev-parse HEAD)
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] \
  || echo "[cold] note: the working tree has uncommitted changes; the run tests HEAD ($head) without them"

# The interpreters, found before HOME changes (pyenv's shims name their root, but a script's
# fallback looks in $PYENV_ROOT or $HOME/.pyenv).
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
find_python() { # $1: minor version, e.g. 3.12
  local cand
  for cand in "$pyenv_root"/versions/"$1".*/bin/python3 "$(command -v "python$1" || true)"; do
    if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$1'.split('.'))))" 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  return 1
}
py312=${DLPORT_PYTHON:-$(find_python 3.12 || true)}
py39=${DLPORT_PYTHON39:-$(find_python 3.9 || true)}
[ -n "$py312" ] || { echo "[cold] no CPython 3.12 (pyenv install 3.12, or set DLPORT_PYTHON)" >&2; exit 1; }
[ -n "$py39" ] || { echo "[cold] no CPython 3.9 (pyenv install 3.9, or set DLPORT_PYTHON39)" >&2; exit 1; }

git clone -q --no-hardlinks "$repo" "$dir/clone"
git -C "$dir/clone" checkout -q "$head"
mkdir -p "$dir/home" "$dir/cargo-home/bin" "$dir/cache"
[ ! -e "$dir/clone/target" ] || { echo "[cold] the clone has a target/" >&2; exit 1; }

rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
# rustup's proxies (cargo, rustc, cargo-miri, ...: the files of the old CARGO_HOME's bin that are
# rustup itself) are linked into a directory of their own; the old bin leaves PATH, so a tool
# that `cargo install` put there earlier (cargo-fuzz, cbindgen, wasm-bindgen-cli) is not found, and
# the fresh CARGO_HOME's bin, where the run installs them, comes first.
old_bin=$(dirname "$(command -v rustup)")
mkdir -p "$dir/rustup-bin"
for f in "$old_bin"/*; do
  if cmp -s "$f" "$old_bin/rustup"; then ln -s "$f" "$dir/rustup-bin/$(basename "$f")"; fi
done
path=$(tr ':' '\n' <<<"$PATH" | grep -vxF "$old_bin" | paste -sd: -)
echo "[cold] HEAD $head cloned into $dir/clone; HOME, CARGO_HOME, XDG_CACHE_HOME fresh under $dir; log: $log"
echo "[cold] Python 3.12: $py312; Python 3.9: $py39; the machine's load now: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS
# The disk the run takes: du of the directory once a minute at the lowest priority, the largest kept.
( peak=0
  while sleep 60; do
    kb=$(nice -n 19 du -sxk "$dir" 2>/dev/null | cut -f1) || continue
    [ "${kb:-0}" -le "$peak" ] || { peak=$kb; echo "$peak" >"$dir/disk-peak-kb"; }
  done ) &
sampler=$!
set +e
(
  cd "$dir/clone"
  env HOME="$dir/home" CARGO_HOME="$dir/cargo-home" XDG_CACHE_HOME="$dir/cache" \
    RUSTUP_HOME="$rustup_home" PYENV_ROOT="$pyenv_root" \
    DLPORT_PYTHON="$py312" DLPORT_PYTHON39="$py39" CI=true \
    PATH="$dir/cargo-home/bin:$dir/rustup-bin:$path" \
    bash scripts/test.sh "$@"
) >"$log" 2>&1
status=$?
set -e
kill "$sampler" 2>/dev/null || true
echo "[cold] scripts/test.sh $* exited with $status after $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s; the machine's load now: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "[cold] the largest size of $dir, sampled once a minute: $(awk '{printf "%.1f GB", $1 / 1048576}' "$dir/disk-peak-kb" 2>/dev/null || echo 'not sampled')"
if [ "${DLPORT_COLD_KEEP:-0}" = 1 ]; then
  echo "[cold] kept: $dir/clone and the homes (DLPORT_COLD_KEEP=1)"
else
  rm -rf "$dir/clone" "$dir/home" "$dir/cargo-home" "$dir/cache" "$dir/rustup-bin"
  echo "[cold] removed the clone and the homes; the log stays: $log"
fi
# The timing table is the log's tail (scripts/test.sh prints it on exit, on failure too).
sed -n '/^step (/,$p' "$log"
exit "$status"
