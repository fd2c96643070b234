#!/usr/bin/env bash
# Runs the README's "Getting started" blocks as a new user would type them: each block between
# `<!-- getting-started:NAME begin -->` and `<!-- getting-started:NAME end -->` in README.md,
# the ```sh blocks joined into one script and every block after a `<!-- file: NAME -->` line
# saved as ~/my-app/NAME, run from a copy of the repository's files (a fresh clone, with this
# working tree's contents) in a fresh, empty $HOME, with neither LD_LIBRARY_PATH nor
# PKG_CONFIG_PATH set. So the README and the test cannot drift: the test reads the README.
#
#   c       install-c.sh into ~/opt/dlport (outside the loader's path), then app.c built through
#           pkg-config and through CMake; each program must start and print its lines.
#   python  `pip install ./python` into a fresh venv (CPython 3.9+ from PATH, maturin from
#           PyPI), then python/README.md's first example (NumPy, installed into the venv).
#
# Not here: the Rust block (its program is a doc test of dlport-bench, run by `cargo test`; its
# git dependency needs github.com, which the machines that run the tests cannot reach) and the
# npm block (www/tests/vite-app.test.mjs packs the tarball and installs it into a fresh Vite
# app, as the README says).
#
# Builds go to target/getting-started/ (CARGO_TARGET_DIR; the clone's path stays the same, so
# a warm run rebuilds nothing that did not change). Cold, on 2 cores: c about 1.5 minutes,
# python about 3 minutes; warm: seconds each.
# Usage: scripts/getting-started.sh {c|python}...
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ $# -gt 0 ] || set -- c python
for block in "$@"; do
  case "$block" in
    c | python) ;;
    *) echo "usage: $0 {c|python}... (got '$block')" >&2; exit 2 ;;
  esac
done

log() { printf '[getting-started] %s\n' "$*"; }
state=$repo/target/getting-started
clone=$state/dlport
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# cargo and rustup stay where they are installed; everything else of the user is new.
export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo} RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export CARGO_TARGET_DIR=$state/target
unset LD_LIBRARY_PATH PKG_CONFIG_PATH

# A clone: the files git tracks or would track (not ignored), as they are in the working tree,
# so what is not yet committed is tested too; mtimes kept, so cargo's fingerprints of an
# unchanged file stay fresh. A file removed while this runs (a fuzzer's corpus) is left out.
rm -rf "$clone"
mkdir -p "$clone"
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - --ignore-failed-read --warning=no-failed-read -cf - | tar -xf - -C "$clone"
log "clone: $(find "$clone" -type f | wc -l) files (tracked or trackable) copied into $clone"

# Extracts block NAME of a Markdown file into DIR/script.sh and DIR/files/.
extract() {
  python3 - "$1" "$2" "$3" <<'PY'
import os, re, sys
path, name, out = sys.argv[1:]
text = open(path, encoding="utf-8").read()
m = re.search(r"<!-- getting-started:%s begin -->\n(.*?)<!-- getting-started:%s end -->" % (name, name), text, re.S)
if not m:
    sys.exit(f"{path}: no <!-- getting-started:{name} begin/end --> block")
body = m.group(1)
os.makedirs(os.path.join(out, "files"), exist_ok=True)
script, pending, files = [], None, []
for fm in re.finditer(r"(<!-- file: (\S+) -->\n)?```(\w*)\n(.*?)```", body, re.S):
    _, fname, lang, code = fm.groups()
    if fname:
        open(os.path.join(out, "files", fname), "w", encoding="utf-8").write(code)
        files.append(fname)
    elif lang == "sh":
        script.append(code)
    else:
        sys.exit(f"{path}: a ```{lang} block in getting-started:{name} is neither sh nor a file")
open(os.path.join(out, "script.sh"), "w", encoding="utf-8").write("".join(script))
print(" ".join(files))
PY
}

# Runs block NAME of FILE (relative to the clone) in a fresh $HOME; its output in $work/NAME.log.
run_block() {
  local name=$1 file=$2 home=$work/home-$1
  mkdir -p "$home/my-app"
  local files
  files=$(extract "$clone/$file" "$name" "$work/$name")
  [ -s "$work/$name/script.sh" ] || { log "FAILED: $file: getting-started:$name has no sh block"; exit 1; }
  [ -z "$files" ] || cp "$work/$name/files/"* "$home/my-app/"
  log "$name: running the sh blocks of $file as written (files in ~/my-app: ${files:-none}):"
  sed 's/^/    /' "$work/$name/script.sh"
  local start=$SECONDS
  # PYTHONUNBUFFERED: pip's lines appear as they would on a terminal, not at its end.
  (cd "$clone" && HOME=$home PYTHONUNBUFFERED=1 bash -euo pipefail "$work/$name/script.sh") 2>&1 \
    | tee "$work/$name.log" \
    | sed "s/^/  [$name] /"
  log "$name: done in $((SECONDS - start)) s"
}

expect_lines() { # NAME COUNT PATTERN: PATTERN (an extended regex) appears COUNT times in the log.
  local n
  n=$(grep -cE "$3" "$work/$1.log" || true)
  [ "$n" -eq "$2" ] || { log "FAILED: $1: '$3' printed $n times, expected $2"; exit 1; }
}

for block in "$@"; do
  case "$block" in
    c)
      run_block c README.md
      # Both programs (pkg-config, CMake) started and ran to the end.
      expect_lines c 2 '^dlport [0-9.]+: \{'
      expect_lines c 2 '^data: released once$'
      expect_lines c 2 '^refused: shape\[1\] = -3 is negative'
      log "c: the README's pkg-config and CMake builds start from a prefix outside the loader's path"
      ;;
    python)
      # The README asks for CPython 3.9+ with pip: a fresh venv of the python3 on PATH.
      python3 -m venv "$work/venv"
      export PATH=$work/venv/bin:$PATH
      "$work/venv/bin/python" -m pip install --quiet --upgrade pip
      run_block python README.md
      python -m pip install --quiet numpy
      extract "$clone/python/README.md" python-example "$work/py" >/dev/null
      log "python: python/README.md's first example"
      (cd "$work" && python "$work/py/files/example.py") | tee "$work/py.log" | sed 's/^/  [python] /'
      grep -qx 'dlport.Tensor(shape=(2, 3), dtype=float32, device=cpu)' "$work/py.log" \
        || { log "FAILED: python: the example did not print its tensor"; exit 1; }
      log "python: pip install ./python built and installed the package; the example ran"
      ;;
  esac
done
