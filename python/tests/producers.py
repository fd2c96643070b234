"""Foreign DLPack producers built with ctypes, independent of dlport: a managed tensor over a
NumPy buffer with any device in the capsule and any advertised device (PyTorch's pinned tensors
say kDLCPU in the capsule and kDLCUDAHost in __dlpack_device__), counting deleter calls.
PyTorch's PyPI wheel needs GBs of CUDA wheels even to import, so its capsules are emulated."""

from __future__ import annotations

import ctypes

import numpy as np

c_void_p, u32, i32, i64, u64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", u32), ("minor", u32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", i32), ("device_id", i32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
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
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", LEGACY_DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", VERSIONED_DELETER),
    ("flags", u64),
    ("dl_tensor", DLTensor),
]

READ_ONLY, IS_COPIED = 1, 2

# CPython's capsule API (PyDLL: called with the GIL held, Python errors raised).
py = ctypes.pythonapi
py.PyCapsule_New.restype = ctypes.py_object
py.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
py.PyCapsule_GetName.restype = ctypes.c_char_p
py.PyCapsule_GetName.argtypes = [ctypes.py_object]
# By object (tests) and by address (the destructor, whose capsule is being destroyed).
capsule_pointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", py))
_is_valid_at = ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", py))
_pointer_at = ctypes.PYFUNCTYPE(c_void_p, c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", py))

NAMES = {True: b"dltensor_versioned", False: b"dltensor"}


@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule):
    """Releases the tensor of a capsule nobody consumed (the name is still unconsumed)."""
    for versioned, name in NAMES.items():
        if _is_valid_at(capsule, name):
            ptr = _pointer_at(capsule, name)
            kind = DLManagedTensorVersioned if versioned else DLManagedTensor
            m = ctypes.cast(ptr, ctypes.POINTER(kind))
            m.contents.deleter(m)
            return


DESTRUCTOR = ctypes.cast(_capsule_destructor, c_void_p).value


def capsule_name(capsule) -> str:
    return py.PyCapsule_GetName(capsule).decode()


def bare_capsule(pointer: int, name: bytes):
    """A capsule with any name and no destructor (for the bad-input tests)."""
    return py.PyCapsule_New(pointer, name, None)


def aligned(n: int, dtype, align: int = 64) -> np.ndarray:
    """A 1-D NumPy array whose data is `align`-byte aligned (JAX views only such data)."""
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    a = raw[off:off + n * dtype.itemsize].view(dtype)
    assert a.ctypes.data % align == 0
    return a


class Producer:
    """A foreign producer over `array`: `capsule_device` goes into the DLTensor, `advertised` is
    what `__dlpack_device__` answers; `versioned` picks the struct, `version` its version.
    `deleted` counts deleter calls (each managed tensor's own)."""

    live: dict = {}
    # Released structs and callbacks stay referenced: a ctypes callback must not be freed while it
    # runs, and the tests are short-lived.
    dead: list = []

    def __init__(self, array, *, capsule_device=(1, 0), advertised=(1, 0), versioned=False,
                 version=(1, 3), flags=0, shape=None, dtype=None, knows_max_version=True):
        self.array = array
        self.capsule_device = capsule_device
        self.advertised = advertised
        self.versioned = versioned
        self.version = version
        self.flags = flags
        self.deleted = 0
        self.knows_max_version = knows_max_version
        self.calls = []
        shp = array.shape if shape is None else shape
        self.ndim = len(shp)
        self._shape = (i64 * max(len(shp), 1))(*shp)
        itemsize = array.itemsize
        self._strides = (i64 * max(len(shp), 1))(*([s // itemsize for s in array.strides] or [1]))
        kinds = {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5}
        self._dtype = dtype or DLDataType(kinds[array.dtype.kind], itemsize * 8, 1)

    @property
    def address(self) -> int:
        return self.array.ctypes.data

    def managed(self, versioned=None) -> int:
        """A fresh owned managed tensor (legacy or versioned)."""
        versioned = self.versioned if versioned is None else versioned
        if versioned:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(*self.version)
            m.flags = self.flags
            cb = VERSIONED_DELETER(self._on_delete)
        else:
            m = DLManagedTensor()
            cb = LEGACY_DELETER(self._on_delete)
        m.dl_tensor = DLTensor(self.address, DLDevice(*self.capsule_device), self.ndim, self._dtype,
                               self._shape, self._strides, 0)
        m.deleter = cb
        addr = ctypes.addressof(m)
        Producer.live[addr] = (self, m, cb)
        return addr

    def _on_delete(self, p):
        self.deleted += 1
        addr = ctypes.cast(p, c_void_p).value
        if addr in Producer.live:
            Producer.dead.append(Producer.live.pop(addr))

    def capsule(self, versioned=None):
        versioned = self.versioned if versioned is None else versioned
        return py.PyCapsule_New(self.managed(versioned), NAMES[versioned], DESTRUCTOR)

    def __dlpack_device__(self):
        return self.advertised

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None, **unknown):
        self.calls.append({"stream": stream, "max_version": max_version, **unknown})
        if not self.knows_max_version and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.capsule()
