"""Reads `cargo metadata --all-features` on stdin; see scripts/msrv-check.sh.

Per published crate: the dependencies every build has (the non-optional ones, transitively)
need no newer Rust than the crate's `rust-version`; each feature that brings optional
dependencies needs no newer Rust than it declares: the crate's `rust-version`, or the version
under `[package.metadata.dlport.rust-version]` (core's `burn = "1.95"`), which its doc comment
and README say too. The table of what each feature needs is printed."""
import json
import sys

m = json.load(sys.stdin)
pkgs = {p["id"]: p for p in m["packages"]}
nodes = {n["id"]: n for n in m["resolve"]["nodes"]}
EDITION_MIN = {"2015": "1.0", "2018": "1.31", "2021": "1.56", "2024": "1.85"}


def ver(s):
    parts = [int(x) for x in s.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


MEMBERS = set(m["workspace_members"])


def optional_of(pkg):
    return {d.get("rename") or d["name"] for d in pkg["dependencies"] if d["optional"]}


def direct_of(pkg):
    """The resolved non-dev dependencies of a package, by package name."""
    out = {}
    for d in nodes[pkg["id"]]["deps"]:
        if not all(k["kind"] == "dev" for k in d["dep_kinds"]):
            out.setdefault(pkgs[d["pkg"]]["name"], []).append(d["pkg"])
    return out


def enabled(pkg, feature, seen=None):
    """The optional dependencies a feature of `pkg` turns on, through the features it enables."""
    seen = set() if seen is None else seen
    if feature in seen or feature not in pkg["features"]:
        return set()
    seen.add(feature)
    out, optional = set(), optional_of(pkg)
    for entry in pkg["features"][feature]:
        dep = entry[4:] if entry.startswith("dep:") else entry.split("/")[0]
        if dep.endswith("?"):
            continue  # a weak dependency feature turns nothing on
        if dep in optional:
            out.add(dep)
        if entry in pkg["features"]:
            out |= enabled(pkg, entry, seen)
    return out


def member_deps(pkg, features):
    """A workspace member's dependencies under `features` (cargo metadata --all-features
    resolves every member with all of its features; a dependent gets only what it asks)."""
    direct, optional = direct_of(pkg), optional_of(pkg)
    on = set()
    for f in features:
        on |= enabled(pkg, f)
    return [i for n, ids in direct.items() if n not in optional or n in on for i in ids]


def asked(dependent, dep_pkg):
    """The features `dependent` asks of the member `dep_pkg` (its default ones included)."""
    for d in dependent["dependencies"]:
        if d["name"] == dep_pkg["name"] and d["kind"] in (None, "normal", "build"):
            return set(d["features"]) | ({"default"} if d["uses_default_features"] else set())
    return {"default"}


def closure(starts, parent):
    """The newest rust-version among `starts` (dependencies of `parent`) and their non-dev
    dependencies, and how many there are."""
    seen, stack, worst = set(starts), [(s, parent) for s in starts], ("0", "none")
    while stack:
        pid, via = stack.pop()
        p = pkgs[pid]
        rv, who = p["rust_version"], f"{p['name']} {p['version']}"
        if rv and ver(rv) > ver(worst[0]):
            worst = (rv, who)
        if pid in MEMBERS:
            nxt = member_deps(p, asked(pkgs[via], p))
        else:
            nxt = [i for ids in direct_of(p).values() for i in ids]
        for d in nxt:
            if d not in seen:
                seen.add(d)
                stack.append((d, pid))
    return worst, len(seen)


bad = 0
# dlport-capi too: not published, but C users build it with their own toolchain.
for name in ("dlport-core", "dlport-native", "dlport-capi", "dlport-wasm"):
    root = next(i for i, p in pkgs.items() if p["name"] == name)
    pkg = pkgs[root]
    msrv = pkg["rust_version"]
    if msrv is None:
        print(f"[msrv] {name}: no rust-version declared")
        bad += 1
        continue
    declared = ((pkg.get("metadata") or {}).get("dlport") or {}).get("rust-version") or {}
    optional = optional_of(pkg)
    direct = direct_of(pkg)
    always = [i for n, ids in direct.items() if n not in optional for i in ids]
    worst, count = closure(always, root)
    if ver(worst[0]) > ver(msrv):
        print(f"[msrv] {name} declares {msrv}, but {worst[1]} (needed by every build) needs {worst[0]}")
        bad += 1
    edition = pkg["edition"]
    if ver(EDITION_MIN[edition]) > ver(msrv):
        print(f"[msrv] {name} declares {msrv}, but edition {edition} needs {EDITION_MIN[edition]}")
        bad += 1
    print(
        f"[msrv] {name}: rust-version {msrv}; newest requirement among the {count} dependencies "
        f"of every build: {worst[0]} ({worst[1]}); edition {edition} needs {EDITION_MIN[edition]}"
    )

    for feature in sorted(pkg["features"]):
        deps = enabled(pkg, feature)
        if not deps:
            continue
        starts = always + [i for d in deps for i in direct.get(d, [])]
        fworst, _ = closure(starts, root)
        want = declared.get(feature, msrv)
        ok = ver(fworst[0]) <= ver(want)
        print(
            f"[msrv]   feature {feature}: needs {max(fworst[0], msrv, key=ver)} ({fworst[1]}); declares "
            f"{want}{'' if feature not in declared else ' ([package.metadata.dlport.rust-version])'}"
            f"{'' if ok else '  <- FAILED'}"
        )
        if not ok:
            print(
                f"[msrv] {name}: feature {feature} needs Rust {fworst[0]} ({fworst[1]}) but the crate "
                f"declares {want}: raise rust-version or declare it under "
                f"[package.metadata.dlport.rust-version] (and say so in the feature's doc comment)"
            )
            bad += 1
    for feature in declared:
        if feature not in pkg["features"]:
            print(f"[msrv] {name}: [package.metadata.dlport.rust-version] names {feature}, not a feature")
            bad += 1
sys.exit(1 if bad else 0)
