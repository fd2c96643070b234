#!/usr/bin/env bash
# The MSRV check that this machine can run. Only the stable and nightly toolchains are
# installed here (no `cargo +1.85`), so the declared `rust-version` of each published crate is
# checked three ways instead:
#   1. every non-dev dependency, transitively and for every target, declares a rust-version no
#      newer than the crate's (read from `cargo metadata`, i.e. the versions in Cargo.lock);
#   2. the edition's minimum (2024 needs 1.85) is no newer than the crate's rust-version;
#   3. clippy's `incompatible_msrv` lint (std APIs stabilised after rust-version), denied in the
#      clippy stage of scripts/test.sh.
# Not checked: language features stabilised after the MSRV (that needs the old toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --locked --all-features | python3 scripts/msrv-check.py
