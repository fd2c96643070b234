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

import sys

import numpy as np

from paired import aligned, plugin, table  # this directory

ROUNDS, LOOPS = 21, 2000


def main():
    so = plugin()
    if not so:
        return 0
    import jax
    import jax.numpy as jnp

    import dlport.pjrt

    client = dlport.pjrt.load(so)
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

    rows = [
        ("export + NumPy import + release", lambda: np.from_dlpack(buf), lambda: np.from_dlpack(jarr)),
        ("import into PJRT (view) + destroy",
         lambda: client.from_dlpack(x, copy=False), lambda: jax.dlpack.from_dlpack(x)),
    ]
    print(f"jax {jax.__version__}, numpy {np.__version__}, {n} float32, {ROUNDS}x{LOOPS} ops;"
          f" JAX's import {'is' if zero_copy else 'is NOT'} a view")
    table("dlport PJRT", "jax.dlpack", rows, ROUNDS, LOOPS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
