"""PJRT plugins as DLPack devices.

Any library that speaks PJRT's C API (``GetPjrtApi``) -- XLA's CPU plugin, ``jax-cuda12-pjrt``,
``jax-rocm7-pjrt``, ``jax-oneapi-pjrt`` and the other vendors' -- gets DLPack both ways, with no
code from its vendor::

    import numpy as np, dlport.pjrt
    client = dlport.pjrt.load("xla_cpu_pjrt")          # a package name, or a path to the .so
    buf = client.from_dlpack(x)                         # any DLPack producer; a view if possible
    y = np.from_dlpack(buf)                             # any DLPack consumer; never a copy

``load`` takes a path to the plugin library, or the name of an installed Python package that
registers one under the ``jax_plugins`` or ``xla_plugins`` entry points.
"""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata
from pathlib import Path

from ._native import PjrtBuffer, PjrtClient, PjrtExecutable, pjrt_load

__all__ = ["PjrtBuffer", "PjrtClient", "PjrtExecutable", "load", "plugin_path", "plugins"]

_GROUPS = ("jax_plugins", "xla_plugins")


def plugins() -> dict[str, str]:
    """The PJRT plugins installed as Python packages: entry-point name -> module."""
    found: dict[str, str] = {}
    every = metadata.entry_points()
    for group in _GROUPS:
        # CPython 3.10+ selects by group; 3.9's entry_points() is a dict of groups.
        eps = every.select(group=group) if hasattr(every, "select") else every.get(group, ())
        for ep in eps:
            found.setdefault(ep.name, ep.value)
    return found


def plugin_path(name: str) -> str:
    """The plugin library of an installed package registered under ``jax_plugins`` or
    ``xla_plugins`` as ``name``: the shared library in the package's directory."""
    module = plugins().get(name)
    if module is None:
        raise LookupError(
            f"no PJRT plugin package named {name!r} (entry points {', '.join(_GROUPS)}): "
            f"installed: {sorted(plugins()) or 'none'}; pass a path to the library instead"
        )
    # Find the package's directory without running it (a jax plugin's __init__ may import jax).
    spec = importlib.util.find_spec(module.split(":")[0])
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"the plugin package {module!r} has no directory to search")
    libs = sorted(
        p
        for d in spec.submodule_search_locations
        for p in Path(d).rglob("*.so")
        if "pjrt" in p.name or len(list(Path(d).rglob("*.so"))) == 1
    )
    if not libs:
        raise LookupError(f"the plugin package {module!r} has no shared library")
    return str(libs[0])


def load(path_or_name: str | os.PathLike[str], *, device_type: int | None = None) -> PjrtClient:
    """Loads a PJRT plugin (a library path, or an installed plugin package's name) and
    creates a client. ``device_type`` (a DLPack code) names the device type of a platform
    dlport does not know by name."""
    p = os.fspath(path_or_name)
    if not os.path.exists(p):
        p = plugin_path(p)
    return pjrt_load(p, device_type=device_type)
