#!/usr/bin/env bash
# Builds the npm package `dlport` (ESM for the web, .d.ts, README, licences) into wasm/pkg with
# cargo and the pinned wasm-bindgen (wasm-bindgen-cli, the wasm-bindgen crate's exact version),
# optimised for size: the release profile with
# opt-level "s", fat LTO and one codegen unit (set here, for this build only: the workspace's
# native release profile stays as it is), then wasm-opt -Os from the npm package binaryen
# (pinned in wasm/tools/package-lock.json). dlport-core's simd128 copy kernels are written to be
# fast at "s" (core/src/copy/arch/simd.rs: `each!`, `copy_line`); opt-level 3 for dlport-core
# alone would take the simd128 wasm to 113 KB gzipped, over the limit below.
#
# Both builds go to folders of their own under the target directory first; only a finished,
# checked package replaces the package's files in wasm/pkg, and anything else there (the
# `npm pack` tarball an app installed, say) stays.
#
# The wasm is built twice from the same source: `dlport_bg.wasm` with WebAssembly SIMD
# (`-C target-feature=+simd128`: dlport-core's simd128 copy kernels) and `dlport_scalar_bg.wasm`
# without (the portable kernels, for engines without SIMD). Both go through the same
# wasm-bindgen, and the build fails when the two JS glue files (or the .d.ts, the snippets)
# differ, so one dlport.js drives either wasm. Its default initialisation is then patched to
# pick the SIMD build where `WebAssembly.validate` accepts a minimal SIMD module, the scalar one
# elsewhere; a module, URL or bytes passed to `init(...)` / `initSync(...)` still wins. The
# scalar wasm is checked to hold no SIMD instruction (wasm-opt with SIMD disabled).
#
# Prints the sizes (raw and gzipped), records them in target/bench/wasm.json, and fails when
# either gzipped wasm is over 100 KB (100,000 bytes). Installs the wasm32 target,
# wasm-bindgen-cli and binaryen first when they are missing (scripts/install-wasm-tools.sh).
# package.json comes from wasm/Cargo.toml's fields (`cargo metadata`): name `dlport`, type
# module, description, version, licence, repository, the shipped files, main, types and
# sideEffects (then authors, homepage and keywords where the crate sets them), plus the
# @webgpu/types dependency and typesVersions below. `npm pack` in wasm/pkg
# then makes the tarball to install into an app (README: "Getting started on the web"); a
# tarball older than the new build is named, with the command that remakes it.
#
# `--if-stale` (scripts/www-build.sh): builds only when a file of the package is missing or a
# source it is built from is newer than its dlport_bg.wasm, and says which; else it says the
# package is up to date and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case "${1:-}" in
  "") ;;
  --if-stale)
    missing=""
    for f in package.json dlport.js dlport.d.ts ts5/dlport.d.ts dlport_bg.wasm dlport_scalar_bg.wasm; do
      [[ -f wasm/pkg/$f ]] || { missing=wasm/pkg/$f; break; }
    done
    if [[ -n $missing ]]; then
      echo "[wasm] $missing is missing: building the package"
    else
      newer=$(find core/src core/Cargo.toml wasm/src wasm/js wasm/Cargo.toml wasm/README.md Cargo.toml Cargo.lock \
        scripts/wasm-build.sh LICENSE-MIT LICENSE-APACHE -type f -newer wasm/pkg/dlport_bg.wasm -print -quit)
      if [[ -z $newer ]]; then
        echo "[wasm] wasm/pkg is up to date (built $(date -r wasm/pkg/dlport_bg.wasm '+%F %T'), no source newer): not rebuilt"
        exit 0
      fi
      echo "[wasm] wasm/pkg is stale ($newer is newer than wasm/pkg/dlport_bg.wasm): rebuilding the package"
    fi
    ;;
  *) echo "[wasm] unknown argument '$1': scripts/wasm-build.sh takes none, or --if-stale" >&2; exit 2 ;;
esac
bash scripts/install-wasm-tools.sh
wasm_opt=wasm/tools/node_modules/.bin/wasm-opt
started=$SECONDS

# The scalar build keeps the usual target directory (and its cache); the SIMD one has its own,
# since other RUSTFLAGS would rebuild every crate there (scripts/test.sh's simd128 tests use it
# too).
target=${CARGO_TARGET_DIR:-target}
[[ $target = /* ]] || target=$root/$target
# The package is assembled in $new (the simd128 build, then the scalar wasm moved in), and
# copied into wasm/pkg at the end. Folders of this run's own, so that two builds at once (two
# shells, say) cannot mix their files; removed on exit.
mkdir -p "$target"
new=$(mktemp -d "$target/wasm-pkg.XXXXXX")
scalar_pkg=$(mktemp -d "$target/wasm-scalar-pkg.XXXXXX")
check=$(mktemp -d "$target/wasm-check.XXXXXX")
trap 'rm -rf "$new" "$scalar_pkg" "$check"' EXIT
size_profile=(env CARGO_PROFILE_RELEASE_OPT_LEVEL=s CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1)
build() { # out-dir, cargo target directory, then env assignments
  local out=$1 dir=$2
  shift 2
  rm -rf "$out"
  "${size_profile[@]}" CARGO_TARGET_DIR="$dir" "$@" \
    cargo build --release --locked --lib --target wasm32-unknown-unknown -p dlport-wasm
  # The JS glue for the web (ES module) and its .d.ts; wasm-bindgen 0.2.130 detects weak
  # references (FinalizationRegistry) at run time and writes TypeScript by default.
  wasm-bindgen --target web --out-dir "$out" --out-name dlport \
    "$dir/wasm32-unknown-unknown/release/dlport_wasm.wasm"
}
# How long each build takes depends on what cargo has cached (measured on 2 shared cores):
# from nothing (wgpu and every dependency, fat LTO) 7 to 9 minutes each; after a change to
# dlport alone about 45 seconds each; with nothing changed a few seconds.
if [[ -d $target/wasm-simd128/wasm32-unknown-unknown/release ]]; then
  echo "[wasm] build 1 of 2: simd128 (dlport_bg.wasm): cargo + wasm-bindgen, seconds to a minute with cargo's cache"
else
  echo "[wasm] build 1 of 2: simd128 (dlport_bg.wasm): cargo + wasm-bindgen, 7 to 9 minutes on 2 cores (no cargo cache yet in $target/wasm-simd128)"
fi
build "$new" "$target/wasm-simd128" \
  RUSTFLAGS="${RUSTFLAGS:-}${RUSTFLAGS:+ }-C target-feature=+simd128"
if [[ -d $target/wasm32-unknown-unknown/release ]]; then
  echo "[wasm] build 2 of 2: scalar (dlport_scalar_bg.wasm): cargo + wasm-bindgen, seconds to a minute with cargo's cache"
else
  echo "[wasm] build 2 of 2: scalar (dlport_scalar_bg.wasm): cargo + wasm-bindgen, 7 to 9 minutes on 2 cores (no cargo cache yet in $target)"
fi
build "$scalar_pkg" "$target"

# One glue for both: everything wasm-bindgen wrote but the wasm itself must be byte for byte the
# same (the import and export names wasm-bindgen generates depend on the Rust source, not on
# target features).
if ! glue_diff=$(diff -r --exclude=dlport_bg.wasm "$new" "$scalar_pkg"); then
  printf '%s\n' "$glue_diff" | head -80 >&2
  echo "[wasm] the simd128 and scalar builds' JS glue differ (above): one dlport.js cannot load both" >&2
  exit 1
fi
echo "[wasm] the two builds' glue is identical: $(cd "$new" && find . -type f ! -name '*.wasm' | sort | paste -sd' ')"

# wasm-opt comes from the npm package binaryen. The wasm's target_features section tells wasm-opt
# which features it may use.
echo "[wasm] wasm-opt -Os on both wasm, then their SIMD check (under a minute in all)"
mv "$scalar_pkg/dlport_bg.wasm" "$new/dlport_scalar_bg.wasm"
declare -A before_raw before_gz
for wasm in "$new/dlport_bg.wasm" "$new/dlport_scalar_bg.wasm"; do
  before_raw[$wasm]=$(stat -c%s "$wasm")
  before_gz[$wasm]=$(gzip -9 -c "$wasm" | wc -c)
  "$wasm_opt" -Os --strip-debug --strip-producers "$wasm" -o "$wasm.opt"
  mv "$wasm.opt" "$wasm"
done
rm -rf "$scalar_pkg"
# What each build may run on: the SIMD build holds v128 code, the scalar one none, validated
# with every feature but SIMD (a stray +simd128 in RUSTFLAGS would fail here). wasm-opt adds
# the features a target_features section names to its command line's, so a copy without the
# section is validated.
for name in dlport_bg dlport_scalar_bg; do
  "$wasm_opt" "$new/$name.wasm" --strip-target-features -o "$check/$name.wasm"
done
simd_free() {
  "$wasm_opt" -q "$check/$1.wasm" --all-features --disable-simd --disable-relaxed-simd -o /dev/null 2>"$check/$1.log"
}
if ! simd_free dlport_scalar_bg; then
  head -c 2000 "$check/dlport_scalar_bg.log" >&2
  echo "[wasm] dlport_scalar_bg.wasm does not validate without SIMD (above)" >&2
  exit 1
fi
if simd_free dlport_bg; then
  echo "[wasm] dlport_bg.wasm validates without SIMD: it was not built with +simd128" >&2
  exit 1
fi
echo "[wasm] dlport_bg.wasm uses SIMD; dlport_scalar_bg.wasm validates without it"
# The package's other files: the licence texts, and a .gitignore of `*` (the folder is a build
# output wherever it is copied); the README and package.json below.
cp -L LICENSE-MIT LICENSE-APACHE "$new/"
printf '*' > "$new/.gitignore"
NEW=$new python3 - <<'PY'
import json, os, pathlib, shutil, subprocess
new = pathlib.Path(os.environ["NEW"])
# wasm/Cargo.toml's fields, with those it inherits from the workspace filled in by cargo.
meta = json.loads(subprocess.run(
    ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"],
    check=True, capture_output=True, text=True).stdout)
crate = next(c for c in meta["packages"] if c["name"] == "dlport-wasm")
crate_dir = pathlib.Path(crate["manifest_path"]).parent
if crate["readme"]:
    shutil.copyfile(crate_dir / crate["readme"], new / "README.md")
p = new / "package.json"
if p.exists():
    raise SystemExit("[wasm] wasm-bindgen wrote a package.json (npm dependencies of a JS snippet): "
                     "its dependencies belong in the one written here")
license = crate["license"] or (crate["license_file"] and f"SEE LICENSE IN {crate['license_file']}")
# npm ships the files listed here, and package.json, the README and LICENSE/LICENCE[.ext] on
# its own. `sideEffects`: a bundler may leave out any of the package's modules that an app does
# not use, but the snippets.
files = ["dlport_bg.wasm", "dlport.js", "dlport.d.ts"]
if (new / "snippets").is_dir():
    files.append("snippets")
files += ["dlport_scalar_bg.wasm", "ts5/dlport.d.ts", "LICENSE-MIT", "LICENSE-APACHE"]
fields = [
    ("name", "dlport"),
    ("type", "module"),
    ("collaborators", crate["authors"] or None),
    ("description", crate["description"]),
    ("version", crate["version"]),
    ("license", license or None),
    ("repository", crate["repository"] and {"type": "git", "url": crate["repository"]}),
    ("files", files),
    ("main", "dlport.js"),
    ("homepage", crate["homepage"]),
    ("types", "dlport.d.ts"),
    ("sideEffects", ["./snippets/*"]),
    ("keywords", crate["keywords"] or None),
    # The .d.ts names GPUDevice and GPUBuffer. TypeScript's DOM lib declares them from 6.0 on;
    # before, they come from @webgpu/types, which the package depends on and which only those
    # versions load: `typesVersions` sends TypeScript < 6.0 to ts5/dlport.d.ts, which
    # references @webgpu/types and re-exports dlport.d.ts. TypeScript 6.0 and later read
    # dlport.d.ts, which references nothing of WebGPU: both declaring it are "Duplicate
    # identifier 'GPUCommandBufferDescriptor'" and 180 more such errors, with skipLibCheck: false.
    ("dependencies", {"@webgpu/types": "^0.1.60"}),
    ("typesVersions", {"<6.0": {"dlport.d.ts": ["ts5/dlport.d.ts"]}}),
]
pkg = {key: value for key, value in fields if value is not None}
p.write_text(json.dumps(pkg, indent=2) + "\n")
# `Tensor` has `[Symbol.dispose]()` (for `using`). Its type lives in TypeScript's
# esnext.disposable lib, which a default tsconfig (target ES2022/ES2023, lib of the same + DOM)
# lacks: the reference below brings it in (TypeScript >= 5.2), so the package compiles with
# skipLibCheck: false under any such tsconfig, and `using` works where the target allows it.
d = new / "dlport.d.ts"
head = '/// <reference lib="esnext.disposable" />\n'
text = d.read_text()
if not text.startswith(head):
    d.write_text(head + text)
(new / "ts5").mkdir(exist_ok=True)
(new / "ts5" / "dlport.d.ts").write_text(
    "// TypeScript < 6.0 (package.json's typesVersions): its DOM lib has no WebGPU types, so\n"
    "// they come from @webgpu/types; the API is dlport.d.ts's.\n"
    '/// <reference types="@webgpu/types" />\n'
    'export * from "../dlport.js";\n'
    'export { default } from "../dlport.js";\n')

# The default initialisation picks the build: wasm-bindgen's glue falls back to
# `new URL('dlport_bg.wasm', import.meta.url)` when `init()` is given no module, URL or bytes;
# that one line becomes a choice between the two files, each still a literal
# `new URL('…', import.meta.url)`, the form bundlers (Vite, webpack, Parcel) find and emit as
# assets. Any other argument is used as given, as before.
js = new / "dlport.js"
src = js.read_text()
default = "module_or_path = new URL('dlport_bg.wasm', import.meta.url);"
if src.count(default) != 1:
    raise SystemExit(f"[wasm] dlport.js: expected wasm-bindgen's default URL line once, found it "
                     f"{src.count(default)} times: {default}")
src = src.replace(default, (
    "module_or_path = simd128Supported()\n"
    "            ? new URL('dlport_bg.wasm', import.meta.url)\n"
    "            : new URL('dlport_scalar_bg.wasm', import.meta.url);"))
# WebAssembly SIMD (the final proposal, as Rust's simd128 emits it): a module with one
# function `() -> v128` doing `i32.const 0; i8x16.splat; i8x16.popcnt` (the bytes
# wasm-feature-detect uses). Engines without SIMD (Safari < 16.4, old Node) say false.
detect = '''
/**
 * Whether this engine runs WebAssembly SIMD (simd128): the default initialisation then loads
 * `dlport_bg.wasm` (built with SIMD), else `dlport_scalar_bg.wasm`.
 */
function simd128Supported() {
    try {
        return WebAssembly.validate(new Uint8Array([
            0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0,
            65, 0, 253, 15, 253, 98, 11,
        ]));
    } catch {
        return false;
    }
}
'''
marker = "async function __wbg_init("
if src.count(marker) != 1:
    raise SystemExit(f"[wasm] dlport.js: expected {marker!r} once")
src = src.replace(marker, detect.lstrip("\n") + "\n" + marker)
js.write_text(src)
# The init's documentation says which file it loads by default.
text = d.read_text()
doc = " * If `module_or_path` is {RequestInfo} or {URL}, makes a request and"
if text.count(doc) != 1:
    raise SystemExit(f"[wasm] dlport.d.ts: expected the init documentation line once: {doc}")
d.write_text(text.replace(doc, " * Without an argument it loads `dlport_bg.wasm` (WebAssembly SIMD) where the engine\n"
                          " * validates a SIMD module, else `dlport_scalar_bg.wasm`; `wasmBuild()` says which.\n"
                          + doc))
PY
# What `npm publish` would ship: the module, its types, both wasm, the README and the snippet.
files=$(cd "$new" && npm pack --dry-run --json 2>/dev/null \
  | python3 -c 'import json, sys; print(" ".join(sorted(f["path"] for f in json.load(sys.stdin)[0]["files"])))')
for need in dlport.js dlport.d.ts ts5/dlport.d.ts dlport_bg.wasm dlport_scalar_bg.wasm README.md LICENSE-MIT LICENSE-APACHE package.json; do
  case " $files " in *" $need "*) ;; *) echo "[wasm] npm pack lacks $need: $files" >&2; exit 1 ;; esac
done
case "$files" in *snippets/*/js/webgpu.js*) ;; *) echo "[wasm] npm pack lacks the WebGPU snippet: $files" >&2; exit 1 ;; esac
echo "[wasm] npm pack would ship: $files"

limit=100000
declare -A raw gz
for name in dlport_bg.wasm dlport_scalar_bg.wasm; do
  wasm=$new/$name
  raw[$name]=$(stat -c%s "$wasm")
  gz[$name]=$(gzip -9 -c "$wasm" | wc -c)
  echo "[wasm] package dlport: $name is ${raw[$name]} bytes, ${gz[$name]} bytes gzipped (before wasm-opt: ${before_raw[$wasm]}, ${before_gz[$wasm]} gzipped; limit $limit gzipped)"
done
s=dlport_bg.wasm
c=dlport_scalar_bg.wasm
mkdir -p target/bench
# The first keys are the default file's (dlport_bg.wasm, the simd128 build), as before.
printf '{"wasm_bytes": %s, "wasm_gzip_bytes": %s, "before_wasm_opt_bytes": %s, "before_wasm_opt_gzip_bytes": %s, "scalar_wasm_bytes": %s, "scalar_wasm_gzip_bytes": %s, "scalar_before_wasm_opt_bytes": %s, "scalar_before_wasm_opt_gzip_bytes": %s, "gzip_limit_bytes": %s}\n' \
  "${raw[$s]}" "${gz[$s]}" "${before_raw[$new/$s]}" "${before_gz[$new/$s]}" \
  "${raw[$c]}" "${gz[$c]}" "${before_raw[$new/$c]}" "${before_gz[$new/$c]}" "$limit" > target/bench/wasm.json
for name in "$s" "$c"; do
  if (( gz[$name] > limit )); then
    echo "[wasm] $name is ${gz[$name]} bytes gzipped, over the limit of $limit (issue 18: each wasm of the package <= 100 KB gzipped); wasm/pkg is left as it was" >&2
    exit 1
  fi
done

# Into wasm/pkg: the package's files are replaced (the snippets and ts5 folders whole, since
# their contents are the build's), and nothing else there is touched: a tarball made by
# `npm pack` before stays, and is named when it is older than this build.
mkdir -p wasm/pkg
rm -rf wasm/pkg/snippets wasm/pkg/ts5
cp -R "$new/." wasm/pkg/
version=$(node -p 'require("./wasm/pkg/package.json").version')
for tgz in wasm/pkg/*.tgz; do
  [[ -e $tgz ]] || continue
  if [[ $tgz -ot wasm/pkg/dlport_bg.wasm ]]; then
    echo "[wasm] $tgz is from an earlier build (kept): run \`(cd wasm/pkg && npm pack)\` to make dlport-$version.tgz from this one"
  else
    echo "[wasm] $tgz kept"
  fi
done
echo "[wasm] wasm/pkg built in $((SECONDS - started)) s"
