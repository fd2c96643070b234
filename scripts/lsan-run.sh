#!/usr/bin/env bash
# One program under LeakSanitizer, judged by dlport's leaks alone: runs COMMAND with liblsan
# preloaded (PYTHONMALLOC=malloc, so that Python's objects are malloc's blocks; the vendor
# runtimes' own leaks suppressed by scripts/lsan.supp, which says why), its reports in a
# directory of their own, and then reads them. Python, NumPy and JAX keep allocations at exit
# that are not ours, so LeakSanitizer's exit status is not the verdict; a leak report block is
# dlport's when a frame of KIND's code is in it:
#   capi     libdlport.so (dlport-capi, through dlport-native and dlport-core)
#   package  the Python package's extension, _native.abi3.so; its module initialisation
#            allocates the type objects and constants once for the interpreter's lifetime
#            (__pyo3_module_exec), which is not a leak. Its leak stacks come from the slow
#            unwinder (the extension is built without frame pointers).
# EXPECT "clean" passes when no block is dlport's; "leaky" (a negative control, which leaks on
# purpose) passes when one is. COMMAND must exit 0 as well.
# scripts/sanitize.sh runs each of its LeakSanitizer programs through this script and
# scripts/checked-run.sh, which records them for scripts/flake-hunt.sh hardening.
# Usage: scripts/lsan-run.sh capi|package clean|leaky COMMAND...
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 capi|package clean|leaky COMMAND..." >&2; exit 2; }
kind=$1 expect=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
lsan=/usr/lib/x86_64-linux-gnu/liblsan.so.0
[ -e "$lsan" ] || { echo "[lsan-run] no $lsan (scripts/install-deps.sh hardening installs liblsan0)" >&2; exit 1; }
options="suppressions=$here/lsan.supp:exitcode=0:malloc_context_size=40"
case "$kind" in
  capi) frames='libdlport\.so|dlport::|dlport_native::|dlport_core::' ;;
  package) frames='_native\.abi3\.so|_native::|dlport_core::|dlport_native::'
    options="$options:fast_unwind_on_malloc=0" ;;
  *) echo "[lsan-run] KIND is capi or package, not '$kind'" >&2; exit 2 ;;
esac
case "$expect" in
  clean | leaky) ;;
  *) echo "[lsan-run] EXPECT is clean or leaky, not '$expect'" >&2; exit 2 ;;
esac
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
PYTHONMALLOC=malloc LSAN_OPTIONS="$options:log_path=$reports/report" LD_PRELOAD="$lsan" "$@"
python3 - "$reports" "$expect" "$frames" <<'PY'
import pathlib, re, sys
reports, expect, frames = pathlib.Path(sys.argv[1]), sys.argv[2], re.compile(sys.argv[3])
blocks = []
for f in sorted(reports.glob("report.*")):
    blocks += re.split(r"\n\s*\n", f.read_text(errors="replace"))
leaks = [b for b in blocks if re.search(r"(Direct|Indirect) leak", b)]
ours = [b for b in leaks if frames.search(b) and "__pyo3_module_exec" not in b]
print(f"[lsan-run] {len(leaks)} leak report(s), {len(ours)} through dlport ({expect} expected)")
if expect == "clean" and ours:
    print("\n\n".join(ours[:3]))
    sys.exit("[lsan-run] FAILED: LeakSanitizer found leaks through dlport (above)")
if expect == "leaky" and not ours:
    sys.exit("[lsan-run] FAILED: the leak this negative control makes on purpose was not reported")
PY
