"""Shared helpers for the dlport package tests."""

import gc
import importlib.util

import numpy as np
import pytest

# NumPy 2.1 and later speak DLPack 1.x: versioned capsules (`max_version`), the READ_ONLY flag,
# `from_dlpack(x, copy=..., device=...)`. NumPy 2.0, the last release for CPython 3.9, exports
# legacy capsules only, refuses to export read-only arrays and imports every tensor read-only:
# tests of those exchanges with NumPy itself need 2.1.
needs_numpy_dlpack_1 = pytest.mark.skipif(
    np.lib.NumpyVersion(np.__version__) < "2.1.0",
    reason="NumPy < 2.1 speaks legacy DLPack only (no max_version, READ_ONLY or copy)",
)

# python/tests/engines needs Ray and Dask: scripts/engines-test.sh runs it in a venv of its own
# (the peers' venv, python/requirements-peers.txt); elsewhere it is not collected.
collect_ignore = [] if importlib.util.find_spec("ray") and importlib.util.find_spec("distributed") else ["engines"]


def collect():
    """Runs the garbage collector twice (capsules and arrays in cycles go in the first pass)."""
    gc.collect()
    gc.collect()
