"""The buffer protocol for host memory: memoryview, bytes, struct formats, contiguity
requests, writability, and the refusals (device memory, dtypes without a format)."""

import array
import ctypes
import struct

import numpy as np
import pytest

import dlport
from conftest import collect, needs_numpy_dlpack_1
from dlport.testing import Producer, aligned

FORMATS = {np.bool_: "?", np.int8: "b", np.int16: "h", np.int32: "i", np.int64: "q",
           np.uint8: "B", np.uint16: "H", np.uint32: "I", np.uint64: "Q", np.float16: "e",
           np.float32: "f", np.float64: "d", np.complex64: "Zf", np.complex128: "Zd"}

PYBUF_WRITABLE, PYBUF_ND = 0x1, 0x8
_get = ctypes.pythonapi.PyObject_GetBuffer
_get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
_release = ctypes.pythonapi.PyBuffer_Release
_release.argtypes = [ctypes.c_void_p]


def get_buffer(obj, flags):
    """PyObject_GetBuffer with exactly these flags (raising the exporter's error), then release."""
    view = ctypes.create_string_buffer(128)  # larger than any Py_buffer
    _get(obj, view, flags)
    _release(view)


def test_the_protocol_is_installed_without_a_warning():
    """Importing dlport installs the buffer protocol; where it cannot, the import warns
    (RuntimeWarning), which -W error turns into a failure here."""
    import subprocess
    import sys

    prog = "import dlport, numpy; assert bytes(dlport.from_dlpack(numpy.arange(2, dtype='u1'))) == bytes([0, 1])"
    subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", prog], check=True)


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_memoryview_has_the_format_shape_strides_and_bytes(dtype):
    a = (np.arange(6) % 2 == 0) if dtype is np.bool_ else np.arange(6).astype(dtype)
    a = a.reshape(2, 3)
    m = memoryview(dlport.from_dlpack(a))
    assert m.format == FORMATS[dtype]
    assert (m.shape, m.strides, m.itemsize, m.nbytes) == (a.shape, a.strides, a.itemsize, a.nbytes)
    assert bytes(m) == a.tobytes()
    if dtype is np.int32:
        assert struct.unpack("6i", m) == tuple(range(6))


def test_strided_memory_is_described_by_byte_strides_and_refused_where_contiguity_is_needed():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = base[::-1, ::2]
    t = dlport.from_dlpack(v)
    m = memoryview(t)
    assert m.strides == v.strides and not m.c_contiguous
    np.testing.assert_array_equal(np.asarray(m), v)
    with pytest.raises(BufferError, match=r"C-contiguous buffer .* t.compact\(\)"):
        get_buffer(t, PYBUF_ND)  # shape without strides: C-contiguous only
    with pytest.raises(BufferError, match="C-contiguous"):
        array.array("f").frombytes(t)  # a simple buffer
    assert bytes(m) == v.tobytes(), "memoryview copies strided memory itself"
    np.testing.assert_array_equal(np.frombuffer(t.compact(), dtype=np.float32).reshape(4, 3), v)


def test_fortran_order_satisfies_f_contiguous_requests():
    f = np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    m = memoryview(dlport.from_dlpack(f))
    assert m.f_contiguous and not m.c_contiguous
    np.testing.assert_array_equal(np.asarray(m), f)


@needs_numpy_dlpack_1
def test_writes_through_the_buffer_reach_the_memory_and_read_only_is_refused():
    a = np.zeros(4, dtype=np.int64)
    m = memoryview(dlport.from_dlpack(a))
    assert not m.readonly
    m[2] = 7
    assert a[2] == 7
    ro = np.arange(4, dtype=np.int64)
    ro.flags.writeable = False
    t = dlport.from_dlpack(ro)
    assert memoryview(t).readonly
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(t, PYBUF_WRITABLE)


def test_pinned_host_memory_is_reachable_device_memory_is_not():
    src = Producer(aligned(4, np.float32), capsule_device=(1, 0), advertised=(3, 0))
    src.array[:] = [1, 2, 3, 4]
    assert memoryview(dlport.from_dlpack(src)).tolist() == [1, 2, 3, 4]
    jnp = pytest.importorskip("jax.numpy", reason="JAX 0.12 needs Python >= 3.12")

    bf = dlport.from_dlpack(jnp.ones(3, dtype=jnp.bfloat16))
    with pytest.raises(BufferError, match="dtype bfloat16 has no buffer-protocol format"):
        memoryview(bf)


def test_the_view_keeps_the_tensor_alive_and_releases_it():
    src = Producer(aligned(8, np.uint8))
    t = dlport.from_dlpack(src)
    m = memoryview(t)
    del t
    collect()
    assert src.deleted == 0, "the memoryview holds the tensor"
    m.release()
    collect()
    assert src.deleted == 1
