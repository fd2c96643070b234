"""dlport.jax against JAX's own DLPack, per call, on a platform where both work: the XLA CPU
plugin (DLPORT_PJRT_PLUGIN) registered with JAX as "cpuplug" (its client says "cpu", so JAX's
DLPack serves it) with dlport's table interposed (`dlport.jax.install("cpuplug",
device_type=1)`). In one run, alternating rounds (ROUNDS rounds of LOOPS calls per side):

  export:  a capsule of a jax.Array, released unconsumed
           (dlport: dlport.jax.to_dlpack(x); JAX: x.__dlpack__(max_version=(1, 3)))
  export + NumPy import + release
           (dlport: numpy.from_dlpack(dlport.jax.export(x)); JAX: numpy.from_dlpack(x))
  import:  a jax.Array view of a 64-byte-aligned NumPy array, dropped
           (dlport: dlport.jax.from_dlpack(a); JAX: jax.dlpack.from_dlpack(a))

Needs a release wheel of dlport in the interpreter:

  DLPORT_PJRT_PLUGIN=.../xla_cpu_pjrt.so .venv/bin/python bench/python/jax_door_bench.py
"""

import sys

import numpy as np

from paired import aligned, plugin, table  # this directory

ROUNDS, LOOPS = 101, 400


def main():
    so = plugin()
    if not so:
        return 0
    import jax
    import jax.numpy as jnp
    from jax._src import xla_bridge

    import dlport.jax

    xla_bridge.register_plugin("cpuplug", library_path=so)
    dlport.jax.install("cpuplug", device_type=1)
    dev = jax.devices("cpuplug")[0]
    n = 1024
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), dev) + 0
    x.block_until_ready()
    a = aligned(n)
    # Both sides are views (checked once before timing).
    assert np.from_dlpack(dlport.jax.export(x)).ctypes.data == x.unsafe_buffer_pointer()
    assert np.from_dlpack(x).ctypes.data == x.unsafe_buffer_pointer()
    assert dlport.jax.from_dlpack(a).unsafe_buffer_pointer() == a.ctypes.data
    jv = jax.dlpack.from_dlpack(a, device=dev)
    zero_copy = jv.unsafe_buffer_pointer() == a.ctypes.data
    del jv

    rows = [
        ("export: a capsule, released unconsumed",
         lambda: dlport.jax.to_dlpack(x), lambda: x.__dlpack__(max_version=(1, 3))),
        ("export + NumPy import + release",
         lambda: np.from_dlpack(dlport.jax.export(x)), lambda: np.from_dlpack(x)),
        ("import: a JAX view of NumPy memory, dropped",
         lambda: dlport.jax.from_dlpack(a), lambda: jax.dlpack.from_dlpack(a, device=dev)),
    ]
    print(f"jax {jax.__version__}, numpy {np.__version__}, {n} float32, {ROUNDS}x{LOOPS} ops;"
          f" JAX's import {'is' if zero_copy else 'is NOT'} a view")
    table("dlport.jax", "jax.dlpack", rows, ROUNDS, LOOPS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
