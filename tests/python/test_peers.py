"""dlport exchanges tensors with the real NumPy and JAX through DLPack capsules, via its C ABI.

Each case asserts values, addresses and deleter counts."""

import gc

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import dlport_ctypes as dl


def aligned(n, dtype, align=64):
    """A NumPy array whose data is `align`-byte aligned (JAX views only such data)."""
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    a = raw[off:off + n * dtype.itemsize].view(dtype)
    assert a.ctypes.data % align == 0
    return a


def jax_ptr(x):
    return x.unsafe_buffer_pointer()


def released():
    gc.collect()
    return dl.export_counts()


# ── dlport → NumPy and JAX ──

def test_dlport_to_numpy_is_zero_copy_and_releases_once():
    src = dl.Producer(aligned(12, np.float32))
    src.array[:] = np.arange(12, dtype=np.float32)
    t = dl.from_dlpack(src, copy=False)
    e0, r0 = released()
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr == src.array.ctypes.data, "no copy"
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32))
    e1, r1 = released()
    assert (e1 - e0, r1 - r0) == (1, 0), "one export, not yet released"
    del a
    e2, r2 = released()
    assert (e2 - e0, r2 - r0) == (1, 1), "the dlport deleter ran exactly once"
    t.free()
    assert src.deleted == 1


def test_dlport_to_jax_is_zero_copy_and_releases_once():
    src = dl.Producer(aligned(16, np.float32))
    src.array[:] = np.linspace(0, 1, 16, dtype=np.float32)
    t = dl.from_dlpack(src, copy=False)
    e0, r0 = released()
    x = jax.dlpack.from_dlpack(t)
    assert jax_ptr(x) == src.array.ctypes.data, "JAX views 64-byte-aligned data without a copy"
    np.testing.assert_array_equal(np.asarray(x), src.array)
    del x
    e1, r1 = released()
    assert (e1 - e0, r1 - r0) == (1, 1), "exported once, released exactly once"
    t.free()
    assert src.deleted == 1


# ── NumPy and JAX → dlport ──

def test_numpy_to_dlport_consumes_the_capsule_and_releases_the_producer():
    import weakref
    a = np.arange(10, dtype=np.int64)
    alive = weakref.ref(a)
    cap = a.__dlpack__(max_version=(1, 3))
    assert dl.capsule_name(cap) == "dltensor_versioned"
    ptr, versioned = dl.consume_capsule(cap)
    assert dl.capsule_name(cap) == "used_dltensor_versioned"
    t = dl.import_managed(ptr, versioned, copy=False)
    assert t.data_ptr == a.ctypes.data
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, np.arange(10))
    del a, cap, back
    gc.collect()
    assert alive() is not None, "dlport still holds NumPy's tensor"
    t.free()
    gc.collect()
    assert alive() is None, "NumPy's deleter ran when dlport released it"


def test_jax_to_dlport_reads_and_releases():
    x = jnp.arange(8, dtype=jnp.float32) * 2
    addr = jax_ptr(x)
    cap = x.__dlpack__()
    assert dl.capsule_name(cap) == "dltensor"
    t = dl.from_dlpack(cap, copy=False)
    assert dl.capsule_name(cap) == "used_dltensor"
    assert t.data_ptr == addr
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(8, dtype=np.float32) * 2)
    info = t.describe()
    assert info["shape"] == [8] and info["dtype"] == "float32" and info["backend"] == "cpu"
    t.free()
    del cap
    gc.collect()
    assert float(x.sum()) == 56.0, "JAX's array is intact after dlport released its reference"


# ── the seed: pinned memory that JAX refused ──

@pytest.mark.parametrize("style", ["torch_advertises_pinned", "capsule_says_pinned"])
def test_pinned_memory_reaches_jax_and_numpy_through_the_host_view(style):
    data = aligned(32, np.float32)
    data[:] = np.arange(32, dtype=np.float32)
    if style == "torch_advertises_pinned":
        # PyTorch's pinned tensors: __dlpack_device__ says kDLCUDAHost, the capsule says kDLCPU.
        obj = dl.Producer(data, capsule_device=(1, 0), advertised=(3, 0))
    else:
        obj = dl.Producer(data, capsule_device=(3, 0), advertised=(3, 0))

    # The seed bug, reproduced: JAX maps kDLCUDAHost to its "cuda" backend, absent here.
    with pytest.raises(RuntimeError, match="Unknown backend cuda"):
        jax.dlpack.from_dlpack(obj)

    # Fixed: dlport's host view presents the same memory as kDLCPU, without a copy.
    view = dl.host_view(obj)
    assert view.__dlpack_device__() == (1, 0)
    x = jax.dlpack.from_dlpack(view)
    a = np.from_dlpack(view)
    assert jax_ptr(x) == data.ctypes.data, "JAX got the pinned memory itself"
    assert a.ctypes.data == data.ctypes.data, "NumPy got the pinned memory itself"
    np.testing.assert_array_equal(np.asarray(x), data)
    np.testing.assert_array_equal(a, data)

    # The original owner is released exactly once, when both consumers are gone.
    view.free()
    gc.collect()
    assert obj.deleted == 0, "JAX and NumPy still hold it"
    del x
    gc.collect()
    assert obj.deleted == 0, "NumPy still holds it"
    del a
    gc.collect()
    assert obj.deleted == 1


def test_device_memory_is_refused_by_the_host_view():
    obj = dl.Producer(aligned(4, np.float32), capsule_device=(2, 0), advertised=(2, 0))
    with pytest.raises(dl.DlportError, match="a copy would be needed"):
        dl.host_view(obj)
    assert obj.deleted == 1, "the refused tensor was released"


# ── non-contiguous views compacted for JAX ──

VIEWS = {
    "transposed": lambda: np.arange(24, dtype=np.float32).reshape(4, 6).T,
    "negative_step": lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::-2],
    "broadcast": lambda: np.broadcast_to(np.arange(5, dtype=np.int32), (3, 5)),
}


@pytest.mark.parametrize("kind", list(VIEWS))
def test_strided_numpy_views_are_compacted_for_jax(kind):
    v = VIEWS[kind]()
    t = dl.from_dlpack(v, copy=None, layout="row_major", alignment=64)
    info = t.describe()
    assert info["copied"] and info["contiguity"] in ("row_major", "both")
    assert t.data_ptr % 64 == 0
    x = jax.dlpack.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(x), v)
    assert jax_ptr(x) == t.data_ptr, "JAX views the compacted copy"

    with pytest.raises(dl.DlportError, match="copy policy is Never: the layout is"):
        dl.from_dlpack(VIEWS[kind](), copy=False, layout="row_major", alignment=64)

    c = dl.compact(VIEWS[kind]())
    np.testing.assert_array_equal(np.from_dlpack(c), v)


# ── dtypes ──

@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64, np.float16, np.float32, np.float64,
                                   np.complex64, np.complex128])
def test_numpy_round_trip_by_dtype(dtype):
    a = (np.arange(12) % 3 == 1) if dtype is np.bool_ else (np.arange(12) * 3).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * a
    a = a.reshape(3, 4)
    t = dl.from_dlpack(a, copy=False)
    back = np.from_dlpack(t)
    assert back.dtype == a.dtype
    assert back.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(back, a)


def test_bfloat16_round_trip_through_jax():
    # NumPy cannot export ml_dtypes' bfloat16 through DLPack; JAX can.
    x = jnp.arange(10, dtype=jnp.bfloat16) / 4
    t = dl.from_dlpack(x, copy=False)
    assert t.describe()["dtype"] == "bfloat16"
    y = jax.dlpack.from_dlpack(t)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x).astype(ml_dtypes.bfloat16))


def test_read_only_survives():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    t = dl.from_dlpack(a, copy=False)
    assert t.describe()["read_only"]
    b = np.from_dlpack(t)
    assert not b.flags.writeable
    np.testing.assert_array_equal(b, a)


# ── bad capsules ──

def test_bad_capsules_raise_with_dlports_message():
    a = np.arange(4.0)
    wrong = dl.py.PyCapsule_New(a.ctypes.data, b"not_a_tensor", None)
    with pytest.raises(ValueError, match="not a DLPack capsule"):
        dl.consume_capsule(wrong)

    cap = a.__dlpack__(max_version=(1, 3))
    ptr, versioned = dl.consume_capsule(cap)
    with pytest.raises(ValueError, match="already consumed"):
        dl.consume_capsule(cap)
    dl.import_managed(ptr, versioned).free()

    with pytest.raises(dl.DlportError, match="managed tensor pointer is NULL"):
        dl.import_managed(None, True)

    v2 = dl.Producer(np.arange(3.0), versioned=True, version=(2, 0))
    with pytest.raises(dl.DlportError, match=r"version = 2.0 is not supported"):
        dl.from_dlpack(v2)
    assert v2.deleted == 1, "a 2.0 tensor is released, not leaked"

    bad = dl.Producer(np.arange(6.0), shape=(2, -3))
    with pytest.raises(dl.DlportError, match=r"shape\[1\] = -3 is negative"):
        dl.from_dlpack(bad)
    assert bad.deleted == 1

    bad_dtype = dl.Producer(np.arange(4, dtype=np.uint8), dtype=dl.DLDataType(17, 8, 1))
    with pytest.raises(dl.DlportError, match="dtype.bits = 8 is invalid for kDLFloat4_e2m1fn"):
        dl.from_dlpack(bad_dtype)
    assert bad_dtype.deleted == 1


def test_unconsumed_capsule_is_released_by_the_rust_destructor_even_with_an_exception_set():
    src = dl.Producer(np.arange(4.0))
    # int(capsule) fails; CPython drops the temporary capsule while the TypeError is set.
    with pytest.raises(TypeError):
        int(src.__dlpack__())
    gc.collect()
    assert src.deleted == 1, "released exactly once, and the pending TypeError survived"

    used = dl.Producer(np.arange(4.0))
    cap = used.__dlpack__()
    ptr, versioned = dl.consume_capsule(cap)
    del cap
    gc.collect()
    assert used.deleted == 0, "a used_* capsule does not release: the consumer owns it"
    dl.import_managed(ptr, versioned).free()
    assert used.deleted == 1


def test_describe_and_convert():
    src = dl.Producer(np.arange(6.0).reshape(2, 3))
    ptr = src.managed()
    info = dl.describe_managed(ptr, False)
    assert info["shape"] == [2, 3] and info["strides"] == [3, 1] and info["dtype"] == "float64"
    assert src.deleted == 0, "describe borrows"
    out = dl.c_void_p()
    dl.check(dl.lib.dlport_convert(ptr, 0, 1, dl.ctypes.byref(out)))
    vinfo = dl.describe_managed(out.value, True)
    assert vinfo["version"] == {"major": 1, "minor": 3}
    dl.lib.dlport_release(out.value, 1)
    assert src.deleted == 1
