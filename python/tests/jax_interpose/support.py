"""What the cases of python/tests/jax_interpose share: the stand-in vendor (the XLA CPU plugin
at DLPORT_PJRT_PLUGIN behind a table answering "xpu"), small helpers (the plugin's path and the
StableHLO program from python/tests/pjrt_plugin.py), and the case registry."""

import os
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))  # python/tests: pjrt_plugin.py
from pjrt_plugin import AFFINE, PLUGIN  # noqa: E402, F401  (AFFINE: for the cases)


def vendor(name="xpu", install=True, device_type=1, stubs=()):
    """Registers the stand-in vendor as ``name`` and, when ``install``, dlport's table over it."""
    import dlport.jax

    dlport.jax.stand_in(name, PLUGIN, stubs=stubs)
    if install:
        dlport.jax.install(name, device_type=device_type)


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def aligned(values, align=64):
    raw = np.empty(values.nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    out = raw[start : start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def expect(exc, f, *words):
    try:
        f()
    except exc as e:
        for w in words:
            assert w in str(e), f"{w!r} not in {e!r}"
        return str(e)
    raise AssertionError(f"{f} did not raise {exc.__name__}")


CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f
