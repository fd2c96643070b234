"""Reads `cargo metadata` on stdin; see scripts/msrv-check.sh."""
import json
import sys

m = json.load(sys.stdin)
pkgs = {p["id"]: p for p in m["packages"]}
nodes = {n["id"]: n for n in m["resolve"]["nodes"]}
EDITION_MIN = {"2015": "1.0", "2018": "1.31", "2021": "1.56", "2024": "1.85"}


def ver(s):
    parts = [int(x) for x in s.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


bad = 0
# dlport-capi too: not published, but C users build it with their own toolchain.
for name in ("dlport-core", "dlport-native", "dlport-capi", "dlport-wasm"):
    root = next(i for i, p in pkgs.items() if p["name"] == name)
    msrv = pkgs[root]["rust_version"]
    if msrv is None:
        print(f"[msrv] {name}: no rust-version declared")
        bad += 1
        continue
    seen, stack, worst = set(), [root], ("0", "none")
    while stack:
        for d in nodes[stack.pop()]["deps"]:
            if all(k["kind"] == "dev" for k in d["dep_kinds"]) or d["pkg"] in seen:
                continue
            seen.add(d["pkg"])
            stack.append(d["pkg"])
            p = pkgs[d["pkg"]]
            rv, who = p["rust_version"], f"{p['name']} {p['version']}"
            if rv and ver(rv) > ver(worst[0]):
                worst = (rv, who)
            if rv and ver(rv) > ver(msrv):
                print(f"[msrv] {name} declares {msrv}, but {who} needs {rv}")
                bad += 1
    edition = pkgs[root]["edition"]
    if ver(EDITION_MIN[edition]) > ver(msrv):
        print(f"[msrv] {name} declares {msrv}, but edition {edition} needs {EDITION_MIN[edition]}")
        bad += 1
    print(
        f"[msrv] {name}: rust-version {msrv}; newest requirement among its {len(seen)} "
        f"dependencies: {worst[0]} ({worst[1]}); edition {edition} needs {EDITION_MIN[edition]}"
    )
sys.exit(1 if bad else 0)
