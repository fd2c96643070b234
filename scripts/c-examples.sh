#!/usr/bin/env bash
# Installs dlport into a temporary prefix (scripts/install-c.sh) and builds the C and C++
# examples in capi/examples/c against that installed copy, through pkg-config and through
# CMake find_package(dlport), with -Wall -Wextra -Werror -pedantic; runs each one (shared and
# static) outside the source tree, with nothing added to what pkg-config and CMake give (no
# rpath, no LD_LIBRARY_PATH: the prefix is outside the loader's path, so each program must find
# the installed library through the rpath dlport.pc or CMake wrote). Each program runs through
# scripts/checked-run.sh and fails unless it exits 0 and prints its "N passed, 0 failed" line (its
# checks include the one release callback after success). scripts/flake-hunt.sh c records and
# reruns these runs (DLPORT_HUNT_LIST; the prefix and programs are kept for it).
# The README's own C commands are run as written by scripts/snippets-test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
[ -n "${DLPORT_HUNT_LIST:-}" ] || trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
bash scripts/install-c.sh "$prefix"
unset LD_LIBRARY_PATH
warn=(-Wall -Wextra -Werror -pedantic)
ex=$repo/capi/examples/c

echo "[c-examples] pkg-config: $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion dlport)"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
read -r -a pc_cflags <<<"$(pkg-config --cflags dlport)"
read -r -a pc_libs <<<"$(pkg-config --libs dlport)"
mkdir -p "$work/pc"
cc -std=c11 "${warn[@]}" "${pc_cflags[@]}" "$ex/producer.c" "${pc_libs[@]}" -o "$work/pc/producer_c"
c++ -std=c++17 "${warn[@]}" "${pc_cflags[@]}" "$ex/producer.cpp" "${pc_libs[@]}" -o "$work/pc/producer_cpp"

echo "[c-examples] CMake: find_package(dlport) from $prefix"
cmake -S "$ex" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 \
  || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake" -j 2 >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }

failures=0
cd "$work"
for prog in pc/producer_c pc/producer_cpp cmake/producer_c cmake/producer_cpp cmake/producer_c_static; do
  case "$prog" in
    *_static) ;;
    *) needed=$(readelf -d "$prog" | sed -n 's/.*Shared library: \[\(libdlport[^]]*\)\]/\1/p')
       resolved=$(ldd "$prog" | sed -n 's/.*libdlport[^ ]* => \([^ ]*\).*/\1/p')
       echo "[c-examples] $prog needs $needed, resolved to $resolved"
       [ "$needed" = libdlport.so.0 ] && [[ "$resolved" == "$prefix"/lib/* ]] \
         || { echo "[c-examples] FAILED: $prog does not load the installed libdlport.so.0"; failures=$((failures + 1)); continue; } ;;
  esac
  # env -u: the library is found through the rpath alone, wherever this runs from.
  bash "$repo/scripts/checked-run.sh" "c-examples:$prog" '^producer \(C(\+\+)?\): [0-9]+ passed, 0 failed$' \
    env -u LD_LIBRARY_PATH "./$prog" || failures=$((failures + 1))
done
[ "$failures" -eq 0 ] || { echo "[c-examples] $failures example runs failed"; exit 1; }
echo "[c-examples] the C and C++ examples built (pkg-config, CMake; shared and static) and ran against the installed copy"
