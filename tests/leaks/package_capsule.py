"""The Python package's negative control for scripts/sanitize.sh: a DLPack capsule marked used
but never consumed, so nobody owns its tensor, which LeakSanitizer must report through the
extension (``scripts/lsan-run.sh package leaky``)."""

import ctypes

import dlport
import numpy as np

cap = dlport.from_dlpack(np.arange(4.0)).__dlpack__(max_version=(1, 3))
# The capsule's destructor frees only an unused capsule's tensor: renamed, nobody owns it.
ctypes.pythonapi.PyCapsule_SetName(ctypes.py_object(cap), b"used_dltensor_versioned")
print("package_capsule: one exported tensor leaked on purpose")
