#!/usr/bin/env bash
# The fuzz smoke run (scripts/test.sh's hardening:fuzz step). First every fuzz target runs each
# input of its committed corpus once (libFuzzer's -runs=0), through scripts/checked-run.sh, which
# records these runs for scripts/flake-hunt.sh hardening. Then every target fuzzes for
# $DLPORT_FUZZ_SECONDS (default 20) seconds, one libFuzzer process per core at a time, each on a
# copy of its corpus (fuzz/corpus/TARGET stays as committed). Builds the targets first (a no-op
# when scripts/test.sh's background build has made them). A failing target's whole log is printed
# with the command that reproduces it. Needs nightly and cargo-fuzz (scripts/install-deps.sh
# hardening).
set -euo pipefail
cd "$(dirname "$0")/.."
DLPORT_FUZZ_SECONDS=${DLPORT_FUZZ_SECONDS:-20}
targets=(validate c_abi roundtrip convert parse compact share_descriptor arrow_ipc pickle_rebuild buffer_bytes)
cargo +nightly fuzz build
fuzz_tmp=$(mktemp -d)
trap 'rm -rf "$fuzz_tmp"' EXIT
# libFuzzer's limits per target: arrow_ipc runs with dlport's allocation limit at 64 MiB, so one
# allocation past 128 MiB, or 1 GiB resident, is a crash.
limits=()
set_limits() { limits=(); [ "$1" != arrow_ipc ] || limits=(-malloc_limit_mb=128 -rss_limit_mb=1024); }
bin=$PWD/fuzz/target/x86_64-unknown-linux-gnu/release
for t in "${targets[@]}"; do
  set_limits "$t"
  log=$fuzz_tmp/corpus-$t.log
  if ! bash scripts/checked-run.sh "fuzz:corpus:$t" '^Done [0-9]+ runs' \
    "$bin/$t" -runs=0 "${limits[@]}" "$PWD/fuzz/corpus/$t" >"$log" 2>&1; then
    cat "$log"
    echo "[fuzz] FAILED: $t on its committed corpus (above)"
    exit 1
  fi
  tail -n 2 "$log"
done
# One libFuzzer process per target, as many at once as there are cores (each is one thread);
# a target's output goes to its log, printed in full when it fails.
fuzz_one() {
  set_limits "$1"
  cargo +nightly fuzz run "$1" "$fuzz_tmp/$1" -- -max_total_time="$DLPORT_FUZZ_SECONDS" "${limits[@]}" \
    -print_final_stats=1 >"$fuzz_tmp/$1.log" 2>&1
}
fuzz_wait() { # waits for the running targets in start order; prints each one's result
  local i t failed=0
  for i in "${!fuzz_pids[@]}"; do
    t=${fuzz_names[$i]}
    if wait "${fuzz_pids[$i]}"; then
      grep -E '^(stat::number_of_executed_units|Done)' "$fuzz_tmp/$t.log" | sed "s/^/$t: /"
    else
      sed "s/^/$t: /" "$fuzz_tmp/$t.log"
      echo "[fuzz] FAILED: $t (its input is in the log above; reproduce with cargo +nightly fuzz run $t FILE)"
      failed=1
    fi
  done
  fuzz_pids=() fuzz_names=()
  return "$failed"
}
fuzz_pids=() fuzz_names=()
for t in "${targets[@]}"; do
  cp -r "fuzz/corpus/$t" "$fuzz_tmp/$t"
  fuzz_one "$t" &
  fuzz_pids+=("$!") fuzz_names+=("$t")
  [ "${#fuzz_pids[@]}" -lt "$(nproc)" ] || fuzz_wait
done
fuzz_wait
