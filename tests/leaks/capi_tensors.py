"""The C ABI's negative control for scripts/sanitize.sh: leaks eight dlport tensors on purpose.

Each ``dlport_alloc`` handle is dropped without ``dlport_tensor_free``, so LeakSanitizer must
report blocks allocated through libdlport.so (``scripts/lsan-run.sh capi leaky``). Eight, not one:
LeakSanitizer scans conservatively, and a stale copy of the last allocation's address left in a
thread's storage keeps that one block "reachable" (measured: one leaked tensor went unreported at
exit in 3 runs of 3, and was found with ``use_tls=0``; of eight, seven are reported every time).
Run from tests/python (``dlport_ctypes`` loads ``$DLPORT_LIB``).
"""

import ctypes
import sys

sys.path.insert(0, ".")
import dlport_ctypes as dl  # noqa: E402

shape = (ctypes.c_int64 * 1)(1024)
dl.lib.dlport_alloc.argtypes = [
    ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_uint8, ctypes.c_uint8,
    ctypes.c_uint16, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
]
for _ in range(8):
    handle = ctypes.c_void_p()
    dl.check(dl.lib.dlport_alloc(None, 1, 0, 2, 32, 1, shape, 1, ctypes.byref(handle)))
handle = None  # the handles are dropped without dlport_tensor_free: leaked
print("capi_tensors: 8 dlport tensors leaked on purpose")
