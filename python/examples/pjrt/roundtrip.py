"""A PJRT plugin as a DLPack device, from Python: load the XLA CPU plugin by its path, move a
tensor NumPy -> PJRT -> NumPy and JAX -> PJRT -> JAX, run StableHLO on the imported view, and
print the addresses both ways (equal addresses: no copy).

    DLPORT_PJRT_PLUGIN=/path/to/xla_cpu_pjrt.so python python/examples/pjrt/roundtrip.py
    python python/examples/pjrt/roundtrip.py xla_cpu_pjrt      # an installed plugin package
"""

import os
import sys

import numpy as np

import dlport
import dlport.pjrt

AFFINE = """
module @affine {
  func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %two = stablehlo.constant dense<2.0> : tensor<2x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<2x3xf32>
    %m = stablehlo.multiply %x, %two : tensor<2x3xf32>
    %r = stablehlo.add %m, %one : tensor<2x3xf32>
    return %r : tensor<2x3xf32>
  }
}
"""


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def main() -> int:
    where = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DLPORT_PJRT_PLUGIN")
    if not where:
        print("SKIP: give the plugin's path (argument 1 or DLPORT_PJRT_PLUGIN)")
        return 0
    client = dlport.pjrt.load(where)
    print(f"plugin {where}: platform {client.platform!r}, devices {client.devices}")

    # NumPy -> PJRT: PJRT views memory 64-byte aligned; dlport.from_dlpack(align=64) gives
    # that (a view where the array already is aligned, else one aligned copy).
    x = dlport.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3), align=64)
    xa = np.from_dlpack(x)
    buf = client.from_dlpack(x, copy=False)
    print(f"NumPy  -> PJRT : array at {address(xa):#x}, PJRT buffer at {buf.data_ptr:#x}")
    assert buf.data_ptr == address(xa)

    out = client.compile(AFFINE).execute(buf)[0]
    y = np.from_dlpack(out)
    print(f"PJRT   -> NumPy: result buffer at {out.data_ptr:#x}, array at {address(y):#x}: {y.tolist()}")
    assert address(y) == out.data_ptr
    assert (y == 2 * xa + 1).all()

    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("SKIP JAX: jax is not installed")
        return 0
    j = jnp.arange(6, dtype=jnp.float32).reshape(2, 3) * 10
    jptr = j.unsafe_buffer_pointer()
    # A jax.Array is READ_ONLY (immutable), and a PJRT buffer is writable (an execution may
    # donate it): PJRT gets a copy, never a view of JAX's memory.
    jbuf = client.from_dlpack(j)
    print(f"JAX    -> PJRT : jax.Array at {jptr:#x}, PJRT buffer at {jbuf.data_ptr:#x} (a copy: JAX's array is read-only)")
    assert jbuf.data_ptr != jptr
    assert (np.from_dlpack(jbuf) == np.asarray(j)).all()
    back = jax.dlpack.from_dlpack(out)
    print(f"PJRT   -> JAX  : result buffer at {out.data_ptr:#x}, jax.Array at {back.unsafe_buffer_pointer():#x}")
    assert back.unsafe_buffer_pointer() == out.data_ptr
    print("roundtrip: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
