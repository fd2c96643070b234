#!/usr/bin/env bash
# ThreadSanitizer over the aliasing and ownership tests of dlport-core (the class of the two
# writable exports racing from two threads in safe code). Builds std with TSan (nightly,
# rust-src), so it takes ~5 minutes on 2 cores; recorded in FUZZING.md, run on demand.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup +nightly component add rust-src >/dev/null 2>&1 || true
RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
  cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu -p dlport-core --all-features \
  --test guarantees --test ownership --locked 2>&1 | tee target/tsan.log | grep -E "^test result|ThreadSanitizer"
if grep -q "WARNING: ThreadSanitizer" target/tsan.log; then
  echo "[tsan] FAILED: a data race was reported"; exit 1
fi
echo "[tsan] no data race reported"
