"""NumPy's copies of the same cases as bench/src/bin/copies.rs, on the same machine, right
after it: into an existing destination (np.copyto) and with allocation (np.ascontiguousarray),
for 1-, 2-, 4- and 8-byte elements (uint8, float16, float32, float64), each against np.copyto of
a contiguous array of the same bytes (NumPy's memcpy) in the same run. Times are the copying
thread's CPU time (time.thread_time), as in copies.rs. Also the DLPack exchange of NumPy itself
and of JAX, for reference. Writes target/bench/numpy.json."""

import json
import pathlib
import sys
import time

import numpy as np

QUICK = "--quick" in sys.argv
REPS = 5 if QUICK else 15
SIDES = [128, 1024, 4096] if QUICK else [128, 256, 512, 1024, 2048, 4096]
DTYPES = {1: np.uint8, 2: np.float16, 4: np.float32, 8: np.float64}


def measure(f, reps=REPS, clock=time.thread_time):
    f()
    t = []
    for _ in range(reps):
        s = clock()
        f()
        t.append(clock() - s)
    t.sort()
    q = lambda p: t[round((len(t) - 1) * p)]
    return {"median": q(0.5), "p25": q(0.25), "p75": q(0.75)}


rows = []
for side in SIDES:
    for elem, dtype in DTYPES.items():
        # (side, side × 4 / elem): the same shapes and bytes as copies.rs.
        r, c = side, side * 4 // elem
        a = np.arange(r * c).astype(dtype).reshape(r, c)
        dst = np.empty_like(a)
        cases = {
            "transpose": a.reshape(c, r).T,
            "negative strides": a[::-1, ::-1],
            "reversed rows": a[:, ::-1],
            "broadcast": np.broadcast_to(a[0], (r, c)),
        }
        for name, view in cases.items():
            mem = measure(lambda: np.copyto(dst, a))
            into = measure(lambda: np.copyto(dst, view))
            alloc = measure(lambda: np.ascontiguousarray(view))
            rows.append({"case": name, "elem": elem, "bytes": a.nbytes, "numpy_copyto_s": into,
                         "numpy_ascontiguousarray_s": alloc, "memcpy_s": mem})

exchange = {}
x = np.arange(16, dtype=np.float32)
exchange["numpy.from_dlpack(numpy array)"] = measure(lambda: np.from_dlpack(x), reps=2000,
                                                     clock=time.perf_counter)
try:
    import jax
    raw = np.empty(64 * 4 + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    aligned = raw[off:off + 256].view(np.float32)
    exchange["jax.dlpack.from_dlpack(64-byte-aligned numpy array)"] = measure(
        lambda: jax.dlpack.from_dlpack(aligned), reps=200, clock=time.perf_counter)
except Exception as e:  # jax absent: report without it
    print("jax skipped:", e, file=sys.stderr)

out = pathlib.Path(__file__).resolve().parents[2] / "target" / "bench"
out.mkdir(parents=True, exist_ok=True)
(out / "numpy.json").write_text(json.dumps({"copies": rows, "exchange": exchange}, indent=1))
for r in rows:
    gbs = r["bytes"] / r["numpy_copyto_s"]["median"] / 1e9
    ratio = r["memcpy_s"]["median"] / r["numpy_copyto_s"]["median"]
    print(f"{r['case']:<18} {r['elem']:>4} {r['bytes']:>10} {gbs:>8.2f} GB/s copyto/memcpy {ratio:.3f}")
for k, v in exchange.items():
    print(f"{k}: {v['median'] * 1e6:.2f} us")
