"""NumPy's copies of the same cases as bench/src/bin/copies.rs, on the same machine, right
after it: into an existing destination (np.copyto) and with allocation (np.ascontiguousarray),
each against np.copyto of a contiguous array of the same bytes (NumPy's memcpy) in the same run.
Also the DLPack exchange of NumPy itself and of JAX, for reference. Writes
target/bench/numpy.json."""

import json
import pathlib
import statistics
import sys
import time

import numpy as np

QUICK = "--quick" in sys.argv
REPS = 5 if QUICK else 15
SIDES = [128, 1024, 4096] if QUICK else [128, 256, 512, 1024, 2048, 4096]


def measure(f, reps=REPS):
    f()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    t.sort()
    q = lambda p: t[round((len(t) - 1) * p)]
    return {"median": q(0.5), "p25": q(0.25), "p75": q(0.75)}


rows = []
for side in SIDES:
    a = np.arange(side * side, dtype=np.float32).reshape(side, side)
    dst = np.empty_like(a)
    cases = {
        "transpose": a.T,
        "negative strides": a[::-1, ::-1],
        "broadcast": np.broadcast_to(a[0], (side, side)),
    }
    for name, view in cases.items():
        mem = measure(lambda: np.copyto(dst, a))
        into = measure(lambda: np.copyto(dst, view))
        alloc = measure(lambda: np.ascontiguousarray(view))
        rows.append({"case": name, "bytes": a.nbytes, "numpy_copyto_s": into,
                     "numpy_ascontiguousarray_s": alloc, "memcpy_s": mem})

exchange = {}
x = np.arange(16, dtype=np.float32)
exchange["numpy.from_dlpack(numpy array)"] = measure(lambda: np.from_dlpack(x), reps=2000)
try:
    import jax
    raw = np.empty(64 * 4 + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    aligned = raw[off:off + 256].view(np.float32)
    exchange["jax.dlpack.from_dlpack(64-byte-aligned numpy array)"] = measure(
        lambda: jax.dlpack.from_dlpack(aligned), reps=200)
except Exception as e:  # jax absent: report without it
    print("jax skipped:", e, file=sys.stderr)

out = pathlib.Path(__file__).resolve().parents[2] / "target" / "bench"
out.mkdir(parents=True, exist_ok=True)
(out / "numpy.json").write_text(json.dumps({"copies": rows, "exchange": exchange}, indent=1))
for r in rows:
    print(f"{r['case']:<18} {r['bytes']:>10} copyto/memcpy {r['memcpy_s']['median'] / r['numpy_copyto_s']['median']:.3f}")
for k, v in exchange.items():
    print(f"{k}: {v['median'] * 1e6:.2f} us")
