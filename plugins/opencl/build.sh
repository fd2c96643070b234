#!/usr/bin/env bash
# Builds the OpenCL plugin and its example into OUT (default target/plugins):
#   libdlport_opencl.so        the plugin (links libOpenCL, the ICD loader)
#   libdlport_opencl_asan.so   the same with ASan + UBSan (for programs built with them)
#   example                    plugins/opencl/example.c, against libdlport
#   example_asan               the same with ASan + UBSan
# Against what:
#   no LIB      the installed dlport, found by pkg-config (`pkg-config --cflags --libs dlport`;
#               PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix of scripts/install-c.sh):
#               its header, and libdlport with the rpath its dlport.pc writes for a prefix
#               outside the loader's path, so the examples start without LD_LIBRARY_PATH.
#   LIB         a folder holding a built libdlport.so (scripts/plugin-test.sh: target/debug),
#               with capi/include's header and an rpath to LIB.
# Needs a C compiler, ocl-icd-opencl-dev and opencl-headers (Debian; scripts/plugin-test.sh
# installs them) and, to run, an OpenCL driver such as PoCL (pocl-opencl-icd).
# Usage: plugins/opencl/build.sh [OUT] [LIB]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/plugins}
mkdir -p "$out"
if [ $# -ge 2 ]; then
  lib=$(cd "$2" && pwd)
  dlport=(-Icapi/include -L"$lib" -Wl,-rpath,"$lib" -ldlport)
  from="$lib/libdlport.so"
else
  if ! flags=$(pkg-config --cflags --libs dlport 2>/dev/null); then
    echo "[plugin] pkg-config finds no dlport: install it (scripts/install-c.sh PREFIX) and set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, or pass a folder with libdlport.so: $0 OUT LIB" >&2
    exit 1
  fi
  read -r -a dlport <<<"$flags"
  from="dlport $(pkg-config --modversion dlport) (pkg-config: $(pkg-config --variable=libdir dlport))"
fi
[ -f /usr/include/CL/cl.h ] || [ -f /usr/local/include/CL/cl.h ] \
  || { echo "[plugin] no CL/cl.h: install opencl-headers and ocl-icd-opencl-dev (Debian: apt-get install opencl-headers ocl-icd-opencl-dev)" >&2; exit 1; }
warn=(-std=c11 -Wall -Wextra -Werror -Wno-deprecated-declarations -Iplugins/opencl)
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
# The plugin needs only dlport.h's types (dlport loads it and hands it its callbacks).
cflags=()
for f in "${dlport[@]}"; do case "$f" in -I*) cflags+=("$f") ;; esac; done
cc "${warn[@]}" "${cflags[@]}" -O2 -fPIC -shared plugins/opencl/dlport_opencl.c -lOpenCL \
  -o "$out/libdlport_opencl.so"
cc "${warn[@]}" "${cflags[@]}" "${san[@]}" -fPIC -shared plugins/opencl/dlport_opencl.c -lOpenCL \
  -o "$out/libdlport_opencl_asan.so"
cc "${warn[@]}" -O2 plugins/opencl/example.c "${dlport[@]}" -ldl -lm -pthread -o "$out/example"
cc "${warn[@]}" "${san[@]}" plugins/opencl/example.c "${dlport[@]}" -ldl -lm -pthread \
  -o "$out/example_asan"
echo "[plugin] built $out/libdlport_opencl.so, $out/libdlport_opencl_asan.so, $out/example and $out/example_asan against $from"
