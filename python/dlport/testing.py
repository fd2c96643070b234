"""Emulated DLPack producers, for testing code that consumes DLPack (as ``numpy.testing`` is
for NumPy users): dlport's own tests use them, and so can yours.

A :class:`Producer` hands out managed tensors over a NumPy array that it builds itself with
``ctypes``, independent of dlport (only its capsules' destructor is dlport's compiled one, which,
as NumPy's, keeps an exception pending while it releases an unconsumed capsule's tensor), with any device in the capsule and any device in
``__dlpack_device__``, either struct (legacy or versioned), any version and flags, any dtype and
any shape or strides; it counts the deleter calls, so a test can check that every tensor is
released exactly once. Two of them stand in for memory a CPU-only machine has no other way to
produce:

- :func:`pinned_like`: PyTorch's pinned tensors (``x.pin_memory()``), whose capsule says
  ``kDLCPU`` while ``__dlpack_device__`` says ``(kDLCUDAHost, 0)``;
- :func:`managed_like`: CUDA managed memory (``kDLCUDAManaged`` in both).

The memory is ordinary host memory: only the device labels are emulated. Malformed producers
(a shape or strides that contradict the data, an unknown version or flag) are made by passing
those values, for the refusal paths of a consumer. Needs NumPy.

Example::

    import numpy as np
    import dlport
    from dlport.testing import aligned, pinned_like

    data = aligned(8, np.float32)
    x = pinned_like(data)
    t = dlport.from_dlpack(x)
    assert t.memory == "cuda_host:0" and t.device == "cpu"
    del t
    assert x.deleted == 1
"""

from __future__ import annotations

import ctypes
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

c_void_p, u32, i32, i64, u64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64

#: DLPack's flag bits (``DLPACK_FLAG_BITMASK_*``).
READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED = 1, 2, 4


class DLPackVersion(ctypes.Structure):
    """``DLPackVersion``."""

    _fields_ = [("major", u32), ("minor", u32)]


class DLDevice(ctypes.Structure):
    """``DLDevice``."""

    _fields_ = [("device_type", i32), ("device_id", i32)]


class DLDataType(ctypes.Structure):
    """``DLDataType``: type code, bits, lanes."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor``."""

    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", i32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(i64)),
        ("strides", ctypes.POINTER(i64)),
        ("byte_offset", u64),
    ]


class DLManagedTensor(ctypes.Structure):
    """``DLManagedTensor`` (legacy)."""


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", LEGACY_DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    """``DLManagedTensorVersioned`` (DLPack 1.x)."""


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", VERSIONED_DELETER),
    ("flags", u64),
    ("dl_tensor", DLTensor),
]

# CPython's capsule API (PyDLL: called with the GIL held, Python errors raised).
_py = ctypes.pythonapi
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
_py.PyCapsule_GetName.restype = ctypes.c_char_p
_py.PyCapsule_GetName.argtypes = [ctypes.py_object]
_pointer_of = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _py))

#: The capsule names DLPack gives each struct, by "versioned".
NAMES = {True: b"dltensor_versioned", False: b"dltensor"}


_get_destructor = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object)(("PyCapsule_GetDestructor", _py))


def _kept_error_destructor() -> int:
    """The destructor of the capsules this module makes: dlport's own (compiled), read from a
    capsule ``dlport.Tensor.__dlpack__`` made. As NumPy's capsules do, it runs the tensor's
    deleter once, unless a consumer took the capsule (renamed it), and it keeps an exception
    pending when the capsule dies (an argument of a call that raised), which Python code cannot:
    a ctypes callback run then would lose that exception (``SystemError: error return without
    exception set``) and skip the deleter."""
    from ._native import from_dlpack

    capsule = from_dlpack(np.empty(1)).__dlpack__()
    return int(_get_destructor(capsule))


_DESTRUCTOR = _kept_error_destructor()


def capsule_pointer(capsule: Any, name: bytes) -> int:
    """The pointer a capsule holds under ``name`` (``ValueError`` if the name differs)."""
    return int(_pointer_of(capsule, name) or 0)


def capsule_name(capsule: Any) -> str:
    """A capsule's name: ``dltensor``, ``dltensor_versioned``, or ``used_...`` once consumed."""
    return str(_py.PyCapsule_GetName(capsule).decode())


def owned_capsule(managed: int, versioned: bool = True) -> Any:
    """A DLPack capsule that owns the managed tensor at ``managed`` (made by any producer): a
    consumer takes it, and if nobody does, its destructor runs the tensor's deleter once."""
    return _py.PyCapsule_New(managed, NAMES[versioned], _DESTRUCTOR)


def release(managed: int, versioned: bool = True) -> None:
    """Runs the deleter of the managed tensor at ``managed`` (a tensor nobody consumed)."""
    kind = DLManagedTensorVersioned if versioned else DLManagedTensor
    m = ctypes.cast(managed, ctypes.POINTER(kind))
    m.contents.deleter(m)


def bare_capsule(pointer: int, name: bytes) -> Any:
    """A capsule with any pointer and name and no destructor (for refusal tests)."""
    return _py.PyCapsule_New(pointer, name, None)


def aligned(n: int, dtype: npt.DTypeLike, align: int = 64) -> npt.NDArray[Any]:
    """A 1-D NumPy array of ``n`` elements whose data is ``align``-byte aligned (JAX views only
    64-byte aligned host memory)."""
    dt = np.dtype(dtype)
    raw = np.empty(n * dt.itemsize + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    a = raw[off:off + n * dt.itemsize].view(dt)
    assert a.ctypes.data % align == 0
    return a


_KINDS = {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5}


class Producer:
    """A foreign DLPack producer over ``array`` (which it keeps alive).

    - ``capsule_device``: the ``(device_type, device_id)`` written into each ``DLTensor``;
    - ``advertised``: what ``__dlpack_device__`` answers;
    - ``versioned``: ``DLManagedTensorVersioned`` (else the legacy struct), with ``version`` and
      ``flags``;
    - ``shape``, ``strides`` (elements) and ``dtype`` (a :class:`DLDataType`): override what the
      array says, for malformed or exotic tensors (bfloat16 over ``uint16`` data, say);
    - ``data``: the address written into ``DLTensor.data`` instead of the array's (0 for a NULL
      pointer);
    - ``knows_max_version``: False for a producer from before DLPack 1.0, which refuses the
      ``max_version`` keyword with a ``TypeError``.

    ``deleted`` counts deleter calls; ``calls`` records each ``__dlpack__`` call's arguments.
    """

    # Released structs and callbacks stay referenced: a ctypes callback must not be freed while
    # it runs, and producers in tests are short-lived.
    live: ClassVar[Dict[int, Any]] = {}
    dead: ClassVar[List[Any]] = []

    def __init__(
        self,
        array: npt.NDArray[Any],
        *,
        capsule_device: Tuple[int, int] = (1, 0),
        advertised: Optional[Tuple[int, int]] = (1, 0),
        versioned: bool = False,
        version: Tuple[int, int] = (1, 3),
        flags: int = 0,
        shape: Optional[Sequence[int]] = None,
        strides: Optional[Sequence[int]] = None,
        dtype: Optional[DLDataType] = None,
        data: Optional[int] = None,
        knows_max_version: bool = True,
    ) -> None:
        self.array = array
        self._data = data
        self.capsule_device = capsule_device
        self.advertised = advertised
        self.versioned = versioned
        self.version = version
        self.flags = flags
        self.deleted = 0
        self.knows_max_version = knows_max_version
        self.calls: List[Dict[str, Any]] = []
        shp = list(array.shape if shape is None else shape)
        itemsize = array.itemsize
        strd = list(strides) if strides is not None else [s // itemsize for s in array.strides]
        self.ndim = len(shp)
        self._shape = (i64 * max(len(shp), 1))(*shp)
        self._strides = (i64 * max(len(shp), 1))(*(strd or [1]))
        self._dtype = dtype or DLDataType(_KINDS[array.dtype.kind], itemsize * 8, 1)

    @property
    def address(self) -> int:
        """The address written into ``DLTensor.data``: the array's first element unless ``data``
        was given."""
        return int(self.array.ctypes.data) if self._data is None else self._data

    def managed(self, versioned: Optional[bool] = None) -> int:
        """The address of a fresh managed tensor (legacy or versioned), owned by the caller:
        call its deleter once."""
        versioned = self.versioned if versioned is None else versioned
        m: Any
        if versioned:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(*self.version)
            m.flags = self.flags
            cb: Any = VERSIONED_DELETER(self._on_delete)
        else:
            m = DLManagedTensor()
            cb = LEGACY_DELETER(self._on_delete)
        m.dl_tensor = DLTensor(self.address, DLDevice(*self.capsule_device), self.ndim, self._dtype,
                               self._shape, self._strides, 0)
        m.deleter = cb
        addr = ctypes.addressof(m)
        Producer.live[addr] = (self, m, cb)
        return addr

    def _on_delete(self, p: Any) -> None:
        self.deleted += 1
        addr = ctypes.cast(p, c_void_p).value
        if addr in Producer.live:
            Producer.dead.append(Producer.live.pop(addr))

    def capsule(self, versioned: Optional[bool] = None) -> Any:
        """A fresh DLPack capsule whose destructor releases the tensor if nobody consumes it."""
        versioned = self.versioned if versioned is None else versioned
        return _py.PyCapsule_New(self.managed(versioned), NAMES[versioned], _DESTRUCTOR)

    def __dlpack_device__(self) -> Optional[Tuple[int, int]]:
        return self.advertised

    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
        **unknown: Any,
    ) -> Any:
        self.calls.append({"stream": stream, "max_version": max_version, **unknown})
        if not self.knows_max_version and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.capsule()


class DLPackExchangeAPIHeader(ctypes.Structure):
    """``DLPackExchangeAPIHeader``: the table's version and the previous table."""

    _fields_ = [("version", DLPackVersion), ("prev_api", c_void_p)]


MANAGED_PP = ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))
SET_ERROR = ctypes.CFUNCTYPE(None, c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class DLPackExchangeAPI(ctypes.Structure):
    """``DLPackExchangeAPI`` (DLPack 1.3), for calling a type's table entry by entry. The entries
    that touch Python are declared ``PYFUNCTYPE``: called with the GIL held, and a -1 return
    raises the exception the entry set."""

    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), MANAGED_PP,
                                                      c_void_p, SET_ERROR)),
        ("managed_tensor_from_py_object_no_sync", ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, MANAGED_PP)),
        ("managed_tensor_to_py_object_no_sync", ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p,
                                                                  ctypes.POINTER(c_void_p))),
        ("dltensor_from_py_object_no_sync", ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                                              ctypes.POINTER(DLTensor))),
        ("current_work_stream", ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                                  ctypes.POINTER(c_void_p))),
    ]


def exchange_api(cls: type) -> DLPackExchangeAPI:
    """The ``DLPackExchangeAPI`` a type offers as ``__dlpack_c_exchange_api__`` (``AttributeError``
    if it offers none)."""
    capsule = getattr(cls, "__dlpack_c_exchange_api__")
    return DLPackExchangeAPI.from_address(capsule_pointer(capsule, b"dlpack_exchange_api"))


def pinned_like(array: npt.NDArray[Any], *, versioned: bool = True, device_id: int = 0,
                dtype: Optional[DLDataType] = None, flags: int = 0) -> Producer:
    """A producer like PyTorch's pinned tensors: the capsule says ``kDLCPU``,
    ``__dlpack_device__`` says ``(kDLCUDAHost, device_id)``."""
    return Producer(array, capsule_device=(1, 0), advertised=(3, device_id), versioned=versioned,
                    dtype=dtype, flags=flags)


def managed_like(array: npt.NDArray[Any], *, versioned: bool = True, device_id: int = 0,
                 dtype: Optional[DLDataType] = None, flags: int = 0) -> Producer:
    """A producer of CUDA managed memory: ``kDLCUDAManaged`` in the capsule and in
    ``__dlpack_device__``."""
    return Producer(array, capsule_device=(13, device_id), advertised=(13, device_id),
                    versioned=versioned, dtype=dtype, flags=flags)


#: DLPack type codes with the bits of common ML types, for ``Producer(dtype=...)``.
BFLOAT16 = DLDataType(4, 16, 1)
FLOAT8_E4M3FN = DLDataType(10, 8, 1)
FLOAT8_E5M2 = DLDataType(12, 8, 1)

def counting_dunder(base: type) -> Any:
    """A subclass of `base` whose `__dlpack__` records the keyword arguments of each call in the
    class attribute `calls`, then calls `base`'s: it tells which route a consumer took (the C
    exchange API calls no Python method) and what it asked for. Each call of this function
    makes a new class with its own `calls`."""

    class Counting(base):  # type: ignore[misc]
        calls: ClassVar[List[Dict[str, Any]]] = []

        def __dlpack__(self, **kwargs: Any) -> Any:
            type(self).calls.append(kwargs)
            return super().__dlpack__(**kwargs)

    Counting.calls = []
    Counting.__name__ = Counting.__qualname__ = f"Counting{base.__name__}"
    return Counting


__all__ = [
    "BFLOAT16",
    "FLOAT8_E4M3FN",
    "FLOAT8_E5M2",
    "DLDataType",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackExchangeAPI",
    "DLPackExchangeAPIHeader",
    "DLPackVersion",
    "DLTensor",
    "IS_COPIED",
    "IS_SUBBYTE_TYPE_PADDED",
    "NAMES",
    "Producer",
    "READ_ONLY",
    "release",
    "aligned",
    "bare_capsule",
    "capsule_name",
    "capsule_pointer",
    "counting_dunder",
    "exchange_api",
    "managed_like",
    "owned_capsule",
    "pinned_like",
]
