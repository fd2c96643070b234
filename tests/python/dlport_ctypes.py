"""A thin ctypes binding of dlport's C ABI (capi/include/dlport.h), for the C ABI's own
tests (its capsule destructor, describe, convert, host view, error codes). Not a packaged API:
Python programs use the package `dlport` (python/).
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
# DLPORT_LIB, else the debug build in cargo's target directory (CARGO_TARGET_DIR, as cargo reads
# it: relative to the repository root, where the scripts run cargo).
TARGET = ROOT / os.environ.get("CARGO_TARGET_DIR", "target")
LIB_PATH = os.environ.get("DLPORT_LIB", str(TARGET / "debug" / "libdlport.so"))
lib = ctypes.CDLL(LIB_PATH)

c_int, c_void_p, c_char_p = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
i32, u32, u64, i64 = ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64


# The DLPack structs are dlport.testing's (the package's emulated producers, shipped for users'
# tests): one definition for both Python suites.
from dlport.testing import (  # noqa: E402
    LEGACY_DELETER,
    VERSIONED_DELETER,
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLTensor,
)
from dlport.testing import Producer as _Producer  # noqa: E402


class ImportOptions(ctypes.Structure):
    _fields_ = [
        ("target_device_type", i32),
        ("target_device_id", i32),
        ("advertised_device_type", i32),
        ("advertised_device_id", i32),
        ("copy", i32),
        ("layout", i32),
        ("alignment", u32),
        ("max_alloc_bytes", ctypes.c_uint64),
    ]


lib.dlport_version.restype = c_char_p
lib.dlport_last_error.restype = c_char_p
lib.dlport_describe.argtypes = [c_void_p, c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.dlport_string_free.argtypes = [c_void_p]
lib.dlport_release.argtypes = [c_void_p, c_int]
lib.dlport_release.restype = c_int
lib.dlport_import.argtypes = [c_void_p, c_int, ctypes.POINTER(ImportOptions), ctypes.POINTER(c_void_p)]
lib.dlport_export.argtypes = [c_void_p, i32, i32, i32, i32, i32, ctypes.POINTER(c_void_p), ctypes.POINTER(c_int)]
lib.dlport_convert.argtypes = [c_void_p, c_int, c_int, ctypes.POINTER(c_void_p)]
lib.dlport_host_view.argtypes = [c_void_p, c_int, i32, i32, c_int, ctypes.POINTER(c_void_p)]
lib.dlport_compact.argtypes = [c_void_p, c_int, c_int, i32, ctypes.POINTER(c_void_p)]
lib.dlport_tensor_describe.argtypes = [c_void_p, ctypes.POINTER(c_void_p)]
lib.dlport_tensor_data.argtypes = [c_void_p, ctypes.POINTER(c_void_p), ctypes.POINTER(u64)]
lib.dlport_tensor_free.argtypes = [c_void_p]
lib.dlport_export_counts.argtypes = [ctypes.POINTER(u64), ctypes.POINTER(u64)]

# CPython's capsule API. PyDLL keeps the GIL and raises any Python error a call sets.
py = ctypes.pythonapi
py.PyCapsule_New.restype = ctypes.py_object
py.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
py.PyCapsule_IsValid.restype = c_int
py.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
py.PyCapsule_GetPointer.restype = c_void_p
py.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
py.PyCapsule_SetName.restype = c_int
py.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
py.PyCapsule_GetName.restype = c_char_p
py.PyCapsule_GetName.argtypes = [ctypes.py_object]

CAPSULE_DESTRUCTOR = ctypes.cast(lib.dlport_capsule_destructor, c_void_p).value

# Capsules keep a pointer to their name: these bytes objects live as long as the module.
NAMES = {True: b"dltensor_versioned", False: b"dltensor"}
USED = {True: b"used_dltensor_versioned", False: b"used_dltensor"}



def header_constants(path: pathlib.Path = ROOT / "capi" / "include" / "dlport.h") -> dict[str, int]:
    """Every integer constant the generated header names: `#define NAME value` and enumerators
    `NAME = value` (DLPORT_*, DLPACK_*, kDL*). The binding takes its numbers from here alone, so
    it cannot drift from the C ABI."""
    import re

    text = path.read_text()
    found: dict[str, int] = {}
    for name, value in re.findall(r"^#define\s+(\w+)\s+\(?(-?\d+)\)?\s*$", text, re.M):
        found[name] = int(value)
    for name, value in re.findall(r"^\s+(\w+)\s*=\s*(-?\d+),?\s*$", text, re.M):
        found[name] = int(value)
    return found


C = header_constants()
ERROR_NAMES = {v: k for k, v in C.items() if k.startswith("DLPORT_ERR_")}
COPY = {False: C["DLPORT_COPY_NEVER"], None: C["DLPORT_COPY_IF_NEEDED"], True: C["DLPORT_COPY_ALWAYS"]}
LAYOUT = {
    "any": C["DLPORT_LAYOUT_ANY"],
    "dense": C["DLPORT_LAYOUT_DENSE"],
    "row_major": C["DLPORT_LAYOUT_ROW_MAJOR"],
}


class DlportError(Exception):
    """An error reported by dlport, with its code and message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def check(status: int) -> None:
    if status != 0:
        msg = lib.dlport_last_error()
        raise DlportError(status, msg.decode() if msg else f"status {status}")


def _take_string(p: ctypes.c_void_p) -> str:
    try:
        return ctypes.cast(p, c_char_p).value.decode()
    finally:
        lib.dlport_string_free(p)


def describe_managed(ptr: int | None, versioned: bool) -> dict:
    out = c_void_p()
    check(lib.dlport_describe(ptr, int(versioned), ctypes.byref(out)))
    return json.loads(_take_string(out))


def export_counts() -> tuple[int, int]:
    e, r = u64(), u64()
    lib.dlport_export_counts(ctypes.byref(e), ctypes.byref(r))
    return e.value, r.value


def capsule_from_managed(ptr: int, versioned: bool):
    """A new, unconsumed capsule owning `ptr`; dlport's destructor releases it if unused."""
    return py.PyCapsule_New(ptr, NAMES[versioned], CAPSULE_DESTRUCTOR)


def consume_capsule(capsule) -> tuple[int, bool]:
    """Takes the tensor out of a DLPack capsule: checks its name, renames it `used_*`."""
    for versioned in (True, False):
        if py.PyCapsule_IsValid(capsule, NAMES[versioned]):
            ptr = py.PyCapsule_GetPointer(capsule, NAMES[versioned])
            py.PyCapsule_SetName(capsule, USED[versioned])
            return ptr, versioned
    name = py.PyCapsule_GetName(capsule) if isinstance(capsule, type(capsule)) else None
    if name is not None and name.startswith(b"used_"):
        raise ValueError(f"the DLPack capsule was already consumed (its name is {name.decode()!r})")
    raise ValueError(f"not a DLPack capsule: its name is {name!r}, expected 'dltensor' or 'dltensor_versioned'")


def capsule_name(capsule) -> str:
    return py.PyCapsule_GetName(capsule).decode()


def _device_of(obj):
    try:
        return tuple(obj.__dlpack_device__())
    except AttributeError:
        return None


def _capsule_of(obj, max_version=(1, 3)):
    try:
        return obj.__dlpack__(max_version=max_version)
    except TypeError:
        return obj.__dlpack__()


class Tensor:
    """A tensor held by a dlport backend, with the Python DLPack protocol."""

    def __init__(self, handle: int, host_view: bool = False):
        self._h = c_void_p(handle)
        self._host_view = host_view

    def __del__(self):
        if getattr(self, "_h", None) and self._h.value:
            lib.dlport_tensor_free(self._h)
            self._h = c_void_p()

    def free(self):
        self.__del__()

    def describe(self) -> dict:
        out = c_void_p()
        check(lib.dlport_tensor_describe(self._h, ctypes.byref(out)))
        return json.loads(_take_string(out))

    @property
    def data_ptr(self) -> int:
        data, off = c_void_p(), u64()
        check(lib.dlport_tensor_data(self._h, ctypes.byref(data), ctypes.byref(off)))
        return (data.value or 0) + off.value

    def __dlpack_device__(self):
        if self._host_view:
            return (1, 0)
        dev = self.describe()["device"]
        kinds = {"cpu": 1, "cuda": 2, "cuda_host": 3, "cuda_managed": 13}
        kind, _, idx = dev.partition(":")
        return (kinds.get(kind, 1), int(idx or 0))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream not in (None, -1):
            raise BufferError(f"stream={stream!r}: host memory takes no stream")
        major, minor = (max_version if max_version is not None else (-1, 0))
        dev_type, dev_id = dl_device if dl_device is not None else ((1, 0) if self._host_view else (0, 0))
        out, versioned = c_void_p(), c_int()
        status = lib.dlport_export(self._h, major, minor, dev_type, dev_id, COPY[copy], ctypes.byref(out), ctypes.byref(versioned))
        if status != 0:
            msg = lib.dlport_last_error().decode()
            raise BufferError(msg)
        return capsule_from_managed(out.value, bool(versioned.value))


def import_managed(ptr, versioned: bool, *, device=None, advertised=None, copy=None, layout="any", alignment=0) -> Tensor:
    """CONSUMING: hands a managed-tensor pointer to dlport."""
    opts = ImportOptions(
        device[0] if device else 0, device[1] if device else 0,
        advertised[0] if advertised else 0, advertised[1] if advertised else 0,
        COPY[copy], LAYOUT[layout], alignment,
    )
    out = c_void_p()
    check(lib.dlport_import(ptr, int(versioned), ctypes.byref(opts), ctypes.byref(out)))
    return Tensor(out.value)


def from_dlpack(obj, *, device=None, copy=None, layout="any", alignment=0) -> Tensor:
    """Imports any object with `__dlpack__` (or a raw capsule) into dlport."""
    advertised = _device_of(obj)
    capsule = _capsule_of(obj) if hasattr(obj, "__dlpack__") else obj
    ptr, versioned = consume_capsule(capsule)
    return import_managed(ptr, versioned, device=device, advertised=advertised, copy=copy, layout=layout, alignment=alignment)


def host_view(obj) -> Tensor:
    """The seed fix: host-accessible memory (pinned, managed) shown as kDLCPU without a copy."""
    advertised = _device_of(obj) or (0, 0)
    ptr, versioned = consume_capsule(_capsule_of(obj))
    out = c_void_p()
    check(lib.dlport_host_view(ptr, int(versioned), advertised[0], advertised[1], 1, ctypes.byref(out)))
    t = import_managed(out.value, True, copy=False)
    t._host_view = True
    return t


def compact(obj, *, copy=None) -> Tensor:
    ptr, versioned = consume_capsule(_capsule_of(obj))
    out = c_void_p()
    check(lib.dlport_compact(ptr, int(versioned), 1, COPY[copy], ctypes.byref(out)))
    return import_managed(out.value, True, copy=False)


class Producer(_Producer):
    """dlport.testing's foreign producer, whose capsules carry the C ABI's own destructor
    (`dlport_capsule_destructor`), so that the C ABI's capsule handling is what is tested."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None, **unknown):
        return capsule_from_managed(self.managed(), self.versioned)
