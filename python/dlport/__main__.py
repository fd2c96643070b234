"""``python -m dlport``: what this dlport is and what it found here, to paste into a bug report."""

import sys

from . import __dlpack_version__, __version__, backends
from ._native import _about


def report() -> str:
    """The lines ``python -m dlport`` prints."""
    about = _about()
    major, minor = __dlpack_version__
    lines = [f"dlport {__version__}", f"DLPack {major}.{minor}", "backends:"]
    for name, types in about["backends"]:
        if name == "plugins":  # the door to the plugin table, listed below
            continue
        lines.append(f"  {name}: {', '.join(types) or '(no device type of its own)'}")
    plugins = [b for b in backends() if b["kind"] == "plugin"]
    lines.append("plugins:" + ("" if plugins else " none loaded (dlport.load_plugin(path) loads one)"))
    for b in plugins:
        types = ", ".join(str(t) for t in b["device_types"])
        lines.append(f"  {b['name']}: device types {types}, from {b['origin']}")
    found, detail = about["cuda"]
    lines.append(f"CUDA driver: {'found, ' if found else 'not found: '}{detail}")
    abi3 = about["abi3"]
    floor = f"abi3 (CPython >= {abi3})" if abi3 else "no stable ABI"
    features = ", ".join(about["features"]) or "none"
    lines.append(f"build: {floor}, {about['profile']}, features: {features}")
    lines.append(f"Python {sys.version.split()[0]} ({sys.platform})")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "pjrt":
        # python -m dlport pjrt PATH_OR_NAME: what a PJRT plugin offers (dlport.pjrt.probe).
        from .pjrt import probe

        print(probe(sys.argv[2]))
    elif len(sys.argv) > 1:
        sys.exit("usage: python -m dlport [pjrt PATH_OR_NAME]")
    else:
        print(report())
