#!/usr/bin/env bash
# Portability (scripts/test.sh's rust:portability step): dlport-native and dlport-capi type-check
# for Windows, macOS and aarch64 Linux with warnings denied; dlport-core's aarch64 test binaries
# link with Debian's cross gcc; the copy kernels' tests (NEON) and the tests of dlport-native and
# dlport-capi run on aarch64 Linux under qemu-aarch64 (user mode). Needs the targets, the cross
# gcc and qemu-user (scripts/install-deps.sh rust).
set -euo pipefail
cd "$(dirname "$0")/.."
for target in x86_64-pc-windows-msvc aarch64-apple-darwin aarch64-unknown-linux-gnu; do
  RUSTFLAGS=-Dwarnings cargo check -q -p dlport-native -p dlport-capi --target "$target" --locked
  echo "[portability] dlport-native, dlport-capi: $target checks"
done
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  cargo test -q -p dlport-core --no-run --target aarch64-unknown-linux-gnu --locked
echo "[portability] dlport-core: aarch64-unknown-linux-gnu test binaries built and linked (aarch64-linux-gnu-gcc)"
# The copy kernels' tests (NEON) run under QEMU user mode; the tens-of-MiB ones are skipped.
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
  cargo test -q -p dlport-core --target aarch64-unknown-linux-gnu --locked --lib --test copy --test copy_subbyte -- --skip large_
echo "[portability] dlport-core: the copy tests (NEON kernels) pass on aarch64 under qemu-aarch64"
# dlport-native's and dlport-capi's tests too, sharing included (sealed memfds mapped, fds over
# SCM_RIGHTS between two emulated processes: a test that starts its own binary again prefixes
# DLPORT_TEST_RUNNER), the stress test with 16,000 tensors. The run takes about 70 s; the
# aarch64 build of the tests several minutes cold (the crates that dlport-core's aarch64 tests
# built are reused).
# Skipped, with its reason: fds::bad_frames_close_the_fds_that_came_with_them sends 5 fds where
# a frame may carry 4, and qemu-user cuts the control message to the receiver's room without
# setting MSG_CTRUNC as the kernel does, so dlport sees "fd count = 4" instead of "more than 4".
qemu_aarch64="qemu-aarch64 -L /usr/aarch64-linux-gnu"
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$qemu_aarch64" DLPORT_TEST_RUNNER="$qemu_aarch64" \
DLPORT_STRESS_N=16000 \
  cargo test -q -p dlport-native -p dlport-capi --target aarch64-unknown-linux-gnu --locked \
  -- --skip fds::bad_frames_close_the_fds_that_came_with_them
echo "[portability] dlport-native, dlport-capi: their tests pass on aarch64 under qemu-aarch64 (sharing included; one skipped, above)"
