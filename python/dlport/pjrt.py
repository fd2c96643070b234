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

import importlib.machinery
import os
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, List, Optional, TypeVar

from ._native import PjrtBuffer, PjrtClient, PjrtExecutable, _pjrt_probe, pjrt_load

__all__ = [
    "PjrtBuffer", "PjrtClient", "PjrtExecutable", "load", "plugin_path", "plugin_paths", "plugins", "probe",
]

_GROUPS = ("jax_plugins", "xla_plugins")
T = TypeVar("T")


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


def _locate(module: str) -> Any:
    """The spec of ``module`` (dotted or not) found without importing it or its parents: each
    level is looked up in the directories of the level above (a plugin package's
    ``__init__`` may import jax, and nothing is run to find a library)."""
    parts = module.split(".")
    spec = None
    path: Optional[List[str]] = None
    for i in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), path)
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or [])
        if i + 1 < len(parts) and not path:
            return None
    return spec


def plugin_paths(name: str) -> List[str]:
    """The candidate plugin libraries of an installed package registered under
    ``jax_plugins`` or ``xla_plugins`` as ``name``, in the order :func:`load` tries them: for a
    package, its shared libraries with "pjrt" in their name (or its only one), shallowest
    first; for a module, those beside it. Nothing of the package is imported."""
    module = plugins().get(name)
    if module is None:
        raise LookupError(
            f"no PJRT plugin package named {name!r} (entry points {', '.join(_GROUPS)}): "
            f"installed: {sorted(plugins()) or 'none'}; pass a path to the library instead"
        )
    spec = _locate(module.split(":")[0].strip())
    if spec is None:
        raise LookupError(f"the plugin entry point {module!r} names no module that can be found")
    if spec.submodule_search_locations:
        libs = [p for d in spec.submodule_search_locations for p in Path(d).rglob("*.so")]
    elif spec.origin:
        libs = list(Path(spec.origin).parent.glob("*.so"))
    else:
        libs = []
    libs = sorted({p.absolute() for p in libs if p.is_file()}, key=lambda p: (len(p.parts), str(p)))
    named = [p for p in libs if "pjrt" in p.name]
    found = named or (libs if len(libs) == 1 else [])
    if not found:
        raise LookupError(
            f"the plugin package {module!r} has no shared library with 'pjrt' in its name"
            f"{'' if not libs else ' among ' + ', '.join(p.name for p in libs)}"
        )
    return [str(p) for p in found]


def plugin_path(name: str) -> str:
    """The first candidate of :func:`plugin_paths`."""
    return plugin_paths(name)[0]


def load(path_or_name: str | os.PathLike[str], *, device_type: int | None = None) -> PjrtClient:
    """Loads a PJRT plugin (a path to a library file, or an installed plugin package's name),
    creates a client and registers it as a backend of dlport's registry (``pjrt:<platform>``,
    listed by :func:`dlport.backends`; a later client of the same platform takes its place),
    whose rules then decide its imports and exports. ``device_type`` (a DLPack code) names the device type of the
    plugin's memory; without it the platform name decides (``"cpu"`` kDLCPU, ``"cuda"``
    kDLCUDA, ``"METAL"``/``"mtl"`` kDLMetal, ...), and a name dlport does not know is
    kDLExtDev (12).

    A path is loaded as the absolute path of the file that exists (the dynamic loader never
    searches for it); a name that is no file is a package name, whose candidate libraries are
    tried in order until one loads."""
    return _first(path_or_name, lambda path: pjrt_load(path, device_type=device_type))


def probe(path_or_name: str | os.PathLike[str]) -> str:
    """What a PJRT plugin offers and what dlport does with it, found by calling it
    (``python -m dlport pjrt PATH_OR_NAME`` prints it): dlport-native's probe, the same report
    as C's ``dlport_pjrt_probe`` and the Rust example ``pjrt_probe``, one ``key: verdict — why``
    line each: the API version, ``struct_size`` and extensions; the platform, devices and
    memory kinds; each function dlport uses, called (a function that is present but answers
    ``UNIMPLEMENTED`` is ``not implemented``); the dtype table, each type tried as a view and as
    a copy; for each direction, a view, one copy or a refusal, and why. The plugin is found as
    :func:`load` finds it."""
    return _first(path_or_name, _pjrt_probe).rstrip("\n")


def _first(path_or_name: str | os.PathLike[str], call: Callable[[str], T]) -> T:
    """``call`` on the absolute path of ``path_or_name`` where it is a file, else on each
    candidate library of the plugin package of that name in turn, until one loads."""
    p = os.fspath(path_or_name)
    if os.path.isfile(p):
        return call(os.path.abspath(p))
    failures = []
    for candidate in plugin_paths(p):
        try:
            return call(candidate)
        except BufferError as e:
            failures.append(f"{candidate}: {e}")
    raise BufferError(f"no candidate library of the plugin package {p!r} loads: " + "; ".join(failures))
