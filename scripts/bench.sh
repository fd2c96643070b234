#!/usr/bin/env bash
# The bench command: every benchmark in one run (about 5 minutes on 2 cores), then
# BENCHMARKS.md and bench/copies.png. CI does not run it.
# Usage: scripts/bench.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
# NumPy's OpenBLAS threads spin after start-up; on 2 cores they steal time from the timed
# thread and add instructions to callgrind's counts. No benchmark here uses BLAS.
export OPENBLAS_NUM_THREADS=1
quick=${1:-}
bash scripts/python-env.sh
.venv/bin/python -m pip install --quiet -r bench/python/requirements.txt
cargo bench -p dlport-bench --bench import_export --locked
cargo bench -p dlport-bench --bench adapters --features adapters --locked   # ndarray, image, candle against dlpark
python3 bench/python/import_export_profile.py   # instructions per import/export (callgrind)
cargo run --release --locked -p dlport-bench --bin copies -- $quick
.venv/bin/python bench/python/numpy_copies.py $quick
DLPORT_PY_FEATURES=bench bash scripts/python-build.sh --release   # with dlport._native._bench
.venv/bin/python bench/python/exchange.py $quick
cargo run --release --locked -p dlport-bench --features wgpu --bin wgpu_upload
cargo run --release --locked -p dlport-bench --features wgpu --bin wgpu_compact
cargo run --release --locked -p dlport-bench --bin share -- $quick
.venv/bin/python bench/python/numpy_shared.py $quick
bash scripts/wasm-build.sh
node bench/js/wasm_copies.mjs $quick   # the package's simd128 build against its scalar one
.venv/bin/python bench/python/report.py
python3 bench/python/adapters_report.py   # after report.py, which rewrites BENCHMARKS.md
# The PyO3 argument path (the example extension, release, with dlpark's path beside it) against
# dlport.from_dlpack and numpy.from_dlpack; its own section of BENCHMARKS.md, after report.py.
DLPORT_EXT_FEATURES=dlpark bash scripts/python-extension-test.sh --release -q
.venv/bin/python bench/python/pyo3_args.py $quick
