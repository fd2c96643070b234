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
from typing import Any, List, Optional

from ._native import PjrtBuffer, PjrtClient, PjrtExecutable, pjrt_load

__all__ = [
    "PjrtBuffer", "PjrtClient", "PjrtExecutable", "load", "plugin_path", "plugin_paths", "plugins", "probe",
]

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
    """Loads a PJRT plugin (a path to a library file, or an installed plugin package's name)
    and creates a client. ``device_type`` (a DLPack code) names the device type of the
    plugin's memory; without it the platform name decides (``"cpu"`` kDLCPU, ``"cuda"``
    kDLCUDA, ``"METAL"``/``"mtl"`` kDLMetal, ...), and a name dlport does not know is
    kDLExtDev (12).

    A path is loaded as the absolute path of the file that exists (the dynamic loader never
    searches for it); a name that is no file is a package name, whose candidate libraries are
    tried in order until one loads."""
    p = os.fspath(path_or_name)
    if os.path.isfile(p):
        return pjrt_load(os.path.abspath(p), device_type=device_type)
    failures = []
    for candidate in plugin_paths(p):
        try:
            return pjrt_load(candidate, device_type=device_type)
        except BufferError as e:
            failures.append(f"{candidate}: {e}")
    raise BufferError(f"no candidate library of the plugin package {p!r} loads: " + "; ".join(failures))


_IDENTITY = """
func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}
"""


def _outcome(call: Any) -> tuple[Any, str]:
    """``(result, "")`` of ``call()``, or ``(None, the error's type and message)``."""
    try:
        return call(), ""
    except Exception as e:  # noqa: BLE001 - every failure is an answer of the plugin's
        return None, f"{type(e).__name__}: {e}"


def probe(path_or_name: str | os.PathLike[str]) -> str:
    """What a PJRT plugin offers and what dlport does with it, found by calling it
    (``python -m dlport pjrt PATH_OR_NAME`` prints it): the API version, ``struct_size`` and
    extensions; the devices; the functions dlport uses, each called (a function that is
    present but fails is no implementation); for each direction, a view, one copy or a
    refusal, and why."""
    import numpy as np

    from . import from_dlpack as dlport_from_dlpack
    from .testing import aligned

    client = load(path_or_name)
    major, minor = client.api_version
    exts = ", ".join(f"{name or f'type {t} (newer than the header dlport reads)'} ({size} B)"
                     for t, name, size in client.extensions) or "none"
    lines = [
        f"plugin: {os.fspath(path_or_name)}",
        f"PJRT API {major}.{minor}, struct_size {client.struct_size}",
        f"extensions: {exts}",
        f"platform: {client.platform!r}, DLPack device type {client.device_type}",
        f"devices: {', '.join(f'({t}, {i})' for t, i in client.devices) or 'none'}",
        "missing: " + ("; ".join(client.missing) or "nothing dlport uses"),
        "functions, called:",
    ]
    host = aligned(6, np.float32)
    host[:] = np.arange(6, dtype=np.float32)
    host = host.reshape(2, 3)
    copied, why = _outcome(lambda: client.from_dlpack(host, copy=True))
    lines.append(f"  PJRT_Client_BufferFromHostBuffer: {'works' if copied is not None else why}")
    view, why = _outcome(lambda: client.from_dlpack(host, copy=False))
    works = view is not None and view.data_ptr == host.ctypes.data
    lines.append(f"  PJRT_Client_CreateViewOfDeviceBuffer: {'works (a view of host memory)' if works else why or 'a copy'}")
    some = view if view is not None else copied
    if some is not None:
        out, why = _outcome(lambda: dlport_from_dlpack(some))
        by_ref = out is not None and out.data_ptr() == some.data_ptr
        lines.append("  PJRT_Buffer_IncreaseExternalReferenceCount, OpaqueDeviceMemoryDataPointer: "
                     + ("works (the buffer's own memory)" if by_ref else why or "a copy"))
        exe, why = _outcome(lambda: client.compile(_IDENTITY))
        lines.append(f"  PJRT_Client_Compile: {'works' if exe is not None else why}")
        if exe is not None:
            res, why = _outcome(lambda: exe.execute(some))
            lines.append(f"  PJRT_LoadedExecutable_Execute: {'works' if res is not None else why}")
    lines.append("what dlport does:")
    frozen = aligned(6, np.float32).reshape(2, 3)
    frozen[...] = host
    frozen.flags.writeable = False
    cases = [
        ("host memory, 64-byte aligned, writable", host),
        ("host memory, 4 bytes off 64-byte alignment", aligned(7, np.float32)[1:].reshape(2, 3)),
        ("host memory, READ_ONLY", frozen),
    ]
    for what, x in cases:
        v, refusal = _outcome(lambda: client.from_dlpack(x, copy=False))
        if v is not None and v.data_ptr == x.ctypes.data:
            lines.append(f"  {what} -> PJRT: a view")
            continue
        c, why = _outcome(lambda: client.from_dlpack(x))
        done = "one copy" if c is not None else f"refused: {why}"
        lines.append(f"  {what} -> PJRT: {done} ({refusal or 'the plugin made a copy'})")
    if some is not None:
        t, why = _outcome(lambda: dlport_from_dlpack(some))
        if t is not None:
            how = "by reference" if t.data_ptr() == some.data_ptr else "one copy"
            lines.append(f"  PJRT buffer -> DLPack: {how}, as {t.device}")
        else:
            lines.append(f"  PJRT buffer -> DLPack: refused: {why}")
    return "\n".join(lines)
