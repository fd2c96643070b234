#!/usr/bin/env bash
# PJRT plugins as DLPack devices (issues #43, #54), against every real build of XLA's CPU plugin
# that installs on a CPU-only machine:
#    xla-cpu-pjrt 0.0.1            (PJRT API 0.81,  struct_size 984)
#    fastatomstruct-xla-cpu 2026.6.23 (API 0.106, struct_size 1128)
#    lammps-jax-pjrt-cpu 0.11.2    (API 0.115, struct_size 1144, extensions newer than dlport's header)
#  1. Each wheel (about 63 MB, 250 MB unpacked) is downloaded from PyPI once into
#     ${XDG_CACHE_HOME:-~/.cache}/dlport/pjrt/NAME-VERSION/ and reused; a build that cannot be
#     had is SKIPPED with the reason printed.
#  2. For each build, as DLPORT_PJRT_PLUGIN, the same suite: the Rust tests
#     (native/tests/pjrt.rs, pjrt_lying.rs, pjrt_attack.rs, pjrt_interpose.rs; feature pjrt), the C program
#     capi/examples/pjrt/pjrt_roundtrip.c under ASan + UBSan (leaks checked), and when .venv has
#     a wheel with dlport.pjrt the Python tests (python/tests/test_pjrt.py, test_pjrt_attack.py;
#     the unpacked wheel on PYTHONPATH, so its entry point is found by name).
#     Where the wheel ships its pjrt_c_api.h, native/tests/pjrt_header.rs checks dlport's slots
#     and structs against it (DLPORT_PJRT_HEADER; "header none" where it ships none).
#     The capability probe (native/examples/pjrt_probe.rs) writes the build's report to
#     target/pjrt/probe-NAME.txt; after the last build scripts/pjrt_matrix.py prints the builds
#     side by side, writes tests/pjrt/last-run.json and, when every build ran, fails if
#     docs/pjrt-matrix.md is not that run's matrix.
#  3. Once, on the first build: python/tests/test_jax_interpose.py (dlport.jax) and
#     python/examples/pjrt/roundtrip.py.
# Each build ends in one summary line; the script fails if any part of any build failed.
# The C program and the Python files run through scripts/checked-run.sh, which records them for
# scripts/flake-hunt.sh plugins (DLPORT_HUNT_LIST); the Rust tests are the rust stage's binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlport/pjrt
# name version the plugin library's path inside the wheel
builds=(
  "xla-cpu-pjrt 0.0.1 xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
  "fastatomstruct-xla-cpu 2026.6.23 fastatomstruct_xla_cpu/libpjrt_cpu.so"
  "lammps-jax-pjrt-cpu 0.11.2 lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"
)

# fetch NAME VERSION: the wheel unpacked into $cache/NAME-VERSION (downloaded once).
fetch() {
  local name=$1 version=$2 dir=$cache/$1-$2 dl=$cache/download-$1 tmp
  [ -d "$dir" ] && return 0
  mkdir -p "$dl"
  echo "[pjrt] downloading $name==$version into $cache (once)"
  ls "$dl/${name//-/_}-$version"-*.whl >/dev/null 2>&1 \
    || python3 -m pip download --quiet --no-deps "$name==$version" -d "$dl" || return 1
  tmp=$(mktemp -d "$cache/unpack.XXXXXX")
  python3 -m zipfile -e "$dl/${name//-/_}-$version"-*.whl "$tmp" || { rm -rf "$tmp"; return 1; }
  mv "$tmp" "$dir" && rm -rf "$dl"
}

# describe SO: the table's API version and struct_size, read by GetPjrtApi.
describe() {
  python3 - "$1" <<'PY'
import ctypes, sys
get = ctypes.CDLL(sys.argv[1]).GetPjrtApi
get.restype = ctypes.POINTER(ctypes.c_size_t)
t = get()
version = ctypes.cast(ctypes.addressof(t.contents) + 32, ctypes.POINTER(ctypes.c_int32))
print(f"API {version[0]}.{version[1]}, struct_size {t[0]}")
PY
}

# Built once, run per build. The tests print SKIP lines (shown by --nocapture) without a plugin.
rust_tests=(-p dlport-native --features pjrt --locked --test pjrt --test pjrt_lying --test pjrt_attack --test pjrt_interpose --test pjrt_probe)
cargo test -q -p dlport-native --features pjrt --locked --lib pjrt
cargo test -q "${rust_tests[@]}" --no-run
header_test=(-p dlport-native --features pjrt --locked --test pjrt_header)
cargo test -q "${header_test[@]}" --no-run
cargo build -q -p dlport-capi --locked
cargo build -q -p dlport-native --features pjrt --locked --example pjrt_probe
lib=${CARGO_TARGET_DIR:-target}/debug
ln -sfn libdlport.so "$lib/libdlport.so.0"
out=${CARGO_TARGET_DIR:-target}/pjrt
mkdir -p "$out"
cc -std=c11 -Wall -Wextra -Werror -Icapi/include \
  -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g \
  capi/examples/pjrt/pjrt_roundtrip.c -L"$lib" -ldlport -ldl -pthread -o "$out/pjrt_roundtrip"
supp=()
[ -f scripts/lsan.supp ] && supp=(LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp")
python=
if [ ! -x .venv/bin/python ]; then
  echo "[pjrt] SKIPPED the Python tests: no .venv (scripts/python-env.sh makes it)"
elif ! .venv/bin/python -c "import dlport.pjrt" 2>/dev/null; then
  echo "[pjrt] SKIPPED the Python tests: the dlport wheel in .venv has no dlport.pjrt (scripts/python-build.sh rebuilds it)"
else
  python=.venv/bin/python
fi

summary=()
probes=()
failed=0
first=1
for build in "${builds[@]}"; do
  read -r name version rel <<<"$build"
  dir=$cache/$name-$version
  if ! fetch "$name" "$version" || [ ! -f "$dir/$rel" ]; then
    summary+=("[pjrt] $name $version: SKIPPED: the wheel could not be downloaded (no network or no PyPI), or it has no $rel")
    continue
  fi
  export DLPORT_PJRT_PLUGIN=$dir/$rel
  api=$(describe "$DLPORT_PJRT_PLUGIN" 2>&1 | tail -n 1)
  echo "[pjrt] === $name $version ($api): $DLPORT_PJRT_PLUGIN"
  rust=ok c=ok py=skipped header=none probe=ok
  h=$(find "$dir" -name pjrt_c_api.h -print -quit)
  if [ -n "$h" ]; then
    header=ok
    DLPORT_PJRT_HEADER=$h cargo test -q "${header_test[@]}" -- --nocapture 2>&1 | grep -vE '^$' \
      | tail -n 20 || header=FAILED
  fi
  report=$out/probe-$name.txt
  if "$lib/examples/pjrt_probe" "$DLPORT_PJRT_PLUGIN" >"$report"; then
    probes+=("$name $version=$report")
  else
    probe=FAILED
  fi
  cargo test -q "${rust_tests[@]}" -- --nocapture 2>&1 | grep -vE '^$' | tail -n 40 || rust=FAILED
  bash scripts/checked-run.sh "pjrt:pjrt_roundtrip:$name" '^pjrt_roundtrip: OK' \
    env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "${supp[@]}" \
    LD_LIBRARY_PATH="$lib" "$out/pjrt_roundtrip" "$DLPORT_PJRT_PLUGIN" || c=FAILED
  if [ -n "$python" ]; then
    py=ok
    for f in test_pjrt test_pjrt_attack; do
      bash scripts/checked-run.sh "pjrt:$f:$name" '[0-9]+ passed' \
        env PYTHONPATH="$dir" DLPORT_PJRT_PLUGIN="$DLPORT_PJRT_PLUGIN" \
        "$python" -m pytest -q -rs -p no:cacheprovider "python/tests/$f.py" || py=FAILED
    done
    if [ "$first" = 1 ]; then
      # dlport.jax (issue #55): JAX's own arrays on a plugin platform JAX's DLPack refuses ("xpu").
      bash scripts/checked-run.sh pjrt:test_jax_interpose '[0-9]+ passed' \
        env DLPORT_PJRT_PLUGIN="$DLPORT_PJRT_PLUGIN" \
        "$python" -m pytest -q -rs -p no:cacheprovider python/tests/test_jax_interpose.py || py=FAILED
      # ... and under the next JAX release (scripts/jax-matrix.sh: .venv-jax, JAX 0.12.1).
      bash scripts/jax-matrix.sh || py=FAILED
      bash scripts/checked-run.sh pjrt:roundtrip.py '' \
        "$python" python/examples/pjrt/roundtrip.py "$DLPORT_PJRT_PLUGIN" || py=FAILED
    fi
  fi
  first=0
  line="[pjrt] $name $version ($api): rust $rust, header $header, c $c, python $py, probe $probe"
  case "$line" in *FAILED*) failed=1 ;; esac
  summary+=("$line")
done
if [ "${#probes[@]}" -gt 0 ] && ! python3 scripts/pjrt_matrix.py merge tests/pjrt/last-run.json "${probes[@]}"; then
  summary+=("[pjrt] matrix: FAILED: docs/pjrt-matrix.md is not this run's matrix (scripts/pjrt_matrix.py)")
  failed=1
fi
unset DLPORT_PJRT_PLUGIN
if [ "$first" = 1 ]; then
  echo "[pjrt] no plugin build could be had: the suite runs without one (each test SKIPs)"
  cargo test -q "${rust_tests[@]}" -- --nocapture 2>&1 | grep -vE '^$' | tail -n 40
  LD_LIBRARY_PATH="$lib" "$out/pjrt_roundtrip"
fi
printf '%s\n' "${summary[@]}"
[ "$failed" = 0 ] || { echo "[pjrt] FAILED"; exit 1; }
echo "[pjrt] OK"
