"""PJRT through dlport against JAX's own DLPack, on the same kind of CPU buffer, in one run:

  export:  a PJRT buffer's export + NumPy's DLPack import + release
           (dlport: np.from_dlpack(PjrtBuffer); JAX: np.from_dlpack(jax.Array))
  import:  a DLPack import into PJRT + destroy, of a 64-byte-aligned NumPy array, no copy
           (dlport: client.from_dlpack(x, copy=False); JAX: jax.dlpack.from_dlpack(x))

Each side is timed in alternating rounds (ROUNDS rounds of LOOPS operations); the median per
operation is reported with the range over rounds. Needs a release wheel of dlport in the
interpreter and DLPORT_PJRT_PLUGIN (scripts/pjrt-test.sh sets it):

  DLPORT_PJRT_PLUGIN=.../xla_cpu_pjrt.so .venv/bin/python bench/python/pjrt_bench.py
"""

import os
import statistics
import sys
import time

import numpy as np

ROUNDS, LOOPS = 21, 2000


def aligned(n):
    raw = np.empty(n * 4 + 64, dtype=np.uint8)
    start = (-raw.__array_interface__["data"][0]) % 64
    out = raw[start : start + n * 4].view(np.float32)
    out[...] = np.arange(n, dtype=np.float32)
    return out


def per_op(f):
    t = time.perf_counter_ns()
    for _ in range(LOOPS):
        f()
    return (time.perf_counter_ns() - t) / LOOPS


def paired(a, b):
    ta, tb = [], []
    for _ in range(ROUNDS):
        ta.append(per_op(a))
        tb.append(per_op(b))
    return ta, tb


def show(ts):
    return f"{statistics.median(ts) / 1000:.2f} µs ({min(ts) / 1000:.2f}–{max(ts) / 1000:.2f})"


def main():
    plugin = os.environ.get("DLPORT_PJRT_PLUGIN")
    if not plugin:
        print("SKIP: DLPORT_PJRT_PLUGIN is not set")
        return 0
    import jax
    import jax.numpy as jnp

    import dlport.pjrt

    client = dlport.pjrt.load(plugin)
    n = 1024
    x = aligned(n)
    buf = client.from_dlpack(x, copy=False)
    jarr = jnp.asarray(x) + 0
    jarr.block_until_ready()
    # Both imports are views of x (checked once before timing).
    assert buf.data_ptr == x.__array_interface__["data"][0]
    jv = jax.dlpack.from_dlpack(x)
    zero_copy = jv.unsafe_buffer_pointer() == x.__array_interface__["data"][0]
    del jv

    def dl_export():
        np.from_dlpack(buf)

    def jax_export():
        np.from_dlpack(jarr)

    def dl_import():
        client.from_dlpack(x, copy=False)

    def jax_import():
        jax.dlpack.from_dlpack(x)

    for f in (dl_export, jax_export, dl_import, jax_import):
        per_op(f)  # warm
    e_dl, e_jax = paired(dl_export, jax_export)
    i_dl, i_jax = paired(dl_import, jax_import)
    ratio = lambda a, b: statistics.median(a) / statistics.median(b)
    print(f"jax {jax.__version__}, numpy {np.__version__}, {n} float32, {ROUNDS}x{LOOPS} ops;"
          f" JAX's import {'is' if zero_copy else 'is NOT'} a view")
    print("| operation | dlport PJRT | jax.dlpack | ratio |")
    print("|---|---|---|---|")
    print(f"| export + NumPy import + release | {show(e_dl)} | {show(e_jax)} | {ratio(e_dl, e_jax):.2f}x |")
    print(f"| import into PJRT (view) + destroy | {show(i_dl)} | {show(i_jax)} | {ratio(i_dl, i_jax):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
