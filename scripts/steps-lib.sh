# shellcheck shell=bash
# scripts/test.sh's steps, sourced by it: each step's === line, the table of step times that
# closes the run (on failure too), and after a failure the failed step's last lines again. It
# uses test.sh's args, stages, stage_now, run_tmp, run_log and bg_pid.
# Each step prints the minutes the run has taken so far and the disk left, so that a CI log shows
# where a fresh machine's time and disk go (the budget is 45 minutes cold on 2 cores); every step's
# time is also kept for the table at the end.
step_names=() step_secs=() step_now="" step_start=0 stage_now=install
close_step() {
  [ -n "$step_now" ] || return 0
  step_names+=("$step_now"); step_secs+=($((SECONDS - step_start))); step_now=""
}
step() { # $1: the step's short name (the table's row); the rest: what it checks
  close_step
  step_now=$1; step_start=$SECONDS; shift
  step_line=$(wc -l <"$run_log")
  printf '\n=== [%d:%02d, %s free] %s: %s\n' $((SECONDS / 60)) $((SECONDS % 60)) \
    "$(df -h --output=avail . | tail -n1 | tr -d ' ')" "$step_now" "$*"
}
table() {
  local rc=$? i failed=""
  [ "$rc" = 0 ] || failed=$step_now
  close_step
  table_header=$(printf '%-28s %8s' "step (${args[*]})" "min:sec")
  printf '\n%s\n' "$table_header"
  for i in "${!step_names[@]}"; do
    printf '%-28s %5d:%02d%s\n' "${step_names[$i]}" $((step_secs[i] / 60)) $((step_secs[i] % 60)) \
      "$([ "${step_names[$i]}" = "$failed" ] && [ "$i" = $((${#step_names[@]} - 1)) ] && echo '  FAILED')"
  done
  printf '%-28s %5d:%02d\n' total $((SECONDS / 60)) $((SECONDS % 60))
  local job
  for job in "${bg_pid[@]}"; do kill -- "-$job" 2>/dev/null || true; done
  rm -rf "$run_tmp"
  if [ "$rc" = 0 ]; then
    echo "all checks passed (${args[*]})"
    return 0
  fi
  failure_tail "${failed:-install}"
  if [ "${failed:-install}" = install ]; then
    echo "FAILED in step install (exit status $rc); rerun it alone: scripts/install-deps.sh ${stages[*]}"
  else
    echo "FAILED in step $failed (exit status $rc); rerun this step alone: scripts/test.sh $stage_now:$failed"
  fi
}
# The failed step's last lines again, after the table, with the disk and memory left: a CI log is
# often read from its tail alone, and a step's error sits above the table. The whole run's output
# is in $run_log.
failure_tail() {
  local mark="=== end of the run's output (scripts/test.sh $$)" i
  echo "$mark"
  # tee writes the log a moment after the shell prints: wait until the mark is in it.
  for i in $(seq 50); do grep -qxF "$mark" "$run_log" && break; sleep 0.1; done
  echo
  # The step's lines: from its === line to the table's header.
  local table_line lines
  table_line=$(grep -nxF "$table_header" "$run_log" | tail -n1 | cut -d: -f1)
  lines=$(sed -n "$((step_line + 1)),$((${table_line:-2} - 2))p" "$run_log")
  echo "--- the last lines of step $1 (the whole log: $run_log) ---"
  tail -n 60 <<<"$lines"
  echo "--- end of step $1's lines ---"
  echo "disk free here: $(df -h --output=avail . | tail -n1 | tr -d ' '); memory available: $(awk '/^MemAvailable/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  if grep -qiE 'No space left on device|os error 28|ENOSPC' <<<"$lines"; then
    echo "the disk filled up: a whole run from cold caches needs about 25 GB free (README, \"The two commands\"); free some and rerun"
  fi
}
