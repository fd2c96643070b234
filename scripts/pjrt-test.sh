#!/usr/bin/env bash
# PJRT plugins as DLPack devices (issue #43), against the real XLA CPU plugin.
#  1. The plugin: xla-cpu-pjrt 0.0.1 from PyPI (xla_cpu_pjrt.so, ~250 MB unpacked), downloaded
#     once into ${XDG_CACHE_HOME:-~/.cache}/dlport/pjrt/ and reused (idempotent); exported as
#     DLPORT_PJRT_PLUGIN. Where it cannot be had, every step SKIPS with the reason printed.
#  2. The Rust tests (native/tests/pjrt.rs, pjrt_lying.rs, pjrt_attack.rs; feature pjrt).
#  3. The C program capi/examples/pjrt/pjrt_roundtrip.c under ASan + UBSan (leaks checked).
#  4. The Python tests (python/tests/test_pjrt.py, test_pjrt_attack.py, and test_jax_interpose.py
#     for dlport.jax) and
#     python/examples/pjrt/roundtrip.py when .venv exists with a wheel that has dlport.pjrt.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
version=0.0.1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport/pjrt
dir=$cache/xla-cpu-pjrt-$version
so=$dir/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so
if [ ! -f "$so" ]; then
  mkdir -p "$cache/download"
  echo "[pjrt] downloading xla-cpu-pjrt==$version into $cache (once)"
  if python3 -m pip download --quiet --no-deps "xla-cpu-pjrt==$version" -d "$cache/download" \
    && tmp=$(mktemp -d "$cache/unpack.XXXXXX") \
    && python3 -m zipfile -e "$cache"/download/xla_cpu_pjrt-"$version"-*.whl "$tmp" \
    && rm -rf "$dir" && mv "$tmp" "$dir"; then
    rm -rf "$cache/download"
  else
    echo "[pjrt] SKIPPED: xla-cpu-pjrt==$version could not be downloaded (no network or no PyPI); the PJRT tests need it"
  fi
fi
if [ -f "$so" ]; then
  export DLPORT_PJRT_PLUGIN=$so
  echo "[pjrt] plugin: $DLPORT_PJRT_PLUGIN"
else
  unset DLPORT_PJRT_PLUGIN
fi

# The tests print SKIP lines (shown by --nocapture) when the plugin is missing.
cargo test -q -p dlport-native --features pjrt --locked --lib pjrt
cargo test -q -p dlport-native --features pjrt --locked --test pjrt --test pjrt_lying --test pjrt_attack -- --nocapture 2>&1 \
  | grep -vE '^$' | tail -n 40

cargo build -q -p dlport-capi --locked
lib=${CARGO_TARGET_DIR:-target}/debug
ln -sfn libdlport.so "$lib/libdlport.so.0"
out=${CARGO_TARGET_DIR:-target}/pjrt
mkdir -p "$out"
cc -std=c11 -Wall -Wextra -Werror -Icapi/include \
  -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g \
  capi/examples/pjrt/pjrt_roundtrip.c -L"$lib" -ldlport -ldl -pthread -o "$out/pjrt_roundtrip"
supp=()
[ -f scripts/lsan.supp ] && supp=(LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp")
env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "${supp[@]}" \
  LD_LIBRARY_PATH="$lib" "$out/pjrt_roundtrip" ${DLPORT_PJRT_PLUGIN:+"$DLPORT_PJRT_PLUGIN"}

if [ -x .venv/bin/python ]; then
  if .venv/bin/python -c "import dlport.pjrt" 2>/dev/null; then
    # The unpacked wheel on PYTHONPATH: its dist-info registers the `xla_plugins` entry point,
    # so loading by package name is tested too.
    PYTHONPATH=${DLPORT_PJRT_PLUGIN:+$dir} .venv/bin/python -m pytest -q -rs -p no:cacheprovider python/tests/test_pjrt.py python/tests/test_pjrt_attack.py
    # dlport.jax (issue #55): JAX's own arrays on a plugin platform JAX's DLPack refuses ("xpu").
    .venv/bin/python -m pytest -q -rs -p no:cacheprovider python/tests/test_jax_interpose.py
    .venv/bin/python python/examples/pjrt/roundtrip.py ${DLPORT_PJRT_PLUGIN:+"$DLPORT_PJRT_PLUGIN"}
  else
    echo "[pjrt] SKIPPED python/tests/test_pjrt.py: the dlport wheel in .venv has no dlport.pjrt (scripts/python-build.sh rebuilds it)"
  fi
else
  echo "[pjrt] SKIPPED python/tests/test_pjrt.py: no .venv (scripts/python-env.sh makes it)"
fi
echo "[pjrt] OK"
