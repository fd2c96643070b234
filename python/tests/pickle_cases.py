"""Tensors of every dtype dlport names, for the pickling tests (python/tests/test_pickle.py and
the engines tests, python/tests/engines): each made by ``dlport.testing.Producer`` over bytes
of its own, so that a test compares the bytes that arrive with the bytes that left, for dtypes
NumPy cannot hold (bfloat16, float8, float6, float4, int4)."""

from __future__ import annotations

import ctypes
from typing import Any, Iterator, List, Tuple

import numpy as np

import dlport
from dlport.testing import DLDataType, Producer

#: (name, (code, bits, lanes), elements): every dtype `dlport.Tensor.dtype` names.
DTYPES: List[Tuple[str, Tuple[int, int, int], int]] = [
    ("bool", (6, 8, 1), 24),
    ("int4", (0, 4, 1), 24),
    ("int8", (0, 8, 1), 24),
    ("int16", (0, 16, 1), 24),
    ("int32", (0, 32, 1), 24),
    ("int64", (0, 64, 1), 24),
    ("uint4", (1, 4, 1), 24),
    ("uint8", (1, 8, 1), 24),
    ("uint16", (1, 16, 1), 24),
    ("uint32", (1, 32, 1), 24),
    ("uint64", (1, 64, 1), 24),
    ("float16", (2, 16, 1), 24),
    ("float32", (2, 32, 1), 24),
    ("float64", (2, 64, 1), 24),
    ("bfloat16", (4, 16, 1), 24),
    ("complex64", (5, 64, 1), 24),
    ("complex128", (5, 128, 1), 24),
    ("float8_e3m4", (7, 8, 1), 24),
    ("float8_e4m3", (8, 8, 1), 24),
    ("float8_e4m3b11fnuz", (9, 8, 1), 24),
    ("float8_e4m3fn", (10, 8, 1), 24),
    ("float8_e4m3fnuz", (11, 8, 1), 24),
    ("float8_e5m2", (12, 8, 1), 24),
    ("float8_e5m2fnuz", (13, 8, 1), 24),
    ("float8_e8m0fnu", (14, 8, 1), 24),
    ("float6_e2m3fn", (15, 6, 1), 24),
    ("float6_e3m2fn", (16, 6, 1), 24),
    ("float4_e2m1fn", (17, 4, 1), 24),
    ("float4_e2m1fn_x2", (17, 4, 2), 24),
    ("bcomplex32", (18, 32, 1), 24),
]


def make(name: str, seed: int = 0, shape: Tuple[int, ...] = (4, 6)) -> Tuple[dlport.Tensor, bytes]:
    """A row-major `dlport.Tensor` of dtype `name` (a view of bytes it owns) and those bytes."""
    (code, bits, lanes), n = next((c, n) for nm, c, n in DTYPES if nm == name)
    count = int(np.prod(shape))
    assert count == n or shape != (4, 6)
    nbytes = (count * bits * lanes + 7) // 8
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    if name == "bool":
        data &= 1
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    p = Producer(data, shape=shape, strides=strides, dtype=DLDataType(code, bits, lanes), versioned=True)
    t = dlport.from_dlpack(p)
    assert t.dtype == name, (t.dtype, name)
    return t, data.tobytes()


def all_dtypes() -> Iterator[str]:
    """The names of :data:`DTYPES`."""
    return (name for name, _, _ in DTYPES)


def raw(t: dlport.Tensor) -> bytes:
    """The bytes of a row-major compact host tensor, read at its address (not through pickle)."""
    return ctypes.string_at(t.data_ptr(), t.nbytes) if t.nbytes else b""


def roundtrip_in_worker(t: dlport.Tensor) -> Tuple[str, Tuple[int, ...], bytes, bool, Any]:
    """A worker's view of a tensor it was sent: dtype, shape, bytes, read-only, the tensor."""
    return t.dtype, t.shape, raw(t), t.readonly, t
