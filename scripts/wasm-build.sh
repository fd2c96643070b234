#!/usr/bin/env bash
# Builds the npm package `dlport` (ESM for the web, .d.ts, README, licences) into wasm/pkg with
# wasm-pack and the local wasm-bindgen, optimised for size: the release profile with
# opt-level "s", fat LTO and one codegen unit (set here, for this build only: the workspace's
# native release profile stays as it is), then wasm-opt -Os from the npm package binaryen
# (pinned in wasm/tools/package-lock.json). Prints the size (raw and gzipped), records it in
# target/bench/wasm.json, and fails when the gzipped wasm is over 100 KB (100,000 bytes).
# Installs wasm-pack, wasm-bindgen-cli and binaryen first when they are missing
# (scripts/install-wasm-tools.sh). `npm pack` in wasm/pkg then makes the tarball to install
# into an app (README: "Getting started on the web").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-wasm-tools.sh
CARGO_PROFILE_RELEASE_OPT_LEVEL=s CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  wasm-pack build --release --target web --weak-refs --out-dir pkg --out-name dlport wasm
# wasm-pack's own wasm-opt step is off (it would download binaryen); this one comes from npm.
# The wasm's target_features section tells wasm-opt which features it may use.
wasm=wasm/pkg/dlport_bg.wasm
before_raw=$(stat -c%s "$wasm")
before_gz=$(gzip -9 -c "$wasm" | wc -c)
wasm/tools/node_modules/.bin/wasm-opt -Os --strip-debug --strip-producers "$wasm" -o "$wasm.opt"
mv "$wasm.opt" "$wasm"
# The licence texts (wasm-pack copies only a `license-file`; ours is the `license` expression).
cp -L LICENSE-MIT LICENSE-APACHE wasm/pkg/
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("wasm/pkg/package.json")
pkg = json.loads(p.read_text())
pkg["name"] = "dlport"
# The .d.ts names GPUDevice and GPUBuffer: their types come with the package, so an app
# type-checks without adding anything (TypeScript's lib.dom has no WebGPU types).
pkg["dependencies"] = {"@webgpu/types": "^0.1.60"}
# wasm-pack lists the shipped files explicitly; npm adds only LICENSE/LICENCE[.ext] on its own.
files = pkg.get("files")
if files is not None:
    for name in ("LICENSE-MIT", "LICENSE-APACHE"):
        if name not in files:
            files.append(name)
p.write_text(json.dumps(pkg, indent=2) + "\n")
# `Tensor` has `[Symbol.dispose]()` (for `using`). Its type lives in TypeScript's
# esnext.disposable lib, which a default tsconfig (target ES2022, lib ES2022 + DOM) lacks:
# the reference below brings it in (TypeScript >= 5.2), so the package compiles with
# skipLibCheck: false under any such tsconfig, and `using` works where the target allows it.
d = pathlib.Path("wasm/pkg/dlport.d.ts")
head = '/// <reference lib="esnext.disposable" />\n/// <reference types="@webgpu/types" />\n'
text = d.read_text()
if not text.startswith(head):
    d.write_text(head + text)
PY
# What `npm publish` would ship: the module, its types, the wasm, the README and the snippet.
files=$(cd wasm/pkg && npm pack --dry-run --json 2>/dev/null \
  | python3 -c 'import json, sys; print(" ".join(sorted(f["path"] for f in json.load(sys.stdin)[0]["files"])))')
for need in dlport.js dlport.d.ts dlport_bg.wasm README.md LICENSE-MIT LICENSE-APACHE package.json; do
  case " $files " in *" $need "*) ;; *) echo "[wasm] npm pack lacks $need: $files" >&2; exit 1 ;; esac
done
case "$files" in *snippets/*/js/webgpu.js*) ;; *) echo "[wasm] npm pack lacks the WebGPU snippet: $files" >&2; exit 1 ;; esac
echo "[wasm] npm pack would ship: $files"
raw=$(stat -c%s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
limit=100000
echo "[wasm] package dlport: $wasm is $raw bytes, $gz bytes gzipped (before wasm-opt: $before_raw, $before_gz gzipped; limit $limit gzipped)"
mkdir -p target/bench
printf '{"wasm_bytes": %s, "wasm_gzip_bytes": %s, "before_wasm_opt_bytes": %s, "before_wasm_opt_gzip_bytes": %s, "gzip_limit_bytes": %s}\n' \
  "$raw" "$gz" "$before_raw" "$before_gz" "$limit" > target/bench/wasm.json
if (( gz > limit )); then
  echo "[wasm] $wasm is $gz bytes gzipped, over the limit of $limit (issue 18: the package <= 100 KB gzipped)" >&2
  exit 1
fi
