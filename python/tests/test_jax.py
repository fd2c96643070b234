"""JAX 0.12 and dlport, both ways: zero-copy, deleter counts, dtypes JAX alone exports."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import dlport
from conftest import collect
from dlport.testing import Producer, aligned


def test_dlport_to_jax_is_zero_copy_and_released_once():
    src = Producer(aligned(16, np.float32))
    src.array[:] = np.linspace(0, 1, 16, dtype=np.float32)
    t = dlport.from_dlpack(src, copy=False)
    x = jax.dlpack.from_dlpack(t)
    assert x.unsafe_buffer_pointer() == src.address, "JAX views 64-byte-aligned data"
    np.testing.assert_array_equal(np.asarray(x), src.array)
    assert t._dlpack_users == 1
    del x
    collect()
    assert t._dlpack_users == 0, "JAX released dlport's export exactly once"
    del t
    collect()
    assert src.deleted == 1


def test_jax_to_dlport_reads_the_same_memory():
    x = jnp.arange(8, dtype=jnp.float32) * 2
    t = dlport.from_dlpack(x)
    assert t.data_ptr() == x.unsafe_buffer_pointer()
    assert (t.shape, t.dtype, t.device) == ((8,), "float32", "cpu")
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(8, dtype=np.float32) * 2)
    del t
    collect()
    assert float(x.sum()) == 56.0, "JAX's array is intact after dlport released it"


def test_bfloat16_round_trip_through_jax():
    # NumPy cannot export ml_dtypes' bfloat16 through DLPack; JAX can.
    x = jnp.arange(10, dtype=jnp.bfloat16) / 4
    t = dlport.from_dlpack(x)
    assert t.dtype == "bfloat16" and t.nbytes == 20
    y = jax.dlpack.from_dlpack(t)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("kind", ["transposed", "negative_step", "broadcast"])
def test_strided_numpy_views_reach_jax_compacted(kind):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = {"transposed": base.T, "negative_step": base[::-1, ::-2],
         "broadcast": np.broadcast_to(np.arange(5, dtype=np.float32), (3, 5))}[kind]
    c = dlport.from_dlpack(v).compact()
    x = jax.dlpack.from_dlpack(c)
    np.testing.assert_array_equal(np.asarray(x), v)
    assert x.unsafe_buffer_pointer() == c.data_ptr(), "JAX views the compacted copy"
