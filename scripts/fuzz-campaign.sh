#!/usr/bin/env bash
# The local fuzz campaign recorded in FUZZING.md: every target for a fixed number of runs
# (130 M+ in total, 5 M+ each), two at a time, logs under target/fuzz-campaign/.
# Usage: scripts/fuzz-campaign.sh [scale]   (scale 1 = the recorded campaign; 0.01 = a smoke)
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-1}
out=target/fuzz-campaign
mkdir -p "$out"
cargo +nightly fuzz build >/dev/null
run() {
  local t=$1 n limits=()
  n=$(python3 -c "print(int($2 * $scale))")
  mkdir -p "fuzz/corpus/$t"
  # arrow_ipc sets dlport's allocation limit to 64 MiB: one allocation past 128 MiB, or 1 GiB
  # resident, is a crash.
  [ "$t" = arrow_ipc ] && limits=(-malloc_limit_mb=128 -rss_limit_mb=1024)
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -runs="$n" "${limits[@]}" -print_final_stats=1 >"$out/$t.log" 2>&1
  echo "$t: $(grep -E '^stat::number_of_executed_units' "$out/$t.log") $(grep -E 'DONE|Done' "$out/$t.log" | tail -1)"
}
run validate 25000000 & run c_abi 15000000 & wait
run roundtrip 20000000 & run convert 20000000 & wait
run parse 25000000 & run compact 10000000 & wait
run share_descriptor 5000000 & run arrow_ipc 10000000 & wait
run pickle_rebuild 5000000
