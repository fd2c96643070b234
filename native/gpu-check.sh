#!/usr/bin/env bash
# The GPU check for a machine with an NVIDIA GPU and a Rust toolchain: builds dlport-native with
# `cuda`, runs every native test (the CUDA ones included, which must pass rather than skip
# there) and the C ABI's (dlport-capi, with CUDA in the library), then the round-trip / stream /
# bandwidth check. Fits in one run of a few minutes.
# Usage: native/gpu-check.sh [output-file]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/dev/stdout}
{
  echo "# dlport GPU check — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "nvidia-smi not found"
  cargo build --release -p dlport-native --features cuda --tests --examples
  cargo test --release -p dlport-native --features cuda 2>&1
  cargo test --release -p dlport-capi --features cuda 2>&1
  if cargo test --release -p dlport-native --features cuda --test cuda 2>&1 | grep -q 'SKIPPED'; then
    echo "CUDA tests were skipped: this machine has no usable CUDA driver"; exit 1
  fi
  cargo run --release -p dlport-native --features cuda --example gpu_check 2>&1
} | tee "$out"
