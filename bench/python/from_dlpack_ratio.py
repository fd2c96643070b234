"""Instructions per call (callgrind, bench/python/callgrind.py) of dlport's import of a NumPy
array beside NumPy's own, and of NumPy's import of a dlport tensor: the ratio issue 48's budget
holds (dlport.from_dlpack(numpy) at most 1.10 x numpy.from_dlpack(numpy)). Run it with the
Python of a venv that has dlport (a release wheel) and NumPy; compare builds by running it in
one venv per build, one after the other.

Usage: VENV/bin/python bench/python/from_dlpack_ratio.py [N]   (N calls, default 10,000)
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import callgrind  # noqa: E402

SETUP = """import numpy as np, dlport
a = np.arange(16, dtype=np.float32)
t = dlport.from_dlpack(a)
"""

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
ours = callgrind.per_call(SETUP, "dlport.from_dlpack(a)", n)
numpy = callgrind.per_call(SETUP, "np.from_dlpack(a)", n)
export = callgrind.per_call(SETUP, "np.from_dlpack(t)", n)
print(f"dlport.from_dlpack(numpy): {ours:,.0f}; numpy.from_dlpack(numpy): {numpy:,.0f}; "
      f"ratio {ours / numpy:.3f}; numpy.from_dlpack(dlport.Tensor): {export:,.0f}")
