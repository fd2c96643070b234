#!/usr/bin/env bash
# Builds the OpenCL plugin and its example into OUT (default target/plugins):
#   libdlport_opencl.so        the plugin (links libOpenCL, the ICD loader)
#   libdlport_opencl_asan.so   the same with ASan + UBSan (for programs built with them)
#   example_asan               plugins/opencl/example.c with ASan + UBSan, against libdlport
# Needs ocl-icd-opencl-dev and opencl-headers (scripts/plugin-test.sh installs them) and a built
# libdlport.so in LIB (default target/debug).
# Usage: plugins/opencl/build.sh [OUT] [LIB]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-target/plugins}
lib=${2:-${CARGO_TARGET_DIR:-target}/debug}
mkdir -p "$out"
warn=(-std=c11 -Wall -Wextra -Werror -Wno-deprecated-declarations -Icapi/include -Iplugins/opencl)
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
cc "${warn[@]}" -O2 -fPIC -shared plugins/opencl/dlport_opencl.c -lOpenCL -o "$out/libdlport_opencl.so"
cc "${warn[@]}" "${san[@]}" -fPIC -shared plugins/opencl/dlport_opencl.c -lOpenCL -o "$out/libdlport_opencl_asan.so"
cc "${warn[@]}" "${san[@]}" plugins/opencl/example.c -L"$lib" -ldlport -ldl -lm -pthread \
  -o "$out/example_asan"
echo "[plugin] built $out/libdlport_opencl.so, $out/libdlport_opencl_asan.so and $out/example_asan"
