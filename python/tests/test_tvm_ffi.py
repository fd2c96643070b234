"""The DLPack 1.3 C exchange API both ways with apache-tvm-ffi, checked by address and by
deleter (reference) counts, and dlport's table called directly through ctypes."""

import ctypes

import numpy as np
import pytest

import dlport
from conftest import collect, needs_numpy_dlpack_1
from dlport.testing import (MANAGED_PP, SET_ERROR, DLDataType, DLDevice, DLManagedTensorVersioned,
                            DLPackExchangeAPI, DLPackVersion, DLTensor, Producer, aligned, bare_capsule)
from dlport.testing import counting_dunder
from dlport.testing import exchange_api as table

tvm_ffi = pytest.importorskip("tvm_ffi")
use_count = tvm_ffi.get_global_func("testing.object_use_count")
echo = tvm_ffi.get_global_func("testing.echo")


def take_object(address: int):
    """The object behind a new reference returned through a void** (the reference is dropped)."""
    obj = ctypes.cast(address, ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(obj))
    return obj


@pytest.fixture
def tvm_tensor():
    a = aligned(8, np.float32)
    a[:] = np.arange(8)
    return a, tvm_ffi.from_dlpack(a)


# ── dlport as the consumer of tvm-ffi's table ──

def test_dlport_imports_through_tvm_ffis_exchange_api_without_dunder_calls(tvm_tensor):
    a, x = tvm_tensor

    Spy = counting_dunder(tvm_ffi.core.DLTensorTestWrapper)

    base = use_count(x)
    t = dlport.from_dlpack(Spy(x))
    assert Spy.calls == [], "the exchange API was used, not __dlpack__"
    assert t.data_ptr() == a.ctypes.data == x.data_ptr(), "the same memory"
    assert use_count(x) == base + 1, "dlport holds one reference to tvm-ffi's tensor"
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(8, dtype=np.float32))
    del t
    collect()
    assert use_count(x) == base, "tvm-ffi's deleter ran exactly once"


# ── dlport as the producer for tvm-ffi ──

def test_tvm_ffi_imports_dlport_through_dlports_exchange_api(tvm_tensor, monkeypatch):
    a, _ = tvm_tensor
    t = dlport.from_dlpack(a)

    def no_dunder(self, **kwargs):
        raise AssertionError("tvm-ffi called __dlpack__ instead of the exchange API")

    monkeypatch.setattr(dlport.Tensor, "__dlpack__", no_dunder)
    y = tvm_ffi.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr() == a.ctypes.data
    assert t._dlpack_users == 1
    del y
    collect()
    assert t._dlpack_users == 0, "tvm-ffi released dlport's export exactly once"


def test_a_tvm_ffi_function_takes_and_returns_dlport_tensors(tvm_tensor):
    a, _ = tvm_tensor
    t = dlport.from_dlpack(a)
    # Argument: dlport's managed_tensor_from_py_object_no_sync; result: to_py_object.
    r = echo(t)
    assert isinstance(r, dlport.Tensor), "the result came back through dlport's to_py_object"
    assert r.data_ptr() == t.data_ptr() and r.shape == (8,) and r.dtype == "float32"
    assert t._dlpack_users == 1, "the result holds the one export"
    del r
    collect()
    assert t._dlpack_users == 0


def test_a_python_callback_receives_dlport_tensors_from_tvm_ffi(tvm_tensor):
    a, x = tvm_tensor
    seen = []
    callback = tvm_ffi.convert_func(lambda v: seen.append((type(v), v.data_ptr(), v.shape)),
                                    tensor_cls=dlport.Tensor)
    base = use_count(x)
    callback(x)
    assert seen == [(dlport.Tensor, a.ctypes.data, (8,))]
    collect()
    assert use_count(x) == base, "the callback's dlport tensor released tvm-ffi's reference"


# ── dlport's table, entry by entry ──

def test_table_header_and_entries():
    api = table(dlport.Tensor)
    assert (api.header.version.major, api.header.version.minor) == (1, 3)
    assert api.header.prev_api is None
    for name, _ in DLPackExchangeAPI._fields_[1:]:
        assert ctypes.cast(getattr(api, name), ctypes.c_void_p).value, name


def test_from_and_to_py_object_round_trip():
    api = table(dlport.Tensor)
    src = Producer(aligned(6, np.int32), versioned=True)
    t = dlport.from_dlpack(src)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert api.managed_tensor_from_py_object_no_sync(t, ctypes.byref(out)) == 0
    m = out.contents
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.dl_tensor.data == src.address and m.dl_tensor.ndim == 1
    assert t._dlpack_users == 1
    obj = ctypes.c_void_p()
    assert api.managed_tensor_to_py_object_no_sync(ctypes.addressof(m), ctypes.byref(obj)) == 0
    u = take_object(obj.value)
    assert isinstance(u, dlport.Tensor) and u.data_ptr() == src.address
    del t, u
    collect()
    assert src.deleted == 1, "every reference released, the producer's deleter ran once"


def test_from_py_object_refuses_other_types():
    api = table(dlport.Tensor)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="dlport.Tensor objects, got numpy.ndarray"):
        api.managed_tensor_from_py_object_no_sync(np.arange(3), ctypes.byref(out))


def test_to_py_object_leaves_a_refused_tensor_to_the_caller():
    api = table(dlport.Tensor)
    src = Producer(aligned(4, np.float32), versioned=True, version=(2, 0))
    ptr = src.managed()
    obj = ctypes.c_void_p()
    with pytest.raises(BufferError, match="version = 2.0"):
        api.managed_tensor_to_py_object_no_sync(ptr, ctypes.byref(obj))
    assert src.deleted == 0, "not taken: the caller still owns it (tvm-ffi releases it itself)"
    m = DLManagedTensorVersioned.from_address(ptr)
    m.deleter(ctypes.pointer(m))
    assert src.deleted == 1


@needs_numpy_dlpack_1
def test_dltensor_from_py_object_lends_the_tensors_own_fields():
    api = table(dlport.Tensor)
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    t = dlport.from_dlpack(a)
    lent = DLTensor()
    assert api.dltensor_from_py_object_no_sync(t, ctypes.byref(lent)) == 0
    assert lent.data + lent.byte_offset == a.ctypes.data
    assert (lent.device.device_type, lent.ndim) == (1, 2)
    assert (lent.dtype.code, lent.dtype.bits, lent.dtype.lanes) == (2, 64, 1)
    assert [lent.shape[i] for i in range(2)] == [3, 2]
    assert [lent.strides[i] for i in range(2)] == [4, 2]
    assert t._dlpack_users == 0, "a borrowed view takes no reference"
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        api.dltensor_from_py_object_no_sync(dlport.from_dlpack(ro), ctypes.byref(lent))


def test_current_work_stream_is_the_default_stream():
    api = table(dlport.Tensor)
    stream = ctypes.c_void_p(0x1234)
    assert api.current_work_stream(2, 0, ctypes.byref(stream)) == 0
    assert stream.value is None


def test_allocator_makes_a_zeroed_compact_tensor_and_reports_errors():
    api = table(dlport.Tensor)
    shape = (ctypes.c_int64 * 2)(3, 5)
    proto = DLTensor(None, DLDevice(1, 0), 2, DLDataType(2, 32, 1), shape, None, 0)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = []
    on_error = SET_ERROR(lambda ctx, kind, msg: errors.append((kind.decode(), msg.decode())))
    assert api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, on_error) == 0
    m = out.contents
    assert m.flags & 1 == 0 and [m.dl_tensor.strides[i] for i in range(2)] == [5, 1]
    data = (ctypes.c_float * 15).from_address(m.dl_tensor.data + m.dl_tensor.byte_offset)
    assert list(data) == [0.0] * 15
    # The allocation is the caller's: import it into dlport (which releases it once).
    t = dlport.from_dlpack(bare_capsule(ctypes.addressof(m), b"dltensor_versioned"))
    assert t.shape == (3, 5) and t.dtype == "float32"

    bad = DLTensor(None, DLDevice(1, 0), 1, DLDataType(2, 33, 1), shape, None, 0)
    assert api.managed_tensor_allocator(ctypes.byref(bad), ctypes.byref(out), None, on_error) == -1
    assert errors and errors[0][0] == "BufferError" and "bits = 33" in errors[0][1]


# ── tvm-ffi's table driven by dlport's exports, at the C level ──

def test_tvm_ffis_to_py_object_takes_a_dlport_export():
    ours, theirs = table(dlport.Tensor), table(tvm_ffi.core.DLTensorTestWrapper)
    a = aligned(5, np.float32)
    t = dlport.from_dlpack(a)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert ours.managed_tensor_from_py_object_no_sync(t, ctypes.byref(out)) == 0
    obj = ctypes.c_void_p()
    assert theirs.managed_tensor_to_py_object_no_sync(ctypes.cast(out, ctypes.c_void_p).value,
                                                      ctypes.byref(obj)) == 0
    y = take_object(obj.value)
    assert isinstance(y, tvm_ffi.Tensor) and y.data_ptr() == a.ctypes.data
    assert t._dlpack_users == 1
    del y
    collect()
    assert t._dlpack_users == 0
