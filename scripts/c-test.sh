#!/usr/bin/env bash
# Builds the cdylib, compiles the C test programs in capi/tests/c against
# capi/include/dlport.h with -Wall -Werror (C11; the C++ ones as C++17), links them and runs
# each one through scripts/checked-run.sh. A program fails when its exit status is not 0 or when
# the line it must print (the proof that its checks ran, e.g. "teardown ok" from an atexit
# handler) is missing. scripts/flake-hunt.sh c runs this once with DLPORT_HUNT_LIST set, then
# reruns the recorded lines (the programs stay in place: their directory is kept).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -p dlport-capi --locked
# Where cargo puts its builds (CARGO_TARGET_DIR, if set, else target/).
lib=${CARGO_TARGET_DIR:-target}/debug
# The library's SONAME is libdlport.so.0 (capi/build.rs): the programs load that name.
ln -sfn libdlport.so "$lib/libdlport.so.0"
out=$(mktemp -d)
[ -n "${DLPORT_HUNT_LIST:-}" ] || trap 'rm -rf "$out"' EXIT
cflags=(-Wall -Wextra -Werror -Icapi/include)
# The header must also be valid C++.
c++ -x c++ -std=c++17 "${cflags[@]}" -fsyntax-only - <<<'#include "dlport.h"
int main() { return dlport_version() == nullptr; }'

# dlport.h after dlpack.h: DLPack's declarations are skipped and dlport's functions take
# dlpack.h's own types (C and C++).
for lang in "c -std=c11" "c++ -std=c++17"; do
  read -r l std <<<"$lang"
  cc -x "$l" "$std" "${cflags[@]}" -pedantic -fsyntax-only - <<<'#include "../tests/c/dlpack_first.h"
#include "dlport.h"
void f(DlportTensor* t, DLManagedTensor* m, DLManagedTensorVersioned* v);
void f(DlportTensor* t, DLManagedTensor* m, DLManagedTensorVersioned* v) {
  DLTensor view;
  (void)dlport_tensor_view(t, &view);
  (void)dlport_describe(&m->dl_tensor, 0, 0);
  (void)dlport_release(v, 1);
}'
done
echo "[c-test] dlport.h compiles after dlpack.h (C11 and C++17, -pedantic)"

# program  source  expected output line (a grep -E pattern)
tests=(
  "test_dlport               test_dlport.c              ^c: [0-9]+ passed, 0 failed$"
  "test_release_identity     test_release_identity.c    ^release identity: [0-9]+ passed, 0 failed$"
  "test_share                test_share.c               ^share: [0-9]+ passed, 0 failed$"
  "teardown_atexit           teardown_atexit.c          ^teardown ok \(atexit handler\)"
  "teardown_static           teardown_static.cpp        ^teardown ok \(C\+\+ static destructor\)"
  "teardown_pthread_key      teardown_pthread_key.c     ^teardown ok \(pthread-key destructor\)"
)
failures=0
for t in "${tests[@]}"; do
  read -r name src expect <<<"$t"
  case "$src" in
    *.cpp) c++ -std=c++17 "${cflags[@]}" "capi/tests/c/$src" -L"$lib" -ldlport -pthread -o "$out/$name" ;;
    *) cc -std=c11 "${cflags[@]}" "capi/tests/c/$src" -L"$lib" -ldlport -pthread -o "$out/$name" ;;
  esac
  bash scripts/checked-run.sh "c:$name" "$expect" env LD_LIBRARY_PATH="$lib" "$out/$name" \
    || failures=$((failures + 1))
done
if [ "$failures" -ne 0 ]; then
  echo "[c-test] $failures of ${#tests[@]} C programs failed"
  exit 1
fi
echo "[c-test] all ${#tests[@]} C programs passed"
