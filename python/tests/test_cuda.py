"""CUDA through the package: host to device and back by copies, the DLPack stream hand-off,
the exchange API with device memory, device memory refused by the buffer protocol. Skipped
without a CUDA driver (as on the CI machines); on a machine with one they must pass. Not yet run
on a GPU: no device machine was lent to the session that wrote them."""

import numpy as np
import pytest

import dlport
from conftest import collect


def cuda_tensor(a):
    try:
        return dlport.from_dlpack(a, device="cuda:0")
    except BufferError as e:
        if e.code in (23, 33):  # no backend for kDLCUDA / no driver
            pytest.skip(f"no CUDA backend: {e}")
        raise


def test_host_to_device_and_back_by_copies():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = cuda_tensor(a)
    assert (g.device, g.memory, g.shape, g.dtype) == ("cuda:0", "cuda:0", (3, 4), "float32")
    assert g.__dlpack_device__() == (2, 0)
    with pytest.raises(BufferError, match="copy policy is Never"):
        dlport.from_dlpack(g, device="cpu", copy=False)
    h = dlport.from_dlpack(g, device="cpu")
    np.testing.assert_array_equal(np.from_dlpack(h), a)
    assert h.data_ptr() != a.ctypes.data


def test_stream_hand_off_and_bad_streams():
    g = cuda_tensor(np.arange(8, dtype=np.int32))
    for stream in (None, 1, 2, -1):
        cap = g.__dlpack__(stream=stream, max_version=(1, 3))
        assert dlport.from_dlpack(cap).data_ptr() == g.data_ptr()
    with pytest.raises(ValueError, match="0 is ambiguous") as e:
        g.__dlpack__(stream=0)
    assert e.value.code == 34
    collect()
    assert g._dlpack_users == 0


def test_the_exchange_api_carries_device_tensors():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    g = cuda_tensor(np.arange(5, dtype=np.float64))
    x = tvm_ffi.from_dlpack(g)
    assert x.data_ptr() == g.data_ptr() and x.device.dlpack_device_type() == 2
    r = tvm_ffi.get_global_func("testing.echo")(g)
    assert isinstance(r, dlport.Tensor) and r.data_ptr() == g.data_ptr() and r.device == "cuda:0"


def test_device_memory_has_no_buffer_protocol():
    g = cuda_tensor(np.arange(4, dtype=np.float32))
    with pytest.raises(BufferError, match="cuda:0 memory"):
        memoryview(g)


def test_pickling_device_memory_needs_permission_to_copy():
    import copy
    import pickle

    a = np.arange(6, dtype=np.float32)
    g = cuda_tensor(a)
    with pytest.raises(BufferError, match=r"dlport.pickling\(device_copy=True\)"):
        pickle.dumps(g, protocol=5)
    with dlport.pickling(device_copy=True):
        s = pickle.dumps(g, protocol=5)
    u = pickle.loads(s)
    assert (u.memory, u.origin) == ("cpu", "cuda:0")
    np.testing.assert_array_equal(np.from_dlpack(u), a)
    d = copy.deepcopy(g)  # a copy on the device
    assert d.memory == "cuda:0" and d.data_ptr() != g.data_ptr() and d.copied
