#!/usr/bin/env bash
# C plugins (issue #31): the OpenCL plugin on PoCL and plugins that are wrong on purpose.
#  1. Debian's OpenCL (pocl-opencl-icd, ocl-icd-opencl-dev, opencl-headers; idempotent).
#  2. The Rust tests of the plugin interface (native/tests/plugin.rs) and of its C entries
#     (capi/tests/plugin.rs).
#  3. The bad plugins (plugins/tests) under ASan + UBSan: errors name the plugin and the
#     callback or symbol; nothing leaks or is released twice.
#  4. The OpenCL plugin and plugins/opencl/example.c, first without sanitizers on PoCL's cold
#     kernel cache, then under ASan + UBSan on the cache that run filled: tensors both ways,
#     the same cl_mem out and back, every buffer released exactly once.
#  5. The Python tests (python/tests/test_plugin_opencl.py) when .venv exists (with the wheel
#     built by scripts/python-build.sh).
# Where PoCL cannot create a device (some sandboxes), steps 4 and 5 are SKIPPED with the reason
# printed, never passed silently. About a minute warm.
# The checked programs of 3 to 5 (not the planted-leak run, which must fail) run through
# scripts/checked-run.sh: scripts/flake-hunt.sh plugins runs this once with DLPORT_HUNT_LIST set,
# then reruns the recorded lines on the kernel cache this run filled (kept then, in the hunt's
# TMPDIR).
set -euo pipefail
cd "$(dirname "$0")/.."
here=scripts
if dpkg -s pocl-opencl-icd ocl-icd-opencl-dev opencl-headers >/dev/null 2>&1; then
  echo "[plugin] pocl-opencl-icd, ocl-icd-opencl-dev, opencl-headers: present"
else
  bash "$here/apt-install.sh" pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
fi

cargo test -q -p dlport-native --locked --test plugin
cargo test -q -p dlport-capi --locked --test plugin
cargo test -q -p dlport-native --locked --test plugin_guarantees
cargo test -q -p dlport-capi --locked --test plugin_guarantees
cargo build -q -p dlport-capi --locked
lib=${CARGO_TARGET_DIR:-target}/debug
ln -sfn libdlport.so "$lib/libdlport.so.0"
out=${CARGO_TARGET_DIR:-target}/plugins
mkdir -p "$out"
warn=(-std=c11 -Wall -Wextra -Werror -Icapi/include)
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
# ASan reports leaks at exit (LeakSanitizer); UBSan stops at the first error. The vendor
# runtimes' own leaks (PoCL, LLVM, the ICD loader) are suppressed by library name
# (scripts/lsan.supp says why); the planted-leak check below shows that ours still fail.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=1"
# PoCL's kernel cache starts empty on every run, as on a fresh machine: a warm cache from an
# earlier run can never hide a failure. PoCL compiles the plugin's kernels (with LLVM, on threads
# of its own) the first time a process uses them. LeakSanitizer cannot stop the threads of that
# compile at exit: its tracer dies with SIGSEGV on a cold cache, every time, and never on a warm
# one. So the compile runs in a process without ASan first (the plugin's example built without
# sanitizers, which runs the same kernels on the same device and must pass too), and the checked
# programs then run on the cache it filled: LeakSanitizer checks dlport and the plugin, never
# PoCL's compiler. A checked run that still compiled something is reported by name.
POCL_CACHE_DIR=$(mktemp -d)
export POCL_CACHE_DIR
[ -n "${DLPORT_HUNT_LIST:-}" ] || trap 'rm -rf "$POCL_CACHE_DIR"' EXIT
echo "[plugin] PoCL's kernel cache: $POCL_CACHE_DIR (empty: cold, as on a fresh machine)"
# The compiled kernels in PoCL's cache (a program's bitcode, one .so per kernel and work-group
# shape); PoCL's empty temporary files and access stamps are not compiles.
pocl_cache_files() { find "$POCL_CACHE_DIR" -type f \( -name '*.so' -o -name '*.bc' \) | sort; }
# Every checked program's environment, written out, so that the line scripts/checked-run.sh
# records for the flake hunt runs as it runs here.
run_env=(ASAN_OPTIONS="$ASAN_OPTIONS" UBSAN_OPTIONS="$UBSAN_OPTIONS" LSAN_OPTIONS="$LSAN_OPTIONS"
  POCL_CACHE_DIR="$POCL_CACHE_DIR" LD_LIBRARY_PATH="$lib")

for bad in missing_init wrong_version wrong_size init_fails failing null_view leaky; do
  flag=BAD_$(echo "$bad" | tr a-z A-Z)
  cc "${warn[@]}" "${san[@]}" -fPIC -shared -D"$flag" -DPLUGIN_NAME="\"bad_$bad\"" \
    plugins/tests/bad_plugin.c -o "$out/libbad_$bad.so"
done
cc "${warn[@]}" "${san[@]}" plugins/tests/test_bad_plugins.c -L"$lib" -ldlport -ldl -pthread \
  -o "$out/test_bad_plugins"
bash scripts/checked-run.sh plugins:test_bad_plugins '^bad plugins: [0-9]+ passed, 0 failed$' \
  env "${run_env[@]}" "$out/test_bad_plugins" "$out"

# The suppressions hide no leak of ours: a leak planted in a test plugin (libbad_leaky.so's
# view_create) and one in dlport's own allocation (a dlport_alloc tensor never freed) must both
# be reported, with scripts/lsan.supp in force, and fail the program. The slow unwinder gives the
# whole allocation stacks (the fast one loses frames of code built without frame pointers).
set +e
ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" LD_LIBRARY_PATH="$lib" \
  "$out/test_bad_plugins" "$out" leaky >"$out/planted_leaks.log" 2>&1
status=$?
set -e
if [ "$status" = 0 ] || ! grep -q 'planted leaks: made' "$out/planted_leaks.log" \
  || ! grep -q 'detected memory leaks' "$out/planted_leaks.log" \
  || ! grep -qE 'in view_create .*bad_plugin\.c' "$out/planted_leaks.log" \
  || ! grep -qE ' in dlport_alloc ' "$out/planted_leaks.log"; then
  cat "$out/planted_leaks.log"
  echo "[plugin] FAILED: the planted leaks (plugin's view_create, dlport_alloc's tensor) were not both reported with scripts/lsan.supp in force (exit status $status)"
  exit 1
fi
echo "[plugin] planted leaks reported with scripts/lsan.supp in force (exit status $status): $(grep -E '^SUMMARY' "$out/planted_leaks.log")"

bash plugins/opencl/build.sh "$out" "$lib"
# The cold compile, without sanitizers: the example and its checks on a cold kernel cache.
set +e
bash scripts/checked-run.sh plugins:example '^opencl example: [0-9]+ passed, 0 failed$' \
  env "${run_env[@]}" "$out/example" "$PWD/$out/libdlport_opencl.so" >"$out/example_cold.log" 2>&1
status=$?
set -e
if [ "$status" = 77 ]; then
  echo "[plugin] SKIPPED the OpenCL example and the Python OpenCL tests: $(grep SKIPPED "$out/example_cold.log")"
  exit 0
fi
if [ "$status" != 0 ]; then
  cat "$out/example_cold.log"
  echo "[plugin] FAILED: the OpenCL example without sanitizers, on a cold kernel cache, exited with $status"
  exit 1
fi
# The guarantees program (below, under ASan) runs its kernels here first too, on the same cache.
cc "${warn[@]}" -O2 -Wno-deprecated-declarations -Iplugins/opencl \
  plugins/tests/test_opencl_guarantees.c -L"$lib" -ldlport -ldl -pthread \
  -o "$out/test_opencl_guarantees_plain"
bash scripts/checked-run.sh plugins:test_opencl_guarantees_plain '^opencl guarantees: [0-9]+ passed, 0 failed$' \
  env "${run_env[@]}" "$out/test_opencl_guarantees_plain" "$PWD/$out/libdlport_opencl.so" \
  >"$out/test_opencl_guarantees_cold.log" 2>&1 \
  || { cat "$out/test_opencl_guarantees_cold.log"; echo "[plugin] FAILED: the OpenCL guarantees without sanitizers, on a cold kernel cache"; exit 1; }
pocl_cache_files >"$out/pocl_cache_before"
echo "[plugin] the cold kernel compile ran without sanitizers: $(grep -oE 'opencl example: .*' "$out/example_cold.log"), $(grep -oE 'opencl guarantees: .*' "$out/test_opencl_guarantees_cold.log"); PoCL's cache now holds $(wc -l <"$out/pocl_cache_before") compiled files"
# The same example under ASan + UBSan and LeakSanitizer, on the cache just filled.
bash scripts/checked-run.sh plugins:example_asan '^opencl example: [0-9]+ passed, 0 failed$' \
  env "${run_env[@]}" "$out/example_asan" "$PWD/$out/libdlport_opencl_asan.so" \
  || { echo "[plugin] FAILED: the OpenCL example under ASan + UBSan (above)"; exit 1; }
# The OpenCL plugin's guarantees (issue #47): a kDLOpenCL tensor that is not one of its cl_mems
# refused (never a SEGV), broadcast and overlapping strides refused, a second init's reason.
cc "${warn[@]}" "${san[@]}" -Wno-deprecated-declarations -Iplugins/opencl \
  plugins/tests/test_opencl_guarantees.c -L"$lib" -ldlport -ldl -pthread \
  -o "$out/test_opencl_guarantees"
bash scripts/checked-run.sh plugins:test_opencl_guarantees_asan '^opencl guarantees: [0-9]+ passed, 0 failed$' \
  env "${run_env[@]}" "$out/test_opencl_guarantees" "$PWD/$out/libdlport_opencl_asan.so"
if pocl_cache_files | cmp -s - "$out/pocl_cache_before"; then
  echo "[plugin] the programs under ASan compiled no kernel: PoCL's cache still holds the $(wc -l <"$out/pocl_cache_before") compiled files of the warm-up"
else
  echo "[plugin] note: PoCL compiled under ASan after the warm-up (the new kernels below): the warm-up no longer runs every kernel the checked programs run"
  pocl_cache_files | comm -13 "$out/pocl_cache_before" -
fi

if [ -x .venv/bin/python ] && .venv/bin/python -c 'import dlport; dlport.load_plugin' 2>/dev/null; then
  for f in test_plugin_opencl test_plugin_guarantees; do
    bash scripts/checked-run.sh "plugins:$f" '[0-9]+ passed' env POCL_CACHE_DIR="$POCL_CACHE_DIR" \
      DLPORT_OPENCL_PLUGIN="$PWD/$out/libdlport_opencl.so" \
      .venv/bin/python -m pytest -q -rs -p no:cacheprovider "python/tests/$f.py"
  done
  bash scripts/checked-run.sh plugins:example.py '' env POCL_CACHE_DIR="$POCL_CACHE_DIR" \
    DLPORT_OPENCL_PLUGIN="$PWD/$out/libdlport_opencl.so" .venv/bin/python plugins/opencl/example.py
else
  echo "[plugin] SKIPPED the Python OpenCL tests: no .venv with a dlport that has load_plugin (scripts/python-env.sh, scripts/python-build.sh)"
fi
echo "[plugin] ok"
