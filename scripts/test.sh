#!/usr/bin/env bash
# The test command: every check dlport has, in stages, in the order a failure is cheapest to find.
# Usage: scripts/test.sh [STAGE | STAGE:STEP]...   (from anywhere; default: all)
#   STAGE:STEP reruns one step alone (e.g. rust:portability); `scripts/test.sh --list` names them.
#   lint       format, module graphs, file sizes, the C header, clippy, MSRV, docs
#   rust       no_std builds, the tests (all and default features, 32-bit counts), the crates'
#              publish dry run, portability (Windows, macOS, aarch64 under QEMU), the examples
#   miri       dlport-core under Miri
#   c          the C ABI: C test programs, the installed library through pkg-config and CMake
#   python     the Python package: its tests, the example extension, types, CPython 3.9, Ray,
#              Dask and multiprocessing (pickle), the release wheels
#   peers      real peers: PyTorch, the ctypes tests, seed/value examples, pyarrow
#   plugins    the OpenCL plugin on PoCL and the bad plugins, under ASan and UBSan; PJRT on the
#              real XLA CPU plugin
#   wasm       the simd128 kernels under node, the browser tests, the npm package, the demo,
#              and every README block as a user pastes it
#   hardening  the stress test, valgrind and LeakSanitizer, the fuzz smoke run
#   all        every stage above, in this order: lint rust miri c python peers plugins wasm hardening
# Flaky tests: scripts/flake-hunt.sh STAGE N (rust, python, c, plugins, peers, wasm, hardening)
# runs a stage's test binaries N times under parallel load; it is not part of the test command
# (FUZZING.md records the last hunt).
# Each stage, and each step, runs alone: it installs what it needs first (scripts/install-deps.sh
# STAGE...: only what is missing, named as it goes; the Python steps make their own venvs). A
# table of every step's time closes the run, on failure too, and a failure names the command
# that reruns its step.
set -euo pipefail
cd "$(dirname "$0")/.."

all_stages=(lint rust miri c python peers plugins wasm hardening)
# Each stage's steps, in the order they run; step NAME is the function step_NAME below ('-' as '_').
declare -A stage_steps=(
  [lint]="format rooms header clippy warnings msrv docs"
  [rust]="no_std tests-default tests word32 newest-deps crates-dry-run portability examples"
  [miri]="miri"
  [c]="c-test c-examples"
  [python]="python wheels-dry-run"
  [peers]="torch engines peers arrow upstream"
  [plugins]="plugins pjrt"
  [wasm]="simd128 browser wasm-pack npm-build npm-node demo readmes"
  [hardening]="stress sanitize fuzz"
)
usage() {
  echo "usage: $0 [all|STAGE|STAGE:STEP]...  ($1)" >&2
  local s
  for s in "${all_stages[@]}"; do echo "  $s: ${stage_steps[$s]}" >&2; done
  exit 2
}
if [ "${1:-}" = --list ]; then
  for s in "${all_stages[@]}"; do for t in ${stage_steps[$s]}; do echo "$s:$t"; done; done
  exit 0
fi
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(all)
stages=()   # the stages named, alone or through one of their steps, for scripts/install-deps.sh
for a in "${args[@]}"; do
  st=${a%%:*}
  [[ $st == all || " ${all_stages[*]} " == *" $st "* ]] || usage "unknown stage: $st"
  if [[ $a == *:* ]]; then
    [[ " ${stage_steps[$st]:-} " == *" ${a#*:} "* ]] || usage "stage $st has no step ${a#*:}"
  fi
  [[ " ${stages[*]} " == *" $st "* ]] || stages+=("$st")
done
# True when step $2 of stage $1 was asked for: itself, its stage, or all.
wanted() { [[ " ${args[*]} " == *" all "* || " ${args[*]} " == *" $1 "* || " ${args[*]} " == *" $1:$2 "* ]]; }

. scripts/steps-lib.sh
run_tmp=$(mktemp -d)
# The whole output also goes to target/test-run.log (the last run's), for failure_tail.
mkdir -p target
run_log=$PWD/target/test-run.log step_line=0 table_header=""
: >"$run_log"
exec > >(tee -a "$run_log") 2>&1
trap table EXIT

# Builds sized for a test run: line tables instead of full debug info (a test binary that links
# arrow and wgpu is about 180 MB with full debug info, a fraction of that with line tables, and
# links faster), and no incremental state (a test run builds each crate once).
export CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_INCREMENTAL=0

# Caches that could make a step pass only because an earlier run warmed them start empty on every
# run: Mesa's shader cache (lavapipe, the native wgpu tests) here; PoCL's kernel cache in
# scripts/plugin-test.sh. Chromium runs with a fresh temporary profile per session (ChromeDriver's
# and playwright's default; no test names a profile directory).
export MESA_SHADER_CACHE_DIR=$run_tmp/mesa-shader-cache

# A build directory that one step uses alone is removed after that step on a fresh machine
# (CI set), where disk, not rebuild time, is what runs out; a developer's machine keeps it.
done_with() {
  if [ -n "${CI:-}" ]; then
    rm -rf "$@"
    echo "[disk] CI: removed $*"
  fi
}

step install "scripts/install-deps.sh ${stages[*]}"
DLPORT_INSTALL_LATER="wasm-tools miri-sysroot" bash scripts/install-deps.sh "${stages[@]}"

# The Python package in .venv (scripts/python-env.sh, scripts/python-build.sh), once per run: the
# python, peers, plugins, wasm and hardening steps that use it call this first, so that each runs
# alone.
python_ready=""
python_package() {
  [ -z "$python_ready" ] || return 0
  await_background venvs "$run_tmp/venv-dev.done"
  bash scripts/python-env.sh
  bash scripts/python-build.sh
  python_ready=yes
}

# The background jobs (background / await_background; scripts/background-lib.sh says why).
. scripts/background-lib.sh

# wasm-bindgen-cli and binaryen (the wasm steps' test runner, glue generator and optimiser), then
# wasm-pack when its step was asked for: about 360 crates from crates.io, most of them shared,
# compiled once per machine; wasm-bindgen.done marks the first part.
wasm_steps=0
for s in simd128 browser npm-build demo readmes; do wanted wasm "$s" && wasm_steps=1; done
wasm_pack_part=""
if wanted wasm wasm-pack && ! wasm-pack --version 2>/dev/null | grep -q '^wasm-pack 0.15.0$'; then
  wasm_pack_part=' && bash scripts/install-wasm-tools.sh --wasm-pack'
fi
if [ -n "$wasm_pack_part" ] || { [ "$wasm_steps" = 1 ] && {
  ! wasm-bindgen --version 2>/dev/null | grep -q '^wasm-bindgen 0.2.130$' \
    || [ ! -x wasm/tools/node_modules/.bin/wasm-opt ]; }; }; then
  background wasm-tools bash -c "bash scripts/install-wasm-tools.sh && touch \"\$1\"$wasm_pack_part" \
    _ "$run_tmp/wasm-bindgen.done"
fi
wasm_bindgen_ready() { await_background wasm-tools "$run_tmp/wasm-bindgen.done"; }
# Miri's sysroot (the standard library built for Miri, once per machine, cached in ~/.cache/miri).
if wanted miri miri; then background miri-sysroot cargo +nightly miri setup; fi
# The fuzz targets' build (nightly, sanitizer coverage): the fuzz step then only runs them.
if wanted hardening fuzz; then background fuzz-build cargo +nightly fuzz build; fi
# The Python steps' venvs, without dlport's wheel (the python step builds it): pip's downloads,
# about 4 minutes cold. .venv first (venv-dev.done marks it), then the peers' venv, the JAX 0.10.2
# stack and the next JAX's venv, each when a step that uses it was asked for. Best effort: each
# step still runs its venv's script, which finishes or redoes the venv and says what failed.
venv_parts=()
for s in python:python peers:torch peers:engines peers:peers peers:arrow peers:upstream plugins:plugins \
  plugins:pjrt wasm:demo hardening:sanitize; do
  if wanted "${s%:*}" "${s#*:}"; then venv_parts=("bash scripts/python-env.sh; touch $run_tmp/venv-dev.done"); fi
done
if [ "${#venv_parts[@]}" -gt 0 ]; then
  { wanted peers torch || wanted peers engines || wanted peers upstream; } && venv_parts+=("bash scripts/peers-env.sh --no-wheel")
  wanted peers upstream && venv_parts+=("bash scripts/upstream-env.sh --no-wheel")
  wanted plugins pjrt && venv_parts+=("bash scripts/jax-matrix.sh --venv-only")
  background venvs bash -c "$(printf '%s; ' "${venv_parts[@]}")true"
fi

# The steps: each one function, run by the loop at the end.
step_format() {
  step format "cargo fmt"
  cargo fmt --all --check
  cargo fmt --manifest-path python/Cargo.toml --all --check
}

step_rooms() {
  step rooms "the module graphs of every crate have no cycle, and those of core, native, capi and pyo3 draw only the arrows of DESIGN.md's rooms tables; no source file over 500 lines without a reason in DESIGN.md"
  # A planted cycle through a root function must fail the check; then every crate's sources.
  bash scripts/module-graph-test.sh
  bash scripts/file-size-check.sh
  python3 scripts/adapter-versions-check.py   # core/README.md's adapter table against the Cargo.toml files
}

step_header() {
  step header "capi/include/dlport.h is what cbindgen generates from the Rust source"
  bash scripts/header.sh --check
}

step_clippy() {
  step clippy "(all features, default features, no_std core; incompatible_msrv denied)"
  cargo clippy --workspace --all-targets --all-features --locked -- -D warnings -D clippy::incompatible_msrv
  cargo clippy --workspace --all-targets --locked -- -D warnings -D clippy::incompatible_msrv
  cargo clippy -p dlport-core --no-default-features --locked -- -D warnings -D clippy::incompatible_msrv
  cargo clippy -p dlport-wasm --target wasm32-unknown-unknown --all-targets --locked -- -D warnings -D clippy::incompatible_msrv
  # The Python package's crate is a workspace of its own (pyo3 stays out of `cargo test --workspace`),
  # with dlport-pyo3 and the example extension as its members.
  cargo clippy --manifest-path python/Cargo.toml --workspace --all-targets --locked -- -D warnings -D clippy::incompatible_msrv
  cargo clippy --manifest-path python/Cargo.toml --workspace --all-targets --features bench --locked -- -D warnings -D clippy::incompatible_msrv
  cargo clippy --manifest-path python/Cargo.toml -p dlport-example-ext --all-targets --features dlpark --locked -- -D warnings
}

step_warnings() {
  step warnings "every crate built alone, with each feature set it declares, warnings denied (scripts/warnings-check.sh)"
  bash scripts/warnings-check.sh
}

step_msrv() {
  step msrv "each crate's rust-version against its dependencies' and its edition (no old toolchain here)"
  bash scripts/msrv-check.sh
}

step_docs() {
  step docs "cargo doc, warnings denied"
  RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --all-features --locked
}

step_no_std() {
  step no_std "no_std builds of dlport-core (bare and alloc) for thumbv7em-none-eabi and wasm32"
  for target in thumbv7em-none-eabi wasm32-unknown-unknown; do
    cargo build -p dlport-core --no-default-features --target "$target" --locked
    cargo build -p dlport-core --target "$target" --locked
  done
  done_with target/thumbv7em-none-eabi
}

step_tests() {
  step tests "all features"
  cargo test --workspace --all-features --locked
}

step_tests_default() {
  step tests-default "plain \`cargo test\` at the root, as a new user runs it (every crate, default features), the run's first test build"
  local start=$SECONDS
  cargo test --locked
  # Before it, target/ holds only the lint stage's checks (metadata, no code) and the no_std
  # builds; on a fresh machine (CI set) this is the cold time README.md quotes.
  echo "[tests-default] plain cargo test at the root passed in $((SECONDS - start)) s, the run's first test build${CI:+ on a fresh machine (CI)}"
}

step_word32() {
  step word32 "dlport-core's buffer counts in a 32-bit word, as on targets without 64-bit atomics"
  # Default features: these three tests have no feature-gated part, and the adapters' crates
  # (candle, burn, image, ndarray) would all rebuild under this step's RUSTFLAGS for nothing.
  env RUSTFLAGS='--cfg dlport_word32' CARGO_TARGET_DIR=target/word32 \
    cargo test -p dlport-core --locked --test dispatch --test ownership --test guarantees
  done_with target/word32
}

step_newest_deps() {
  step newest-deps "a build against the newest semver-compatible versions of every dependency (scripts/newest-deps-check.sh)"
  bash scripts/newest-deps-check.sh
}

step_crates_dry_run() {
  step crates-dry-run "crates that publish: scripts/release.sh crates --dry-run (cargo publish --dry-run in order, doc tests of the packaged copies)"
  bash scripts/release.sh crates --dry-run
  done_with target/package-verify
}

step_portability() {
  step portability "dlport-native and dlport-capi type-check for Windows, macOS and aarch64 Linux; dlport-core's copy tests and the tests of dlport-native and dlport-capi run on aarch64 Linux (QEMU; scripts/portability-test.sh)"
  bash scripts/portability-test.sh
  done_with target/x86_64-pc-windows-msvc target/aarch64-apple-darwin target/aarch64-unknown-linux-gnu
}

step_examples() {
  step examples "the examples of dlport-core and dlport-native"
  cargo run -q -p dlport-core --example roundtrip --locked
  cargo run -q -p dlport-core --example dispatch --locked
  cargo run -q -p dlport-native --example pinned_to_host --locked
}

step_miri() {
  step miri "(core, the copy kernels included; the unit tests beside the integration and doc tests)"
  await_background miri-sysroot
  miri=(cargo +nightly miri test -p dlport-core --all-features --locked)
  # Miri interprets on one thread: once everything is built, the unit tests (the copy kernels',
  # the longest) run in a second process beside the integration and doc tests, and their output
  # follows those.
  "${miri[@]}" --lib --tests --no-run
  "${miri[@]}" --lib >"$run_tmp/miri-lib.log" 2>&1 &
  miri_lib=$!
  "${miri[@]}" --test '*'
  "${miri[@]}" --doc
  miri_rc=0
  wait "$miri_lib" || miri_rc=$?
  cat "$run_tmp/miri-lib.log"
  [ "$miri_rc" = 0 ] || { echo "[miri] FAILED: the unit tests (their output is above)"; exit 1; }
  done_with target/miri
}

step_c_test() {
  step c-test "the C test programs against capi/include/dlport.h and libdlport.so.0"
  bash scripts/c-test.sh
}

step_c_examples() {
  step c-examples "install into a temporary prefix; the C and C++ examples through pkg-config and CMake"
  bash scripts/c-examples.sh
}

step_python() {
  step python "the Python package dlport (maturin wheel in .venv, CPython 3.12) with NumPy, JAX and tvm-ffi"
  python_package
  .venv/bin/python -m pytest -q -p no:cacheprovider python/tests
  # The example PyO3 extension on dlport-pyo3 (python/examples/extension), built with maturin into
  # .venv beside the package, with NumPy, JAX and tvm-ffi (seconds once dlport-pyo3 is built).
  bash scripts/python-extension-test.sh
  cargo test --manifest-path python/Cargo.toml -p dlport-pyo3 --doc --locked   # its API docs' examples
  # mypy --strict over python/examples/*.py and python/README.md's code blocks (about 15 s).
  bash scripts/python-typecheck.sh
  # The same tests on CPython 3.9, the wheel of the stable ABI's 3.9 floor (about 3 minutes: the
  # environment once, then a dev build sharing python/target).
  bash scripts/python39-test.sh
}

step_wheels_dry_run() {
  step wheels-dry-run "the Python package's release: scripts/release.sh wheels --dry-run (the cp310-abi3 and cp39-abi3 wheels with LTO, and the sdist)"
  # Cold: the release profile with LTO in python/target, twice (4 to 10 minutes each on 2 cores);
  # warm: about 30 s.
  bash scripts/release.sh wheels --dry-run
}

step_torch() {
  step torch "real PyTorch 2.15.0 in the peers' venv (.venv-peers, in the cache: scripts/peers-env.sh)"
  python_package
  await_background venvs
  # The peers' venv: torch 2.15.0, JAX, Ray, Dask (about 6.5 GB the first time; seconds after).
  peers_start=$SECONDS
  if venv=$(bash scripts/peers-env.sh); then
    echo "[peers] venv took $((SECONDS - peers_start)) s"
    "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests/test_torch.py
  else
    rc=$?; [ "$rc" = 3 ] || exit "$rc"; echo "[torch] SKIPPED: PyPI unreachable (see above)"
  fi
}

step_engines() {
  step engines "dlport tensors through Ray (pickle protocol 5; two nodes on the loopback) and Dask (its own serialization family), on to NumPy, JAX and torch"
  python_package
  await_background venvs
  bash scripts/engines-test.sh
}

step_peers() {
  step peers "seed and value examples; the C ABI's ctypes tests with NumPy, JAX and tvm-ffi"
  python_package
  .venv/bin/python python/examples/seed.py
  # What the NumPy bridge cannot carry (bfloat16/float8 to JAX, READ_ONLY, a malformed producer, the
  # exchange API): every claim an assert.
  .venv/bin/python python/examples/value.py
  (cd tests/python && ../../.venv/bin/python -m pytest -q -p no:cacheprovider)
}

step_arrow() {
  step arrow "pyarrow reads the IPC streams dlport writes (fixed_shape_tensor) and dlport reads pyarrow's"
  python_package
  bash scripts/arrow-test.sh
}

step_upstream() {
  step upstream "the upstream cases (tests/upstream): each DLPack failure of JAX, PyTorch and NumPy confirmed with the framework alone (or fixed upstream), then dlport's one call, in the peers' venv and on the JAX 0.10.2 stack (CPython 3.11, cached)"
  python_package
  await_background venvs
  bash scripts/upstream-test.sh
}

step_plugins() {
  step plugins "the OpenCL plugin on PoCL (Debian) and bad plugins, under ASan and UBSan (LeakSanitizer with scripts/lsan.supp; a planted leak must be caught); the Python OpenCL tests"
  python_package
  bash scripts/plugin-test.sh
}

step_pjrt() {
  step pjrt "the PJRT backend on the real XLA CPU plugin (xla-cpu-pjrt, cached in ~/.cache/dlport/pjrt): Rust, C under ASan and UBSan, Python"
  python_package
  await_background venvs
  bash scripts/pjrt-test.sh
}

step_simd128() {
  step simd128 "dlport-core's SIMD copy kernels (clippy, and their tests under node)"
  wasm_bindgen_ready
  simd128=(env RUSTFLAGS='-C target-feature=+simd128' CARGO_TARGET_DIR=target/wasm-simd128
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner)
  "${simd128[@]}" cargo clippy -p dlport-core --target wasm32-unknown-unknown --all-targets --locked -- -D warnings
  "${simd128[@]}" cargo test -p dlport-core --target wasm32-unknown-unknown --locked --lib copy::arch
  done_with target/wasm-simd128
}

step_browser() {
  step browser "the WebGPU backend in headless Chromium (SwiftShader): wasm-bindgen-test-runner as cargo's runner, ChromeDriver, wasm/webdriver.json"
  wasm_bindgen_ready
  # The runner runs in wasm/ (cargo's directory for a package's tests), where it reads
  # webdriver.json; WASM_BINDGEN_TEST_ONLY_WEB skips the test binaries not configured for a browser.
  env CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CHROMEDRIVER=/usr/bin/chromedriver \
    WASM_BINDGEN_TEST_ONLY_WEB=1 WASM_BINDGEN_TEST_TIMEOUT=300 \
    cargo test -p dlport-wasm --target wasm32-unknown-unknown --locked
}

step_wasm_pack() {
  step wasm-pack "wasm-pack test --node wasm (the suites without a GPU) and --headless --chrome wasm (the WebGPU suites), as wasm/README.md shows them; skips visibly without wasm-pack (scripts/wasm-pack-test.sh)"
  await_background wasm-tools
  bash scripts/wasm-pack-test.sh
}

step_npm_build() {
  step npm-build "the npm package dlport: cargo + wasm-bindgen (simd128 and scalar wasm, one glue), bundle sizes"
  wasm_bindgen_ready
  bash scripts/wasm-build.sh
  bash scripts/release.sh npm --dry-run
}

step_npm_node() {
  step npm-node "the npm package under Node: both wasm builds' strided -> compact copies against a naive reference; the default init picks simd128, or scalar without SIMD"
  # About a second. `node --test tests/` below runs it again with the browser tests.
  node --test www/tests/package.test.mjs
}

step_demo() {
  step demo "the demo (TF.js -> dlport -> WGSL -> onnxruntime-web -> TF.js on one GPUDevice) and the npm package in a fresh Vite app (playwright-core, Debian chromium)"
  wasm_bindgen_ready
  python_package
  .venv/bin/python www/model/make_model.py --check
  # www-build.sh (www/dist) inside a check that the scripts keep a packed tarball and rebuild only
  # a stale package (about 2 minutes).
  bash scripts/wasm-keep-check.sh
  (cd www && node_modules/.bin/tsc -p tests/tsconfig.json && echo "[www] the package's TypeScript types check (tsc --noEmit)")
  # tests/ also holds the hostile-JavaScript tests (hostile.test.mjs: 10^5 hostile calls per wasm
  # build under Node, huge refused inputs, onRelease counts, nothing pinned; hostile-browser: the
  # same 10^5 in headless Chromium on real GPUBuffers) and the JS API's property test (10,000
  # cases against a reference): about 1.5 minutes of the step on 2 loaded cores.
  (cd www && node --test tests/)
}

step_readmes() {
  step readmes "every fenced block of every README run as a user pastes it (scripts/snippets-test.sh: a fresh \$HOME and venv, the installed C prefix, a fresh create-vite app)"
  wasm_bindgen_ready
  bash scripts/snippets-test.sh
}

step_stress() {
  step stress "the 8-thread stress test (1 M tensors, optimised build)"
  cargo test --release -p dlport-capi --test stress --locked
}

step_sanitize() {
  step sanitize "valgrind and LeakSanitizer"
  python_package
  bash scripts/sanitize.sh
  done_with target/sanitize
}

step_fuzz() {
  step fuzz "fuzz smoke run (${DLPORT_FUZZ_SECONDS:-20} s per target, one target per core, on a copy of the corpus: scripts/fuzz-smoke.sh)"
  await_background fuzz-build
  bash scripts/fuzz-smoke.sh
}

for stage_now in "${all_stages[@]}"; do
  for s in ${stage_steps[$stage_now]}; do
    if wanted "$stage_now" "$s"; then "step_${s//-/_}"; fi
  done
done
