# shellcheck shell=bash
# scripts/test.sh's background jobs, sourced by it (it sets run_tmp, a directory for their logs).
# Builds and downloads that a late step needs start at the end of the install step in the
# background at the lowest priority, so that they take the cycles (and the network time) that
# downloads, emulated and single-threaded steps (Miri's interpreter, pytest, valgrind, the
# browsers) leave idle; the step that needs one waits for it (`await_background`), at normal
# priority from then on. Each runs only when a step that needs it was asked for; a step run alone
# starts its own and waits at once. What each buys is in BENCHMARKS.md ("The test command's
# background builds").
declare -A bg_pid=() bg_start=()
background() { # $1: the job's name (its log: $run_tmp/NAME.log); the rest: its command
  local name=$1; shift
  echo "[$name] started in the background (lowest priority): $*"
  bg_start[$name]=$SECONDS
  # A session of its own (so that its whole process group can be reniced or killed) is an
  # autogroup of its own where the kernel has autogroups, and an autogroup shares the CPU with
  # the others whatever its processes' nice values: the group's own nice goes to 19 too.
  setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' _ "$@" \
    >"$run_tmp/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
# $1: the job's name; $2 (optional): a file the job writes when the part a step needs is done.
# Prints the job's log (once, at its end) and fails when the job failed.
await_background() {
  local name=$1 ready=${2:-} pid=${bg_pid[$1]:-} rc=0 waited=$SECONDS
  [ -n "$pid" ] || return 0
  if [ -n "$ready" ] && [ -e "$ready" ]; then return 0; fi
  if kill -0 "$pid" 2>/dev/null; then
    echo "[$name] waiting for it (started $((SECONDS - bg_start[$name])) s ago); normal priority from now on"
    renice -n 0 -g "$pid" >/dev/null 2>&1 || true
    echo 0 >"/proc/$pid/autogroup" 2>/dev/null || true
  fi
  if [ -n "$ready" ]; then
    while [ ! -e "$ready" ] && kill -0 "$pid" 2>/dev/null; do sleep 2; done
    if [ -e "$ready" ]; then
      echo "[$name] its first part is done, $((SECONDS - bg_start[$name])) s after its start; waited $((SECONDS - waited)) s"
      return 0
    fi
  fi
  wait "$pid" || rc=$?
  unset "bg_pid[$name]"
  sed "s/^/[$name] /" "$run_tmp/$name.log"
  echo "[$name] the background job ended with $rc, $((SECONDS - bg_start[$name])) s after its start; waited $((SECONDS - waited)) s"
  [ "$rc" = 0 ] || { echo "[$name] FAILED: the background job (its log is above)"; exit 1; }
}

