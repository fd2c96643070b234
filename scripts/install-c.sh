#!/usr/bin/env bash
# Installs dlport's C library into PREFIX (optimised build):
#   PREFIX/include/dlport.h
#   PREFIX/lib/libdlport_native.so.X.Y.Z, .so.X (the SONAME) and .so (symlinks), libdlport_native.a
#   PREFIX/lib/pkgconfig/dlport.pc
#   PREFIX/lib/cmake/dlport/dlportConfig.cmake, dlportConfigVersion.cmake (imported targets
#   dlport::dlport, shared, and dlport::dlport_static)
# Usage: scripts/install-c.sh PREFIX   (Linux; DLPORT_INSTALL_PROFILE=debug installs a debug build)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
profile=${DLPORT_INSTALL_PROFILE:-release}
case "$profile" in
  release) cargo build -q -p dlport-native --release --locked ;;
  debug) cargo build -q -p dlport-native --locked ;;
  *) echo "DLPORT_INSTALL_PROFILE must be release or debug, not $profile" >&2; exit 2 ;;
esac
# Where cargo puts its builds (CARGO_TARGET_DIR, if set, else target/).
build=${CARGO_TARGET_DIR:-target}/$profile
version=$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "dlport-native"))')
major=${version%%.*}
soname=$(readelf -d "$build/libdlport_native.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libdlport_native.so.$major" ] \
  || { echo "[install-c] the library's SONAME is '$soname', expected libdlport_native.so.$major" >&2; exit 1; }
# The system libraries a static link needs (what rustc reports for this target).
static_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

install -d "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/dlport"
install -m 644 native/include/dlport.h "$prefix/include/dlport.h"
install -m 755 "$build/libdlport_native.so" "$prefix/lib/libdlport_native.so.$version"
ln -sfn "libdlport_native.so.$version" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libdlport_native.so"
install -m 644 "$build/libdlport_native.a" "$prefix/lib/libdlport_native.a"

cat >"$prefix/lib/pkgconfig/dlport.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: dlport
Description: DLPack tensors from C and C++: validate, import, export, wrap caller memory
Version: $version
Libs: -L\${libdir} -ldlport_native
Libs.private: $static_libs
Cflags: -I\${includedir}
PC

sed -e "s/@VERSION@/$version/g" -e "s/@MAJOR@/$major/g" -e "s/@STATIC_LIBS@/${static_libs// /;}/" \
  native/cmake/dlportConfig.cmake.in >"$prefix/lib/cmake/dlport/dlportConfig.cmake"
sed -e "s/@VERSION@/$version/g" -e "s/@MAJOR@/$major/g" \
  native/cmake/dlportConfigVersion.cmake.in >"$prefix/lib/cmake/dlport/dlportConfigVersion.cmake"
echo "[install-c] dlport $version ($profile, SONAME $soname) installed into $prefix"
