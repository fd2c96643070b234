"""The example PyO3 extension (dlport_example, on dlport-pyo3) with NumPy, JAX and tvm-ffi:
any producer in as a `DLPackTensor` argument, dlport tensors out, checked by address,
reference counts and weak references."""

import gc
import sys
import weakref

import numpy as np
import pytest

import dlport
import dlport_example as ext
from dlport.testing import Producer, aligned, counting_dunder


def collect():
    gc.collect()
    gc.collect()


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


# ── NumPy ──

def test_passthrough_returns_the_same_numpy_memory_without_a_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ext.passthrough(a)
    assert t.data_ptr() == address(a)
    assert (t.shape, t.dtype, t.device, t.copied) == ((3, 4), "float32", "cpu", False)
    b = np.from_dlpack(t)
    assert address(b) == address(a), "NumPy takes the result without a copy"
    np.testing.assert_array_equal(b, a)


def test_the_result_is_a_dlpack_producer_with_the_exchange_api():
    t = ext.passthrough(np.zeros(3, dtype=np.int64))
    assert type(t).__name__ == "Tensor"
    assert t.__dlpack_device__() == (1, 0)
    assert type(t).__dlpack_c_exchange_api__ is not None
    u = dlport.from_dlpack(t)  # through the extension's own exchange table
    assert u.data_ptr() == t.data_ptr()


def test_strided_views_pass_through_as_views():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = base[::-1, ::2]
    t = ext.passthrough(v)
    assert t.data_ptr() == address(v) and t.strides == (-6, 2)
    np.testing.assert_array_equal(np.from_dlpack(t), v)


def test_scale_computes_into_a_new_tensor_numpy_takes_without_a_copy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = ext.scale(a, 2.5)
    assert r.data_ptr() != address(a) and r.shape == (2, 3)
    b = np.from_dlpack(r)
    assert address(b) == r.data_ptr(), "NumPy views the result's memory"
    del r
    collect()
    np.testing.assert_array_equal(b, a * 2.5)  # the export keeps the memory alive


def test_scale_compacts_a_strided_input_first():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(np.from_dlpack(ext.scale(base.T, -1.0)), -base.T)


def test_the_producers_array_lives_as_long_as_the_tensor():
    a = np.arange(8, dtype=np.float64)
    alive = weakref.ref(a)
    before = sys.getrefcount(a)
    t = ext.passthrough(a)
    assert sys.getrefcount(a) == before + 1, "the tensor holds one reference (NumPy's capsule)"
    del a
    collect()
    assert alive() is not None, "the tensor keeps NumPy's array alive"
    b = np.from_dlpack(t)
    del t
    collect()
    assert alive() is not None, "NumPy's view of the result keeps it alive"
    np.testing.assert_array_equal(b, np.arange(8, dtype=np.float64))
    del b
    collect()
    assert alive() is None, "released once the last holder is gone"


def test_take_releases_the_argument_at_once():
    a = np.arange(4, dtype=np.float32)
    before = sys.getrefcount(a)
    assert ext.take(a) is None
    assert sys.getrefcount(a) == before, "the import was released when the call returned"


def test_a_producers_deleter_runs_exactly_once():
    src = Producer(aligned(16, np.float32))
    t = ext.passthrough(src)
    b = np.from_dlpack(t)
    del t
    collect()
    assert src.deleted == 0
    del b
    collect()
    assert src.deleted == 1


# ── refusals ──

def test_an_object_without_dlpack_is_a_type_error_naming_its_type():
    with pytest.raises(TypeError, match=r"__dlpack__ or a DLPack capsule, got list") as e:
        ext.passthrough([1.0, 2.0])
    assert isinstance(e.value, dlport.DLPackError)


def test_a_failing_producer_is_a_buffer_error_naming_the_producer():
    class Broken:
        def __dlpack__(self, **kwargs):
            raise RuntimeError("no tensor today")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(BufferError, match=r"Broken.__dlpack__\(\) failed.*no tensor today"):
        ext.passthrough(Broken())


def test_a_bare_capsule_is_taken_once():
    cap = np.arange(3.0).__dlpack__()
    np.testing.assert_array_equal(np.from_dlpack(ext.passthrough(cap)), np.arange(3.0))
    with pytest.raises(ValueError, match="already consumed") as e:
        ext.passthrough(cap)
    assert isinstance(e.value, dlport.DLPackError)


def test_import_options_refusals_are_the_packages():
    # scale() asks for host memory, compact: a read-only NumPy array is still readable.
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    np.testing.assert_array_equal(np.from_dlpack(ext.scale(ro, 2.0)), ro * 2)
    with pytest.raises(BufferError, match="a copy would be needed.*strided") as e:
        ext.compact_view(np.arange(6, dtype=np.float32)[::2])
    assert isinstance(e.value, dlport.DLPackError)
    a = np.arange(6, dtype=np.float32)
    assert ext.compact_view(a).data_ptr() == address(a), "compact memory is viewed, not copied"


def test_scale_refuses_other_dtypes_naming_the_field_and_value():
    with pytest.raises(TypeError, match=r"x\.dtype = int32"):
        ext.scale(np.arange(3, dtype=np.int32), 2.0)


# ── JAX ──

def test_jax_arrays_pass_through_and_back_without_a_copy():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(8, dtype=jnp.float32) * 2
    t = ext.passthrough(x)
    assert t.data_ptr() == x.unsafe_buffer_pointer()
    y = jax.dlpack.from_dlpack(t)
    assert y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer(), "JAX takes it without a copy"
    np.testing.assert_array_equal(np.asarray(y), np.arange(8, dtype=np.float32) * 2)


def test_scale_of_a_jax_array_goes_to_jax_without_a_copy():
    jax = pytest.importorskip("jax")
    r = ext.scale(jax.numpy.ones((2, 2), dtype=jax.numpy.float32), 3.0)
    y = jax.dlpack.from_dlpack(r)
    np.testing.assert_array_equal(np.asarray(y), np.full((2, 2), 3.0, dtype=np.float32))
    assert r.data_ptr() % 64 == 0
    assert y.unsafe_buffer_pointer() == r.data_ptr(), "JAX takes the result without a copy"


# ── tvm-ffi ──

def test_tvm_ffi_tensors_come_in_through_their_exchange_api():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    use_count = tvm_ffi.get_global_func("testing.object_use_count")
    a = aligned(8, np.float32)
    a[:] = np.arange(8)
    x = tvm_ffi.from_dlpack(a)

    Spy = counting_dunder(tvm_ffi.core.DLTensorTestWrapper)

    base = use_count(x)
    t = ext.passthrough(Spy(x))
    assert Spy.calls == [], "the exchange API was used, not __dlpack__"
    assert t.data_ptr() == x.data_ptr() == a.ctypes.data
    assert use_count(x) == base + 1
    y = tvm_ffi.from_dlpack(t)
    assert y.data_ptr() == a.ctypes.data, "tvm-ffi takes the result without a copy"
    np.testing.assert_array_equal(np.from_dlpack(ext.scale(x, 2.0)), np.arange(8) * 2.0)
    del t, y
    collect()
    assert use_count(x) == base, "tvm-ffi's deleter ran exactly once"


def test_a_tvm_ffi_function_takes_and_returns_the_extensions_tensors():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    echo = tvm_ffi.get_global_func("testing.echo")
    a = aligned(8, np.float32)
    t = ext.passthrough(a)
    # Argument: the extension's managed_tensor_from_py_object_no_sync; result: to_py_object.
    r = echo(t)
    assert type(r) is type(t), "the result came back through the extension's to_py_object"
    assert r.data_ptr() == t.data_ptr() == a.ctypes.data
    assert t._dlpack_users == 1
    del r
    collect()
    assert t._dlpack_users == 0, "tvm-ffi released the extension's export exactly once"


# ── Byte counts (issue 56): the extension's tensors share dlport-pyo3's checks ──

def test_a_tensor_whose_bytes_do_not_fit_a_buffer_is_refused_and_nbytes_is_exact():
    # float64, 2**61 + 1 elements over one (stride 0): 2**64 + 8 bytes, which no buffer holds.
    t = ext.passthrough(Producer(np.ones(1), shape=[2**61 + 1], strides=[0]))
    assert t.nbytes == 8 * (2**61 + 1)
    for read in (bytearray, lambda t: memoryview(t).tobytes()):
        with pytest.raises(BufferError, match="does not fit a buffer"):
            read(t)
    empty = ext.passthrough(Producer(np.ones(1), shape=[2**33, 2**33, 0], strides=[0, 0, 0]))
    assert empty.nbytes == 0 and bytearray(empty) == b""
