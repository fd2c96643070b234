#!/usr/bin/env bash
# The flake hunt: runs a stage's test binaries many times at once, so that each run has parallel
# copies of itself and of the other binaries beside it as load, and records every failure with
# the binary, the failing tests and the run's output. A test that depends on timing or on its
# neighbours fails here long before it fails in CI. CI does not run it (FUZZING.md records the
# last hunt).
#
# Usage: scripts/flake-hunt.sh STAGE N
#   rust     every test binary of `cargo test --workspace --all-features` (the libraries' unit
#            tests and every integration test; built once, with the test command's env), N runs
#            each; doc tests are not binaries and are not hunted
#   python   every file of python/tests with the installed package in .venv
#            (scripts/python-build.sh first), N pytest runs each
#   c        the C test programs of scripts/c-test.sh (C and C++, against libdlport.so.0) and the
#            installed examples of scripts/c-examples.sh (pkg-config and CMake, shared and static)
#   plugins  the checked programs of scripts/plugin-test.sh (the bad plugins and the OpenCL
#            example and guarantees, plain and under ASan + UBSan, on the PoCL kernel cache the
#            step filled; the Python OpenCL tests) and of scripts/pjrt-test.sh (the C round trip
#            under ASan and the Python tests, per PJRT plugin build, and dlport.jax's tests under
#            the next JAX release, scripts/jax-matrix.sh); their Rust tests are rust's
#   peers    the peers step's files: tests/python (the ctypes tests), python/examples/seed.py and
#            value.py in .venv; python/tests/test_torch.py and each file of python/tests/engines
#            (Ray, Dask) in the peers' venv (scripts/peers-env.sh); the arrow step's test binaries
#            with pyarrow (scripts/arrow-test.sh, which installs it into .venv); the upstream
#            cases (tests/upstream) on both of the upstream step's stacks (scripts/peers-env.sh,
#            scripts/upstream-env.sh)
#   wasm     every test binary of dlport-wasm for wasm32 under wasm-bindgen-test-runner (node or
#            headless Chromium, as each binary is configured; the browser step's env), and each
#            file of www/tests under `node --test` when www/dist is built (scripts/www-build.sh)
#   hardening  the stress test (dlport-capi's tests/stress.rs, release build); the checked programs
#            of scripts/sanitize.sh (every C program under valgrind, the LeakSanitizer runs and
#            both negative controls, which must be reported every time) and of
#            scripts/fuzz-smoke.sh (each fuzz target on its committed corpus; the recording run
#            fuzzes DLPORT_FUZZ_SECONDS, default 2 here, per target)
# c, plugins and hardening run their steps' scripts once first: these run their programs through
# scripts/checked-run.sh, which records each line that passes (DLPORT_HUNT_LIST), and the hunt
# reruns exactly those lines, checks included (exit status and the line each must print).
# Environment:
#   FLAKE_HUNT_JOBS     runs at once (default 3 x the cores): the load
#   FLAKE_HUNT_ONLY     an extended regex: hunt only the binaries (files) whose name matches
#   FLAKE_HUNT_BUDGET   seconds for the runs, from the end of the build (default 3600); runs not
#                       started by then are counted as not run, and the summary says so
#   FLAKE_HUNT_TIMEOUT  seconds one run may take (default 600); a run past it fails
#   FLAKE_HUNT_DIR      where the logs go (default target/flake-hunt/STAGE)
# Tests that need a machine's hardware or a peer (CUDA, PoCL, a PJRT plugin: DLPORT_PJRT_PLUGIN,
# torch) skip themselves as they do in the test command; they pass here without running (a
# Python file that skips itself whole is named in the summary).
# The last line reads "flake-hunt: N passed, N failed" (", N not run" when the budget ran out);
# the exit status is 1 when a run failed or did not run, or a recorded step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
self="$PWD/scripts/flake-hunt.sh"

if [ "${1:-}" = "--one" ]; then
  # One run (called by xargs below): --one DIR DEADLINE TIMEOUT INDEX, the run's line of DIR/plan.
  dir=$2 deadline=$3 limit=$4 index=$5
  unset DLPORT_HUNT_LIST
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "$index" >>"$dir/notrun"
    exit 0
  fi
  IFS=$'\t' read -r _ _ workdir command < <(awk -F'\t' -v i="$index" '$1 == i' "$dir/plan")
  IFS=$'\x1f' read -r -a words <<<"$command"
  log="$dir/runs/$index.log"
  status=0
  (cd "$workdir" && timeout --kill-after=10 "$limit" "${words[@]}") >"$log" 2>&1 </dev/null || status=$?
  # pytest's 5: nothing collected, a test file that skipped itself whole (a peer not installed).
  if [ "$status" -eq 5 ] && [[ $'\x1f'$command$'\x1f' == *$'\x1f'pytest$'\x1f'* ]]; then
    echo "$index" >>"$dir/skipped"
    status=0
  fi
  if [ "$status" -eq 0 ]; then
    echo "$index" >>"$dir/passed"
    rm -f "$log"
  else
    echo "$index $status" >>"$dir/failed"
  fi
  exit 0
fi

stage=${1:-}
runs=${2:-}
case "$runs" in '' | *[!0-9]*) runs=0 ;; esac
if [ -z "$stage" ] || [ "$runs" -lt 1 ]; then
  echo "usage: $0 STAGE N   (STAGE: rust, python, c, plugins, peers, wasm or hardening; N: runs per binary, at least 1)" >&2
  exit 2
fi
export CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_INCREMENTAL=0
cores=$(nproc)
jobs=${FLAKE_HUNT_JOBS:-$((3 * cores))}
budget=${FLAKE_HUNT_BUDGET:-3600}
limit=${FLAKE_HUNT_TIMEOUT:-600}
only=${FLAKE_HUNT_ONLY:-}
dir=${FLAKE_HUNT_DIR:-target/flake-hunt/$stage}
rm -rf "$dir"
mkdir -p "$dir/runs"
dir=$(cd "$dir" && pwd)
: >"$dir/passed"
: >"$dir/failed"
: >"$dir/notrun"
: >"$dir/skipped"
# What each binary is: one line per binary, "NAME<TAB>WORKDIR<TAB>COMMAND" (the command's
# words separated by the unit separator \x1f).
targets="$dir/targets"

US=$'\x1f'
# cargo_targets BUILD.JSON NAME_PREFIX [WORD...] [-- ARG...]: the test binaries of cargo's JSON
# messages as lines of $targets, each run as WORD... EXECUTABLE ARG... (WORD: an env, a runner) in
# its package's directory.
cargo_targets() {
  local words=() args=() seen_dashes=""
  for w in "${@:3}"; do
    if [ -z "$seen_dashes" ] && [ "$w" = -- ]; then seen_dashes=yes
    elif [ -n "$seen_dashes" ]; then args+=("$w")
    else words+=("$w"); fi
  done
  python3 - "$1" "$2" "${#words[@]}" "${words[@]}" "${args[@]}" >>"$targets" <<'EOF'
import json, os, sys
nwords = int(sys.argv[3])
words, args = sys.argv[4:4 + nwords], sys.argv[4 + nwords:]
seen = {}
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    kind = m["target"]["kind"][0]
    pid = m["package_id"]  # "path+file:///…#dlport-core@0.1.0" or "dlport-core 0.1.0 (…)"
    crate = pid.split("#", 1)[1].split("@")[0] if "#" in pid else pid.split(" ")[0]
    name = f"{crate}:{m['target']['name']}" if kind in ("test", "bench") else f"{crate}:{kind}"
    seen[sys.argv[2] + name] = (os.path.dirname(m["manifest_path"]), m["executable"])
for name, (workdir, exe) in sorted(seen.items()):
    print(f"{name}\t{workdir}\t" + "\x1f".join(words + [exe] + args))
EOF
}
# record SCRIPT: runs a test step's script once, its checked programs that pass recorded as lines
# of $targets by scripts/checked-run.sh; its temporary files (the programs, PoCL's kernel cache)
# stay in $dir/tmp for the runs. A step that fails is named, with what failed in it, and the
# hunt goes on with the programs that passed (a test that fails every run is no flake to hunt).
record() {
  local log rc=0
  log=$dir/$(basename "$1" .sh).log
  echo "[flake-hunt] running $1 once, recording its checked programs (log: $log)"
  mkdir -p "$dir/tmp"
  DLPORT_HUNT_LIST=$targets TMPDIR=$dir/tmp bash "$1" >"$log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "[flake-hunt] NOTE: $1 failed (exit $rc; the log: $log); not hunted, having failed there:" \
      "$(tr '\n' ' ' <"$targets.failed" 2>/dev/null || true)(and any part of the step outside scripts/checked-run.sh)"
    recorded_failures=yes
  fi
}
recorded_failures=""
# pytest_targets PREFIX PYTHON WORKDIR FILE...: a line per test file, run as the test command does.
pytest_targets() {
  local prefix=$1 py=$2 workdir=$3 f
  shift 3
  for f in "$@"; do
    printf '%s\t%s\t%s\n' "$prefix$(basename "$f" .py)" "$workdir" \
      "$py${US}-m${US}pytest${US}-q${US}-p${US}no:cacheprovider${US}$f"
  done >>"$targets"
}
: >"$targets"

case "$stage" in
  rust)
    echo "[flake-hunt] building the test binaries (cargo test --workspace --all-features --no-run)"
    cargo test --workspace --all-features --locked --no-run --message-format=json-render-diagnostics \
      >"$dir/build.json"
    cargo_targets "$dir/build.json" ""
    ;;
  python)
    py=.venv/bin/python
    [ -x "$py" ] || { echo "[flake-hunt] no $py: run scripts/python-env.sh and scripts/python-build.sh first" >&2; exit 1; }
    pytest_targets python: "$PWD/$py" "$PWD" python/tests/test_*.py
    ;;
  c)
    record scripts/c-test.sh
    record scripts/c-examples.sh
    ;;
  plugins)
    record scripts/plugin-test.sh
    record scripts/pjrt-test.sh
    ;;
  peers)
    py=$PWD/.venv/bin/python
    [ -x "$py" ] || { echo "[flake-hunt] no $py: run scripts/python-env.sh and scripts/python-build.sh first" >&2; exit 1; }
    # The peers step: tests/python's files from that directory, the two examples, in .venv.
    (cd tests/python && pytest_targets peers:ctypes: "$py" "$PWD" test_*.py)
    for f in seed value; do
      printf '%s\t%s\t%s\n' "peers:$f.py" "$PWD" "$py${US}python/examples/$f.py"
    done >>"$targets"
    # The torch and engines steps: the peers' venv.
    venv=$(bash scripts/peers-env.sh) || { echo "[flake-hunt] no peers' venv (scripts/peers-env.sh, above)" >&2; exit 1; }
    pytest_targets peers: "$venv/bin/python" "$PWD" python/tests/test_torch.py python/tests/engines/test_*.py
    # The arrow step: pyarrow into .venv (its script, which then runs the tests once), then its
    # test binaries, with the arguments and env it gives them.
    echo "[flake-hunt] the arrow step once (scripts/arrow-test.sh; log: $dir/arrow-test.log)"
    bash scripts/arrow-test.sh >"$dir/arrow-test.log" 2>&1 || recorded_failures=yes
    cargo test -p dlport-native --features arrow --test arrow --test arrow_malformed --locked --no-run \
      --message-format=json-render-diagnostics >"$dir/build.json"
    cargo_targets "$dir/build.json" arrow: env DLPORT_PYTHON="$py" -- --include-ignored --skip write_fuzz_seeds
    # The upstream step's cases on both stacks (its script merges their results; each run here
    # asserts its own cases).
    upstream=$(bash scripts/upstream-env.sh) || { echo "[flake-hunt] no JAX 0.10.2 stack (scripts/upstream-env.sh, above)" >&2; exit 1; }
    plugin=${XDG_CACHE_HOME:-$HOME/.cache}/dlport/pjrt/xla-cpu-pjrt-0.0.1
    for stack in "peers:$venv" "jax-py311:$upstream"; do
      env_plugin=""  # as the step: the XLA CPU plugin on the JAX 0.10.2 stack, when cached
      [ "${stack%%:*}" != jax-py311 ] || [ ! -d "$plugin/xla_plugins" ] || env_plugin="DLPORT_XLA_CPU_PJRT_DIR=$plugin$US"
      for f in tests/upstream/test_*.py; do
        printf '%s\t%s\t%s\n' "upstream:${stack%%:*}:$(basename "$f" .py)" "$PWD/tests/upstream" \
          "env$US$env_plugin${stack#*:}/bin/python${US}-m${US}pytest${US}-q${US}-p${US}no:cacheprovider${US}$(basename "$f")"
      done
    done >>"$targets"
    ;;
  wasm)
    # The browser step's runner and env for every binary; each runs where it is configured to
    # (node, or headless Chromium through ChromeDriver).
    runner=(env CHROMEDRIVER=/usr/bin/chromedriver WASM_BINDGEN_TEST_TIMEOUT=300 wasm-bindgen-test-runner)
    echo "[flake-hunt] building the test binaries (cargo test -p dlport-wasm --target wasm32-unknown-unknown --no-run)"
    cargo test -p dlport-wasm --target wasm32-unknown-unknown --locked --no-run \
      --message-format=json-render-diagnostics >"$dir/build.json"
    cargo_targets "$dir/build.json" "" "${runner[@]}"
    if [ -d www/dist ] && [ -d www/node_modules ]; then
      for f in www/tests/*.test.mjs; do
        printf '%s\t%s\t%s\n' "www:$(basename "$f" .test.mjs)" "$PWD/www" "node${US}--test${US}tests/$(basename "$f")"
      done >>"$targets"
    else
      echo "[flake-hunt] no www/dist or www/node_modules: www/tests not hunted (scripts/www-build.sh builds them)"
    fi
    ;;
  hardening)
    echo "[flake-hunt] building the stress test (cargo test --release -p dlport-capi --test stress --no-run)"
    cargo test --release -p dlport-capi --test stress --locked --no-run \
      --message-format=json-render-diagnostics >"$dir/build.json"
    cargo_targets "$dir/build.json" release:
    export DLPORT_FUZZ_SECONDS=${DLPORT_FUZZ_SECONDS:-2}
    record scripts/sanitize.sh
    record scripts/fuzz-smoke.sh
    ;;
  *)
    echo "[flake-hunt] unknown stage '$stage' (rust, python, c, plugins, peers, wasm or hardening)" >&2
    exit 2
    ;;
esac
if [ -n "$only" ]; then
  grep -E "^[^	]*($only)" "$targets" >"$targets.only" || true
  mv "$targets.only" "$targets"
fi
count=$(wc -l <"$targets")
[ "$count" -gt 0 ] || { echo "[flake-hunt] no binary matches '$only'" >&2; exit 1; }

# The runs, shuffled so that each has other binaries and copies of itself beside it, one list
# entry a line: "INDEX<TAB>NAME<TAB>WORKDIR<TAB>COMMAND". INDEX names its log.
python3 - "$targets" "$runs" "$dir/plan" <<'EOF'
import random, sys
targets = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
plan = [(t, r) for t in targets for r in range(int(sys.argv[2]))]
random.shuffle(plan)
with open(sys.argv[3], "w") as out:
    for i, (t, r) in enumerate(plan):
        out.write(f"{i}\t{t}\n")
EOF
total=$((count * runs))
deadline=$(($(date +%s) + budget))
echo "[flake-hunt] $stage: $count binaries x $runs runs = $total runs, $jobs at once on $cores cores," \
  "at most ${budget}s in all and ${limit}s a run; logs in $dir"
start=$(date +%s)
cut -f1 "$dir/plan" | xargs -P "$jobs" -n 1 bash "$self" --one "$dir" "$deadline" "$limit"
elapsed=$(($(date +%s) - start))

passed=$(wc -l <"$dir/passed")
failed=$(wc -l <"$dir/failed")
notrun=$(wc -l <"$dir/notrun")
# Each failure: the binary, its exit status, the failing tests and the log.
summary="$dir/failures.txt"
: >"$summary"
if [ "$failed" -gt 0 ]; then
  while read -r index status; do
    name=$(awk -F'\t' -v i="$index" '$1 == i { print $2 }' "$dir/plan")
    log="$dir/runs/$index.log"
    tests=$(grep -E '^test .* \.\.\. FAILED|^FAILED |^---- .* stdout ----' "$log" | sort -u | tr '\n' ' ' || true)
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
      tests="(timed out after ${limit}s) $tests"
    fi
    echo "$name (run $index, exit $status): ${tests:-see the log} -> $log" >>"$summary"
  done <"$dir/failed"
  echo "[flake-hunt] failures:"
  sort "$summary" | sed 's/^/  /'
  echo "[flake-hunt] failed runs per binary (of $runs each):"
  cut -d' ' -f1 "$summary" | sort | uniq -c | sort -rn | sed 's/^ */  /'
fi
if [ -s "$dir/skipped" ]; then
  echo "[flake-hunt] passed by skipping themselves whole (pytest: nothing collected):" \
    "$(awk -F'\t' 'NR == FNR { s[$1] = 1; next } $1 in s { print $2 }' "$dir/skipped" "$dir/plan" | sort -u | tr '\n' ' ')"
fi
echo "[flake-hunt] $stage: $total runs planned, ${elapsed}s, load $(cut -d' ' -f1-3 /proc/loadavg)"
line="flake-hunt: $passed passed, $failed failed"
[ "$notrun" -gt 0 ] && line="$line, $notrun not run (the ${budget}s budget ran out)"
echo "$line"
[ -z "$recorded_failures" ] || echo "[flake-hunt] NOTE: a step failed before the hunt (above); its failed programs were not hunted"
[ "$failed" -eq 0 ] && [ "$notrun" -eq 0 ] && [ -z "$recorded_failures" ]
