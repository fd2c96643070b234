"""What dlport carries that the NumPy bridge (``jax.dlpack.from_dlpack(np.from_dlpack(x))``)
cannot: the types machine learning uses, the READ_ONLY flag, a clear refusal of a malformed
producer instead of a wild read or a crash, and the DLPack 1.3 C exchange API.

The producers are dlport.testing's emulations (host memory labelled as PyTorch labels its pinned
tensors), so this runs on any machine. The test command runs it; every claim is an assert.

Run: python python/examples/value.py
"""

import subprocess
import sys

import jax
import ml_dtypes
import numpy as np

import dlport
from dlport.testing import BFLOAT16, FLOAT8_E4M3FN, READ_ONLY, Producer, aligned, pinned_like



def numpy_bridge(producer: str) -> str:
    """What ``np.from_dlpack`` does with a producer, run in a child process (NumPy can crash)."""
    probe = f"""
import numpy as np
from dlport.testing import BFLOAT16, FLOAT8_E4M3FN, Producer, aligned
try:
    x = np.from_dlpack({producer})
    print("took it:", float(x.astype(np.float64).sum()))
except Exception as e:
    print("refused:", type(e).__name__, e)
"""
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if r.returncode < 0:
        return f"died of signal {-r.returncode}"
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"exit {r.returncode}"


# 1. bfloat16 and float8 pinned-like tensors reach JAX with no copy. NumPy has no such dtypes,
#    so its bridge cannot carry them.
for name, code, ml_type in [("bfloat16", BFLOAT16, ml_dtypes.bfloat16),
                            ("float8_e4m3fn", FLOAT8_E4M3FN, ml_dtypes.float8_e4m3fn)]:
    values = np.arange(16, dtype=np.float32).astype(ml_type)
    bits = aligned(16, np.uint16 if values.dtype.itemsize == 2 else np.uint8)
    bits[:] = values.view(bits.dtype)
    code_name = "BFLOAT16" if name == "bfloat16" else "FLOAT8_E4M3FN"
    bridge = numpy_bridge(f"Producer(aligned(16, np.uint{bits.itemsize * 8}), dtype={code_name})")
    assert not bridge.startswith("took it"), bridge
    print(f"NumPy bridge, {name}: {bridge}")
    x = pinned_like(bits, dtype=code)
    t = dlport.from_dlpack(x)
    y = jax.dlpack.from_dlpack(t)
    assert y.dtype == ml_type and y.unsafe_buffer_pointer() == bits.ctypes.data, "no copy"
    np.testing.assert_array_equal(np.asarray(y).astype(np.float32), values.astype(np.float32))
    print(f"dlport, {name}: {t} reached JAX without a copy: {np.asarray(y)[:4]} ...")
    del t, y
    assert x.deleted == 1, "the producer's deleter ran exactly once"

# 2. READ_ONLY is kept: every versioned export carries it, NumPy's view of it is not writable,
#    and a legacy consumer (which cannot be told) gets a copy, never a writable alias.
data = aligned(4, np.float32)
ro = Producer(data, versioned=True, flags=READ_ONLY)
t = dlport.from_dlpack(ro)
assert t.readonly
a = np.from_dlpack(t)
assert not a.flags.writeable and a.ctypes.data == data.ctypes.data
cap = t.__dlpack__()  # a legacy capsule: no flags field, so dlport hands a copy
t2 = dlport.from_dlpack(cap)
assert t2.data_ptr() != data.ctypes.data and not t2.readonly
print(f"READ_ONLY: NumPy's array writable={a.flags.writeable}; a legacy export is a copy")
del a, t, t2, cap

# 3. A malformed producer: strides that run past any buffer. NumPy's from_dlpack takes it and
#    reads wild memory (or dies of a signal); dlport refuses it, naming the field and the value.
bad = "Producer(aligned(4, np.float32), shape=[4], strides=[1 << 62])"
bridge = numpy_bridge(bad)
assert not bridge.startswith("refused"), bridge
print(f"NumPy bridge, malformed strides: {bridge}")
try:
    dlport.from_dlpack(eval(bad))
    raise AssertionError("dlport took it")
except dlport.DLPackBufferError as e:
    assert "strides[0]" in str(e) and e.code != 0
    print(f"dlport, malformed strides: {type(e).__name__} (code {e.code}): {e}")

# 4. The DLPack 1.3 C exchange API: dlport.Tensor offers a C table, so a consumer that speaks it
#    (tvm-ffi, dlport itself) takes the tensor without a Python call.
t = dlport.from_dlpack(np.arange(4.0))
route = dlport.explain(t).splitlines()[1]
assert "C exchange API" in route, route
u = dlport.from_dlpack(t)
assert u.data_ptr() == t.data_ptr()
print("exchange API:", route)
