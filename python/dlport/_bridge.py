"""``dlport.to_numpy`` and ``dlport.to_jax``: the dtypes a framework's own DLPack cannot carry.

NumPy has no bfloat16, float8, float6, float4 or int4 dtype, so ``numpy.from_dlpack`` refuses
them ("Unsupported dtype in DLTensor"), and NumPy's ``__dlpack__`` refuses every ml_dtypes array
("DLPack only supports signed/unsigned integers, float and complex dtypes"). JAX has those
dtypes, but its DLPack has no sub-byte one ("XLA type S4 has no DLPack equivalent"). ml_dtypes
gives NumPy the dtypes, and JAX takes ml_dtypes arrays through ``jax.device_put``. So:

- ``to_numpy(x)``: an ml_dtypes array of a dlport tensor (or any producer ``dlport.from_dlpack``
  takes). Whole-byte types (bfloat16, float8) are a view of the same memory, READ_ONLY kept;
  sub-byte types (packed in DLPack, one element a byte in ml_dtypes) are unpacked in one copy.
  An array whose producer has no DLPack for its dtype (a JAX int4 array) is taken through its
  ``__array__``: one copy, JAX's own transfer.
- ``to_jax(x)``: a ``jax.Array``. Whatever JAX's DLPack takes goes through it
  (``jax.dlpack.from_dlpack(dlport.from_dlpack(x, layout="compact", align=64))``: a view, or the
  one copy a layout needs); a sub-byte tensor or an ml_dtypes NumPy array goes through
  ``jax.device_put``, which copies once.

``copy=False`` refuses where a copy would be needed, naming why. Every copy these functions make
is counted (:func:`copies`), so a test can check that a call made exactly the copies it says.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ._errors import DLPackBufferError, DLPackTypeError
from ._native import Tensor, alloc_limit, from_dlpack

#: DLPack dtypes whose elements are whole bytes and that NumPy lacks (ml_dtypes has each).
WHOLE_BYTE = frozenset(
    [
        "bfloat16",
        "float8_e3m4",
        "float8_e4m3",
        "float8_e4m3b11fnuz",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    ]
)
#: Sub-byte dtypes and their bits: packed in DLPack, one element a byte in ml_dtypes.
SUB_BYTE = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6}

# The binding's error numbers (python/README.md): a copy refused, an argument of the wrong kind,
# the allocation limit.
_COPY_REFUSED = 25
_WRONG_KIND = 1003
_ALLOC_LIMIT = 37

_copies = 0


def copies() -> int:
    """How many copies ``to_numpy`` and ``to_jax`` made in this process (``dlport.from_dlpack``'s
    own copies are told by ``Tensor.copied``)."""
    return _copies


def _count() -> None:
    global _copies
    _copies += 1


def _reserve(nbytes: int, what: str) -> None:
    """The process's allocation limit (``dlport.set_alloc_limit``) bounds the copies NumPy or JAX
    make here as it bounds dlport's own: checked before the copy, with dlport's error."""
    limit = alloc_limit()
    if nbytes > limit:
        raise DLPackBufferError(
            f"{what} needs {nbytes} bytes, above the allocation limit of {limit} bytes; nothing "
            f"was allocated: raise it with dlport.set_alloc_limit or use a smaller tensor",
            _ALLOC_LIMIT,
        )


def _ml_dtypes(dtype: str) -> Any:
    try:
        import ml_dtypes
    except ImportError as e:
        raise DLPackTypeError(
            f"NumPy has no {dtype} dtype and ml_dtypes, which adds it, is not installed: "
            f"pip install ml_dtypes",
            _WRONG_KIND,
        ) from e
    import numpy as np

    return np.dtype(getattr(ml_dtypes, dtype))


def _ml_named(x: Any) -> bool:
    """The array's dtype is one of the ml_dtypes types NumPy lacks."""
    dtype = str(getattr(x, "dtype", ""))
    return dtype in SUB_BYTE or dtype in WHOLE_BYTE


def _refuse_copy(what: str) -> DLPackBufferError:
    return DLPackBufferError(f"a copy would be needed, but copy=False: {what}", _COPY_REFUSED)


class _Bytes:
    """The raw bytes of a host tensor as NumPy's array interface (keeps the tensor alive as the
    array's base)."""

    def __init__(
        self, t: Tensor, itemsize: int, shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]]
    ) -> None:
        self.tensor = t
        self.__array_interface__ = {
            "version": 3,
            "data": (t.data_ptr(), t.readonly),
            "shape": shape,
            "strides": strides,
            "typestr": f"<u{itemsize}",
        }


def _host(t: Tensor) -> None:
    if t.device != "cpu":
        raise DLPackBufferError(
            f"to_numpy takes host memory; this tensor is on {t.device}: "
            f"dlport.from_dlpack(x, device='cpu') copies it first",
            _COPY_REFUSED,
        )


def to_numpy(x: Any, /, *, copy: Optional[bool] = None) -> Any:
    """A NumPy array of ``x`` (a ``dlport.Tensor`` or any producer ``dlport.from_dlpack`` takes),
    with an ml_dtypes dtype for the types NumPy lacks: a view for whole-byte types (READ_ONLY
    kept), one copy for sub-byte ones (unpacked), ``copy=True`` always one copy."""
    import numpy as np

    if isinstance(x, np.ndarray) and _ml_named(x):
        # Already an ml_dtypes array (NumPy's own __dlpack__ refuses it).
        if copy:
            _reserve(x.nbytes, "to_numpy(copy=True)")
            _count()
            return x.copy()
        return x
    if isinstance(x, Tensor):
        t = x
    else:
        try:
            # copy=True is this function's one copy below, not a second one here.
            t = from_dlpack(x, copy=False if copy is False else None)
        except BufferError:
            dtype = str(getattr(x, "dtype", ""))
            if not _ml_named(x) or not hasattr(x, "__array__"):
                raise
            # The producer has no DLPack for this dtype (JAX: "XLA type S4 has no DLPack
            # equivalent"): its own transfer to NumPy, one copy.
            if copy is False:
                raise _refuse_copy(f"{type(x).__name__} has no DLPack export of {dtype}; its __array__ copies")
            _reserve(int(getattr(x, "nbytes", 0)), f"to_numpy of a {dtype} array")
            a = np.asarray(x)
            _count()
            return a
        if t.copied:
            _count()
            copy = None  # the copy is made: it is the one asked for
    dtype = t.dtype
    if dtype in SUB_BYTE:
        if copy is False:
            raise _refuse_copy(f"{dtype} is packed in DLPack and one element a byte in ml_dtypes: unpacking copies")
        return _unpack(t, SUB_BYTE[dtype], _ml_dtypes(dtype))
    if dtype in WHOLE_BYTE:
        _host(t)
        itemsize = 1 if dtype.startswith("float8") else 2
        strides = tuple(s * itemsize for s in t.strides)
        a = np.asarray(_Bytes(t, itemsize, t.shape, strides)).view(_ml_dtypes(dtype))
    else:
        a = np.from_dlpack(t)
    if copy:
        _reserve(a.nbytes, "to_numpy(copy=True)")
        a = a.copy()
        _count()
    return a


def _unpack(t: Tensor, bits: int, dtype: Any) -> Any:
    """One copy: the packed elements (little bit-endian, DLPack's order) one a byte."""
    import numpy as np

    _host(t)
    c = t.compact(align=1)  # itself when already row-major compact
    if c.data_ptr() != t.data_ptr():
        _count()
    n = 1
    for e in c.shape:
        n *= e
    # The unpacking holds the bit stream and its weighted copy (a byte a bit) and the result.
    _reserve(n * (2 * bits + 1), f"unpacking {n} {t.dtype} elements")
    raw = np.asarray(_Bytes(c, 1, (c.nbytes,), None))
    bitstream = np.unpackbits(raw, bitorder="little")[: n * bits].reshape(n, bits)
    weights = (1 << np.arange(bits, dtype=np.uint8)).astype(np.uint8)
    out = (bitstream * weights).sum(axis=1, dtype=np.uint8)
    _count()
    return out.view(dtype).reshape(c.shape)


def to_jax(x: Any, /, *, copy: Optional[bool] = None) -> Any:
    """A ``jax.Array`` of ``x``: through JAX's DLPack where it takes the dtype (a view, or the
    one copy a layout needs, ``Tensor.copied``); sub-byte types and ml_dtypes NumPy arrays
    through ``jax.device_put`` (one copy, counted)."""
    import jax
    import numpy as np

    if isinstance(x, np.ndarray) and _ml_named(x):
        # NumPy's __dlpack__ refuses every ml_dtypes dtype; JAX takes the array itself.
        a = x
    else:
        t = x if isinstance(x, Tensor) else None
        if t is None:
            try:
                t = from_dlpack(x, layout="compact", align=64, copy=copy)
            except BufferError:
                if str(getattr(x, "dtype", "")) not in SUB_BYTE:
                    raise
                a = to_numpy(x, copy=copy)
                return _device_put(jax, a, copy)
        if t.dtype not in SUB_BYTE:
            return jax.dlpack.from_dlpack(t)
        a = to_numpy(t, copy=copy)
    return _device_put(jax, a, copy)


def _device_put(jax: Any, a: Any, copy: Optional[bool]) -> Any:
    if copy is False and str(a.dtype) in SUB_BYTE:
        raise _refuse_copy(
            f"JAX's DLPack has no {a.dtype} (XLA type S4 has no DLPack equivalent); jax.device_put copies"
        )
    _reserve(a.nbytes, "jax.device_put")
    j = jax.device_put(a)
    if j.unsafe_buffer_pointer() != a.ctypes.data:
        _count()
    return j
