#!/usr/bin/env bash
# Installs what the test command needs. Idempotent: anything already present is skipped, so a
# warm machine spends seconds here.
set -euo pipefail

log() { printf '[install] %s\n' "$*"; }

# Cross targets for the no_std builds of dlport-core.
installed_targets=$(rustup target list --installed)
for target in thumbv7em-none-eabi wasm32-unknown-unknown; do
  if grep -qx "$target" <<<"$installed_targets"; then
    log "target $target: present"
  else
    log "target $target: installing"
    rustup target add "$target"
  fi
done

# Miri on the nightly toolchain the machine image ships.
if ! rustup toolchain list | grep -q '^nightly'; then
  log "nightly toolchain: installing (minimal profile)"
  rustup toolchain install nightly --profile minimal
fi
nightly_components=$(rustup +nightly component list --installed)
for component in miri rust-src; do
  if grep -q "^$component" <<<"$nightly_components"; then
    log "nightly component $component: present"
  else
    log "nightly component $component: installing"
    rustup +nightly component add "$component"
  fi
done
# Build Miri's sysroot once (cached under ~/.cache/miri afterwards).
cargo +nightly miri setup >/dev/null 2>&1 || cargo +nightly miri setup
log "done"
