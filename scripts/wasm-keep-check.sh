#!/usr/bin/env bash
# Checks that the package scripts keep what the user made (run by scripts/test.sh right after
# scripts/wasm-build.sh; about 2 minutes on 2 shared cores, most of it the rebuild's wasm-bindgen
# and wasm-opt runs, cargo having nothing to do):
# - `npm pack` in wasm/pkg, as the README says, makes a tarball;
# - scripts/www-build.sh (which scripts/www-serve.sh runs) says the package is up to date and
#   leaves wasm/pkg as it was: the package's files unchanged, the tarball there;
# - a rebuild (scripts/wasm-build.sh) keeps the tarball, byte for byte, and says it is older
#   than the build.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "[keep] $*" >&2; exit 1; }
echo "[keep] npm pack, then scripts/www-build.sh and a rebuild must keep the tarball (about 2 minutes)"
version=$(node -p 'require("./wasm/pkg/package.json").version')
tgz=wasm/pkg/dlport-$version.tgz
rm -f "$tgz"
(cd wasm/pkg && npm pack --silent >/dev/null)
[[ -f $tgz ]] || fail "npm pack in wasm/pkg made no $tgz"
sum=$(sha256sum "$tgz" | cut -d' ' -f1)
stamp() { (cd wasm/pkg && find . -type f ! -name '*.tgz' -printf '%p %T@\n' | sort | sha256sum | cut -d' ' -f1); }
before=$(stamp)

log=$(bash scripts/www-build.sh 2>&1) || { printf '%s\n' "$log" >&2; fail "scripts/www-build.sh failed"; }
printf '%s\n' "$log" | grep -F '[wasm] wasm/pkg is up to date' >/dev/null \
  || { printf '%s\n' "$log" >&2; fail "scripts/www-build.sh did not say the fresh package is up to date (above)"; }
[[ $(stamp) = "$before" ]] || fail "scripts/www-build.sh changed wasm/pkg although it was up to date"
[[ -f $tgz && $(sha256sum "$tgz" | cut -d' ' -f1) = "$sum" ]] || fail "scripts/www-build.sh removed or changed $tgz"
echo "[keep] scripts/www-build.sh: wasm/pkg up to date, not rebuilt; $tgz kept"

log=$(bash scripts/wasm-build.sh 2>&1) || { printf '%s\n' "$log" >&2; fail "scripts/wasm-build.sh failed"; }
[[ -f $tgz && $(sha256sum "$tgz" | cut -d' ' -f1) = "$sum" ]] || fail "scripts/wasm-build.sh removed or changed $tgz"
printf '%s\n' "$log" | grep -F "[wasm] $tgz is from an earlier build" >/dev/null \
  || { printf '%s\n' "$log" | tail -5 >&2; fail "scripts/wasm-build.sh did not say $tgz is older than the build"; }
echo "[keep] scripts/wasm-build.sh rebuilt wasm/pkg and kept $tgz (named as older than the build)"
rm -f "$tgz"
