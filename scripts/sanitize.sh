#!/usr/bin/env bash
# Leak and UB checks: every C test program and example under valgrind (0 errors, 0 definite or
# indirect leaks), and the NumPy/JAX peer tests of the C ABI and the Python package's tests under
# LeakSanitizer (no leak whose stack passes through dlport; Python, NumPy and JAX keep their own
# allocations at exit, which are not ours). Two negative controls leak on purpose and must be
# caught. Every program runs through scripts/checked-run.sh, so scripts/flake-hunt.sh hardening
# records and reruns them (DLPORT_HUNT_LIST; the programs are kept for it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts its builds (CARGO_TARGET_DIR, if set, else target/).
lib=$PWD/${CARGO_TARGET_DIR:-target}/debug
if [ ! -e /usr/lib/x86_64-linux-gnu/liblsan.so.0 ] || ! command -v valgrind >/dev/null; then
  bash scripts/apt-install.sh liblsan0 valgrind
fi
cargo build -q -p dlport-capi --locked
# The programs load the SONAME, libdlport.so.0 (capi/build.rs).
ln -sfn libdlport.so "$lib/libdlport.so.0"
out=$(mktemp -d)
[ -n "${DLPORT_HUNT_LIST:-}" ] || trap 'rm -rf "$out"' EXIT
checked=(bash "$PWD/scripts/checked-run.sh")
# Every C test program and example (the teardown ones call dlport from atexit handlers, C++ static
# destructors and pthread-key destructors; release_identity exercises the export quarantine,
# whose blocks are "still reachable" from a static at exit, not leaked).
# The producer examples too: every dlport_wrap path frees its buffer through the callback.
for src in capi/tests/c/*.c capi/tests/c/*.cpp capi/examples/c/*.c capi/examples/c/*.cpp; do
  name=$(basename "$src" | tr . _)
  case "$src" in
    *.cpp) c++ -std=c++17 -Wall -Werror -Icapi/include "$src" -L"$lib" -ldlport -pthread -o "$out/$name" ;;
    *) cc -std=c11 -Wall -Werror -Icapi/include "$src" -L"$lib" -ldlport -pthread -o "$out/$name" ;;
  esac
  "${checked[@]}" "sanitize:valgrind:$name" '' env LD_LIBRARY_PATH="$lib" valgrind -q --error-exitcode=9 \
    --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect "$out/$name"
done

# LeakSanitizer's fast unwinder needs frame pointers to see dlport's frames in leak stacks, and
# its symbolizer full debug info to name the dlport function that the standard library's
# allocation calls are inlined into (test.sh builds with line tables only).
RUSTFLAGS="-C force-frame-pointers=yes" CARGO_PROFILE_DEV_DEBUG=true CARGO_TARGET_DIR=target/sanitize \
  cargo build -q -p dlport-capi --locked
# Each LeakSanitizer program runs through scripts/lsan-run.sh, which judges its reports by dlport's
# frames alone (it says how), and scripts/checked-run.sh, which records it for
# scripts/flake-hunt.sh hardening. Each negative control leaks on purpose, under the same
# suppressions, and must be reported: it shows that dlport's leaks still count.
lsan_run=(bash "$PWD/scripts/lsan-run.sh")
capi_lib=DLPORT_LIB=$PWD/target/sanitize/debug/libdlport.so
echo "[sanitize] the NumPy/JAX peer tests (tests/python) under LeakSanitizer"
(cd tests/python && "${checked[@]}" sanitize:lsan:tests/python '[0-9]+ passed' \
  env "$capi_lib" "${lsan_run[@]}" capi clean ../../.venv/bin/python -m pytest -q -p no:cacheprovider)
echo "[sanitize] negative control: dlport tensors leaked on purpose are reported (tests/leaks/capi_tensors.py)"
(cd tests/python && "${checked[@]}" sanitize:lsan:capi_tensors '^\[lsan-run\] .* [1-9][0-9]* through dlport \(leaky' \
  env "$capi_lib" "${lsan_run[@]}" capi leaky ../../.venv/bin/python ../leaks/capi_tensors.py)
# The Python package (the wheel scripts/python-build.sh installed in .venv).
echo "[sanitize] the Python package's tests under LeakSanitizer"
(cd python/tests && "${checked[@]}" sanitize:lsan:python/tests '[0-9]+ passed' \
  "${lsan_run[@]}" package clean ../../.venv/bin/python -m pytest -q -p no:cacheprovider \
  test_numpy.py test_errors.py test_threads.py test_tvm_ffi.py test_package.py)
echo "[sanitize] negative control: a dlport export whose capsule was marked used but never consumed is reported (tests/leaks/package_capsule.py)"
"${checked[@]}" sanitize:lsan:package_capsule '^\[lsan-run\] .* [1-9][0-9]* through dlport \(leaky' \
  "${lsan_run[@]}" package leaky .venv/bin/python tests/leaks/package_capsule.py
echo "[sanitize] 0 leaks and 0 invalid accesses attributable to dlport"
