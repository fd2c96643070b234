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


SWEEP_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32",
                "float64", "complex64"]
SWEEP_LAYOUTS = {
    "compact": lambda a: a,
    "offset_row": lambda a: a[1:],
    "transposed": lambda a: a.T,
    "step": lambda a: a[:, ::2],
    "negative_step": lambda a: a[::-1, ::-2],
    "broadcast": lambda a: np.broadcast_to(a[0], (5, a.shape[1])),
}


@pytest.mark.parametrize("layout", list(SWEEP_LAYOUTS))
@pytest.mark.parametrize("dtype", SWEEP_DTYPES)
def test_every_numpy_view_reaches_jax_with_the_layout_option(dtype, layout):
    """The 66 dtype x layout cases: `from_dlpack(v, layout="compact", align=64)` gives JAX what
    it takes in one call, a view where the data already is compact and aligned, else one copy
    (`copied`), which JAX then views; the values are checked."""
    a = (np.arange(48) % 7).astype(dtype).reshape(4, 12)
    v = SWEEP_LAYOUTS[layout](a)
    view_ok = v.flags.c_contiguous and v.ctypes.data % 64 == 0
    t = dlport.from_dlpack(v, layout="compact", align=64)
    assert t.copied == (not view_ok)
    assert t.strides == dlport.from_dlpack(np.empty(v.shape, v.dtype)).strides, "row-major"
    with jax.enable_x64(True):  # else JAX converts 64-bit types to 32 bits (its own copy)
        x = jax.dlpack.from_dlpack(t)
    assert x.dtype == v.dtype
    assert x.unsafe_buffer_pointer() == t.data_ptr(), "JAX views dlport's tensor: one copy at most"
    if not t.copied:
        assert t.data_ptr() == v.ctypes.data
    np.testing.assert_array_equal(np.asarray(x), v)


def test_the_layout_option_refuses_a_needed_copy_under_copy_false_and_checks_its_arguments():
    v = np.arange(12.0).reshape(3, 4).T
    with pytest.raises(BufferError, match="layout") as e:
        dlport.from_dlpack(v, layout="compact", copy=False)
    assert e.value.code > 0
    with pytest.raises(ValueError, match=r"layout = 'C' is not a layout dlport knows"):
        dlport.from_dlpack(v, layout="C")
    with pytest.raises(TypeError, match="layout must be"):
        dlport.from_dlpack(v, layout=1)
    for bad in (3, 0, -64, 1 << 31):
        with pytest.raises(ValueError, match=rf"align = {bad} is out of range: it must be a power of two"):
            dlport.from_dlpack(v, align=bad)
    with pytest.raises(TypeError, match="align must be"):
        dlport.from_dlpack(v, align="64")
    # align alone keeps any layout: a strided view stays a view where its first element is aligned.
    a = dlport.from_dlpack(v, align=1)
    assert not a.copied and a.data_ptr() == v.ctypes.data
    # Tensor.compact(align=) as the same option on a tensor.
    t = dlport.from_dlpack(v).compact(align=128)
    assert t.copied and t.data_ptr() % 128 == 0
    np.testing.assert_array_equal(np.from_dlpack(t), v)
