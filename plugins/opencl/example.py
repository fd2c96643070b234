"""Loads the OpenCL plugin from its path and moves a tensor both ways from Python.

    python plugins/opencl/example.py [PATH/TO/libdlport_opencl.so]

(default: $DLPORT_OPENCL_PLUGIN, else target/plugins/libdlport_opencl.so). NumPy -> a cl_mem
(copy_from_host), an OpenCL kernel sums it; a cl_mem filled by a kernel -> NumPy (one
copy_to_host). Exits 77 with the reason when no OpenCL device can be created.
"""

import ctypes
import os
import pathlib
import sys

import numpy as np

import dlport
from dlport.testing import DLManagedTensorVersioned, bare_capsule, capsule_pointer

root = pathlib.Path(__file__).resolve().parents[2]
path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
    "DLPORT_OPENCL_PLUGIN", str(root / "target" / "plugins" / "libdlport_opencl.so")
)
try:
    name = dlport.load_plugin(path)
except dlport.DLPackError as e:
    if "no OpenCL" in str(e) or "no usable OpenCL" in str(e):
        print(f"SKIPPED: no OpenCL device: {e}")
        sys.exit(77)
    raise
print(f"loaded {name!r} from {path}")
print("backends:", [(b["name"], b["device_types"]) for b in dlport.backends()])

lib = ctypes.CDLL(path)  # the same library dlport loaded: its helper functions
lib.dlport_opencl_iota.restype = ctypes.c_void_p
lib.dlport_opencl_iota.argtypes = [ctypes.c_float, ctypes.c_int64]
lib.dlport_opencl_sum.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
DL_TENSOR = DLManagedTensorVersioned.dl_tensor.offset

# NumPy -> OpenCL: one copy into a cl_mem the plugin allocates; a kernel reads it.
a = np.arange(100, dtype=np.float32)
on_cl = dlport.from_dlpack(a, device="opencl:0")
cap = on_cl.__dlpack__(max_version=(1, 3))
total = ctypes.c_double()
assert lib.dlport_opencl_sum(capsule_pointer(cap, b"dltensor_versioned") + DL_TENSOR, ctypes.byref(total)) == 0
print(f"numpy -> {on_cl.device}: an OpenCL kernel sums it to {total.value} (numpy: {a.sum()})")
assert total.value == float(a.sum())
del cap

# OpenCL -> NumPy: a kernel fills a cl_mem; dlport views it, then copies it to the host once.
managed = lib.dlport_opencl_iota(0.5, 8)
view = dlport.from_dlpack(bare_capsule(managed, b"dltensor_versioned"))
host = np.from_dlpack(dlport.from_dlpack(view, device="cpu"))
print(f"{view.device} -> numpy: {host}")
assert (host == np.arange(8, dtype=np.float32) + 0.5).all()
print("opencl python example: ok")
