"""NumPy 2.5 and dlport, both ways: values, addresses, deleter counts, copies and layouts."""

import weakref

import numpy as np
import pytest

import dlport
from conftest import collect, needs_numpy_dlpack_1
from dlport.testing import READ_ONLY, Producer, aligned

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


def sample(dtype):
    a = (np.arange(12) % 3 == 1) if dtype is np.bool_ else (np.arange(12) * 3).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * a
    return a.reshape(3, 4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_by_dtype_without_a_copy(dtype):
    a = sample(dtype)
    t = dlport.from_dlpack(a, copy=False)
    assert t.dtype == {np.bool_: "bool"}.get(dtype, np.dtype(dtype).name)
    assert (t.shape, t.strides, t.nbytes) == ((3, 4), (4, 1), a.nbytes)
    back = np.from_dlpack(t)
    assert back.dtype == a.dtype and back.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(back, a)


def test_numpy_is_released_when_dlport_lets_go():
    a = np.arange(10, dtype=np.int64)
    alive = weakref.ref(a)
    t = dlport.from_dlpack(a)
    b = np.from_dlpack(t)
    del a, b
    collect()
    assert alive() is not None, "dlport still holds NumPy's tensor"
    assert t._dlpack_users == 0, "NumPy released dlport's export exactly once"
    del t
    collect()
    assert alive() is None, "NumPy's deleter ran when dlport released it"


@needs_numpy_dlpack_1
def test_numpy_capsules_of_both_kinds_are_consumed():
    a = np.arange(6.0)
    for cap in (a.__dlpack__(max_version=(1, 3)), a.__dlpack__()):
        name = cap.__repr__()
        t = dlport.from_dlpack(cap)
        assert t.data_ptr() == a.ctypes.data
        assert "used_" in repr(cap) and "used_" not in name


@needs_numpy_dlpack_1
def test_copy_true_copies_and_the_copy_is_independent():
    a = np.arange(8, dtype=np.float32)
    t = dlport.from_dlpack(a, copy=True)
    assert t.data_ptr() != a.ctypes.data and t.data_ptr() % 64 == 0
    a[:] = -1
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(8, dtype=np.float32))
    # copy=True on export copies again: a consumer gets memory of its own.
    b = np.from_dlpack(t, copy=True)
    assert b.ctypes.data != t.data_ptr()
    assert t._dlpack_users == 0, "the export's copy holds no reference to t"


@needs_numpy_dlpack_1
def test_read_only_survives_both_ways():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    t = dlport.from_dlpack(a, copy=False)
    assert t.readonly and "readonly=True" in repr(t)
    b = np.from_dlpack(t)
    assert not b.flags.writeable and b.ctypes.data == a.ctypes.data
    # The legacy form cannot carry READ_ONLY: a legacy consumer gets a copy, or an error.
    with pytest.raises(BufferError, match="READ_ONLY"):
        t.__dlpack__(copy=False)
    legacy = np.from_dlpack(_Legacy(t))
    assert legacy.ctypes.data != a.ctypes.data
    np.testing.assert_array_equal(legacy, a)


def test_a_read_only_producer_capsule_keeps_its_flag():
    src = Producer(aligned(4, np.float64), versioned=True, flags=READ_ONLY)
    t = dlport.from_dlpack(src)
    assert t.readonly
    del t
    collect()
    assert src.deleted == 1


VIEWS = {
    "transposed": lambda: np.arange(24, dtype=np.float32).reshape(4, 6).T,
    "negative_step": lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::-2],
    "broadcast": lambda: np.broadcast_to(np.arange(5, dtype=np.int32), (3, 5)),
}


@pytest.mark.parametrize("kind", list(VIEWS))
def test_strided_views_import_as_views_and_compact_through_the_copy_kernels(kind):
    if kind == "broadcast" and np.lib.NumpyVersion(np.__version__) < "2.1.0":
        pytest.skip("NumPy < 2.1 does not export broadcast (read-only) arrays")
    v = VIEWS[kind]()
    t = dlport.from_dlpack(v, copy=False)
    assert t.strides == tuple(s // v.itemsize for s in v.strides)
    assert "strides=" in repr(t)
    c = t.compact()
    assert c.strides == tuple(int(np.prod(v.shape[i + 1:])) for i in range(v.ndim))
    assert c.data_ptr() != t.data_ptr() and c.data_ptr() % 64 == 0
    np.testing.assert_array_equal(np.from_dlpack(c), v)
    np.testing.assert_array_equal(np.from_dlpack(t), v)


def test_compact_of_a_compact_aligned_tensor_is_the_same_memory():
    a = aligned(12, np.float32).reshape(3, 4)
    t = dlport.from_dlpack(a)
    assert t.compact().data_ptr() == t.data_ptr() == a.ctypes.data


def test_zero_size_and_zero_dim_tensors():
    for a in (np.zeros((0, 3), dtype=np.float32), np.array(7, dtype=np.int16)):
        t = dlport.from_dlpack(a)
        assert t.shape == a.shape and t.nbytes == a.nbytes
        np.testing.assert_array_equal(np.from_dlpack(t), a)


class _Legacy:
    """A consumer that asks for a legacy capsule (no max_version)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kwargs):
        kwargs.pop("max_version", None)
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()
