#!/usr/bin/env python3
"""core/README.md's adapter table names the versions each adapter takes: every foreign crate
below appears there as `name = "requirement"` (the requirement of its Cargo.toml, verbatim)
followed by the semver range that requirement allows, e.g. `ndarray = "0.17.2"` (>= 0.17.2,
< 0.18). Fails, naming the crate, the manifest and the text it expects, when a requirement
changes and the table does not. Usage: scripts/adapter-versions-check.py (from anywhere)."""
import pathlib
import re
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
readme = root / "core" / "README.md"
# The foreign crates whose types the adapters (and the always-on element types) take, and the
# manifest that requires each.
crates = {
    "ndarray": "core/Cargo.toml",
    "image": "core/Cargo.toml",
    "candle-core": "core/Cargo.toml",
    "float8": "core/Cargo.toml",
    "burn-std": "core/Cargo.toml",
    "half": "core/Cargo.toml",
    "bytemuck": "core/Cargo.toml",
    "cudarc": "native/Cargo.toml",
    "pyo3": "python/pyo3/Cargo.toml",
}


def requirement(manifest: dict, name: str) -> str | None:
    tables = [manifest.get("dependencies", {})]
    tables += [t.get("dependencies", {}) for t in manifest.get("target", {}).values()]
    for table in tables:
        dep = table.get(name)
        if isinstance(dep, str):
            return dep
        if isinstance(dep, dict) and "version" in dep:
            return dep["version"]
    return None


def allowed(req: str) -> str:
    """The range a single caret or exact requirement allows, as the table writes it."""
    if req.startswith("="):
        return f"exactly {req[1:]}"
    parts = [int(p) for p in req.lstrip("^").split(".")]
    if parts[0] > 0:
        upper = f"{parts[0] + 1}"
    elif len(parts) > 1 and parts[1] > 0:
        upper = f"0.{parts[1] + 1}"
    else:
        upper = f"0.0.{parts[2] + 1}" if len(parts) > 2 else "0.1"
    return f">= {req.lstrip('^')}, < {upper}"


text = readme.read_text()
failures = []
for name, path in crates.items():
    manifest = tomllib.loads((root / path).read_text())
    req = requirement(manifest, name)
    if req is None:
        failures.append(f"{name}: no requirement in {path} (update this check's list)")
        continue
    want = f'`{name} = "{req}"` ({allowed(req)}'
    if not re.search(re.escape(want) + r"[):]", text):
        failures.append(f"{name}: {path} requires {req!r}; core/README.md lacks: {want})")
    else:
        print(f"[adapter-versions] {name} {req!r} ({allowed(req)}): in core/README.md")
if failures:
    sys.exit("[adapter-versions] FAILED:\n  " + "\n  ".join(failures))
