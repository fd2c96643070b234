#!/usr/bin/env bash
# Installs dlport's C library into PREFIX (optimised build):
#   PREFIX/include/dlport.h
#   PREFIX/lib/libdlport.so.X.Y.Z, .so.X (the SONAME) and .so (symlinks), libdlport.a
#   PREFIX/lib/pkgconfig/dlport.pc
#   PREFIX/lib/cmake/dlport/dlportConfig.cmake, dlportConfigVersion.cmake (imported targets
#   dlport::dlport, shared, and dlport::dlport_static)
# Usage: scripts/install-c.sh PREFIX   (Linux; DLPORT_INSTALL_PROFILE=debug installs a debug build)
#
# Finding the library at run time: when PREFIX/lib is not a directory the dynamic loader
# searches (/opt/dlport, $HOME/...), dlport.pc's Libs carry -Wl,-rpath,${libdir}, so a program
# linked through pkg-config starts as built, without LD_LIBRARY_PATH (CMake writes the same
# rpath into programs it builds against the imported target). When PREFIX/lib is one the loader
# searches (/usr/local/lib), no rpath is written and the loader's cache is refreshed (ldconfig,
# as root; otherwise the script says to run it).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
profile=${DLPORT_INSTALL_PROFILE:-release}
case "$profile" in
  release) flags=(--release) ;;
  debug) flags=() ;;
  *) echo "DLPORT_INSTALL_PROFILE must be release or debug, not $profile" >&2; exit 2 ;;
esac
echo "[install-c] building libdlport ($profile: cargo build -p dlport-capi; 2 to 29 minutes on 2 cores from a fresh clone, as README.md measured them; seconds once built)"
start=$SECONDS
cargo build -p dlport-capi "${flags[@]}" --locked
# The line a log is searched for (grep '\[build-time\]'), with the load the time was taken under.
echo "[build-time] C library: $((SECONDS - start)) s (scripts/install-c.sh, cargo build -p dlport-capi, $profile; load $(cut -d' ' -f1-3 /proc/loadavg))"
# Where cargo puts its builds (CARGO_TARGET_DIR, if set, else target/).
build=${CARGO_TARGET_DIR:-target}/$profile
version=$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "dlport-capi"))')
major=${version%%.*}
soname=$(readelf -d "$build/libdlport.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libdlport.so.$major" ] \
  || { echo "[install-c] the library's SONAME is '$soname', expected libdlport.so.$major" >&2; exit 1; }
# The system libraries a static link needs (what rustc reports for this target).
static_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

install -d "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/dlport"
install -m 644 capi/include/dlport.h "$prefix/include/dlport.h"
install -m 755 "$build/libdlport.so" "$prefix/lib/libdlport.so.$version"
ln -sfn "libdlport.so.$version" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libdlport.so"
install -m 644 "$build/libdlport.a" "$prefix/lib/libdlport.a"

# Is PREFIX/lib among the directories the loader searches (ld.so.conf and its trusted ones)?
libdir=$(cd "$prefix/lib" && pwd -P)
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
searched=no
while read -r dir; do
  [ -d "$dir" ] && [ "$(cd "$dir" && pwd -P)" = "$libdir" ] && searched=yes
done < <("$ldconfig" -v -N 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p')
if [ "$searched" = yes ]; then
  rpath=
else
  rpath=' -Wl,-rpath,${libdir}'
fi

cat >"$prefix/lib/pkgconfig/dlport.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: dlport
Description: DLPack tensors from C and C++: validate, import, export, wrap caller memory
Version: $version
Libs: -L\${libdir}$rpath -ldlport
Libs.private: $static_libs
Cflags: -I\${includedir}
PC

sed -e "s/@VERSION@/$version/g" -e "s/@MAJOR@/$major/g" -e "s/@STATIC_LIBS@/${static_libs// /;}/" \
  capi/cmake/dlportConfig.cmake.in >"$prefix/lib/cmake/dlport/dlportConfig.cmake"
sed -e "s/@VERSION@/$version/g" -e "s/@MAJOR@/$major/g" \
  capi/cmake/dlportConfigVersion.cmake.in >"$prefix/lib/cmake/dlport/dlportConfigVersion.cmake"
echo "[install-c] dlport $version ($profile, SONAME $soname) installed into $prefix"
if [ "$searched" = yes ]; then
  if [ "$(id -u)" -eq 0 ]; then
    "$ldconfig"
    echo "[install-c] $libdir is searched by the loader: its cache refreshed (ldconfig); dlport.pc has no rpath"
  else
    echo "[install-c] $libdir is searched by the loader: run 'sudo ldconfig' so that programs find libdlport.so.$major"
  fi
else
  echo "[install-c] $libdir is not searched by the loader: dlport.pc links with -Wl,-rpath,$libdir, so programs built through it find libdlport.so.$major there"
fi
