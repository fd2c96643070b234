"""The seed, end to end through the package: a pinned PyTorch-style tensor goes to JAX.

PyTorch's pinned tensors say kDLCPU in the capsule and kDLCUDAHost (3, 0) in
__dlpack_device__; other producers write (3, 0) in the capsule too. A CPU-only JAX maps (3, 0)
to its "cuda" backend and refuses both. Through dlport (device="cpu") JAX and NumPy take the
same memory without a copy, and the original owner is released exactly once."""

import jax
import numpy as np
import pytest

import dlport
from conftest import collect
from dlport.testing import Producer, aligned

STYLES = {
    # capsule device, advertised device, JAX's refusal
    "torch_pinned": ((1, 0), (3, 0), (RuntimeError, "Unknown backend cuda")),
    "capsule_pinned": ((3, 0), (3, 0), (RuntimeError, "Unknown backend cuda")),
    "managed": ((13, 0), (13, 0), (TypeError, r"unsupported device type \(DLDeviceType: 13")),
}


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("versioned", [False, True])
def test_pinned_and_managed_memory_reach_jax_through_dlport(style, versioned):
    capsule_device, advertised, (refusal, message) = STYLES[style]
    data = aligned(32, np.float32)
    data[:] = np.arange(32, dtype=np.float32)
    obj = Producer(data, capsule_device=capsule_device, advertised=advertised, versioned=versioned)

    # Refused directly: JAX 0.12 on a CPU-only machine has no backend for these devices.
    with pytest.raises(refusal, match=message):
        jax.dlpack.from_dlpack(obj)
    collect()
    assert obj.deleted == (1 if obj.calls else 0), "a capsule JAX refused is released once"
    released_before = obj.deleted

    # Accepted through dlport: the same memory, shown as cpu.
    t = dlport.from_dlpack(obj, device="cpu")
    assert t.device == "cpu" and t.__dlpack_device__() == (1, 0)
    assert t.memory == ("cuda_managed:0" if style == "managed" else "cuda_host:0")
    assert t.data_ptr() == data.ctypes.data
    x = jax.dlpack.from_dlpack(t)
    a = np.from_dlpack(t)
    assert x.unsafe_buffer_pointer() == data.ctypes.data, "JAX got the pinned memory itself"
    assert a.ctypes.data == data.ctypes.data, "NumPy got the pinned memory itself"
    np.testing.assert_array_equal(np.asarray(x), data)
    np.testing.assert_array_equal(a, data)
    assert t._dlpack_users == 2

    # The owner is released exactly once, when the last of dlport, JAX and NumPy lets go.
    del t
    collect()
    assert obj.deleted == released_before, "JAX and NumPy still hold it"
    del x
    collect()
    assert obj.deleted == released_before, "NumPy still holds it"
    del a
    collect()
    assert obj.deleted == released_before + 1


@pytest.mark.parametrize("style", list(STYLES))
def test_without_a_keyword_host_memory_presents_as_cpu_and_reaches_jax(style):
    """The seed with no keyword: JAX, NumPy and a second dlport import take pinned and managed
    memory as it comes out of dlport.from_dlpack(x); `memory` tells the truth."""
    capsule_device, advertised, _ = STYLES[style]
    data = aligned(8, np.float32)
    data[:] = np.arange(8)
    obj = Producer(data, capsule_device=capsule_device, advertised=advertised)
    t = dlport.from_dlpack(obj)
    assert t.device == "cpu" and t.__dlpack_device__() == (1, 0)
    assert t.memory == ("cuda_managed:0" if style == "managed" else "cuda_host:0")
    assert "memory=cuda" in repr(t)
    assert t.data_ptr() == data.ctypes.data
    x = jax.dlpack.from_dlpack(t)
    a = np.from_dlpack(t)
    assert x.unsafe_buffer_pointer() == data.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(np.asarray(x), data)
    del t, x, a
    collect()
    assert obj.deleted == 1


def test_a_host_device_asked_for_by_name_is_presented():
    """`device="cuda_host"` (or its tuple) presents the pinned class itself, for a consumer that
    takes kDLCUDAHost (NumPy, CuPy); a CPU consumer still gets it as cpu through dl_device."""
    data = aligned(8, np.float32)
    obj = Producer(data, capsule_device=(1, 0), advertised=(3, 0))
    t = dlport.from_dlpack(obj, device="cuda_host")
    assert t.device == "cuda_host:0" and t.__dlpack_device__() == (3, 0)
    assert dlport.from_dlpack(obj, device=(3, 0)).device == "cuda_host:0"
    assert t.data_ptr() == data.ctypes.data
    cap = t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    a = np.from_dlpack(_Capsule(cap))
    assert a.ctypes.data == data.ctypes.data
    # NumPy takes kDLCUDAHost itself.
    b = np.from_dlpack(t)
    assert b.ctypes.data == data.ctypes.data
    del a, b, cap, t
    collect()
    assert obj.deleted == 2


def test_device_memory_is_refused_without_a_copy_and_released():
    obj = Producer(aligned(4, np.float32), capsule_device=(2, 0), advertised=(2, 0))
    with pytest.raises(BufferError) as e:
        dlport.from_dlpack(obj, device="cpu", copy=False)
    assert "cuda:0" in str(e.value) and e.value.code > 0
    collect()
    assert obj.deleted == 1, "the refused tensor was released once"


def test_a_capsule_that_contradicts_the_advertised_device_is_refused():
    obj = Producer(aligned(4, np.float32), capsule_device=(2, 0), advertised=(1, 0))
    with pytest.raises(BufferError, match="cuda:0"):
        dlport.from_dlpack(obj)
    collect()
    assert obj.deleted == 1


class _Capsule:
    """Hands one prepared capsule to a consumer that calls __dlpack__."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("copy", [None, False, True])
def test_host_memory_asked_for_as_cuda_host_answers_one_way_for_every_policy(copy):
    """Plain host memory is never presented as pinned memory it is not: `device="cuda_host"`
    needs a copy into pinned memory for every policy, which only a CUDA driver can make, so
    without one every policy refuses (`copy=False` because a copy is needed, the others
    because none can be made) and none returns a view labelled cpu."""
    data = aligned(4, np.float32)
    driver = any(3 in b["device_types"] for b in dlport.backends())
    if copy is False or not driver:
        with pytest.raises(BufferError) as e:
            dlport.from_dlpack(data, device="cuda_host", copy=copy)
        expected = "copy policy" if copy is False else "needs the CUDA driver"
        assert expected in str(e.value), str(e.value)
    else:
        t = dlport.from_dlpack(data, device="cuda_host", copy=copy)
        assert t.device == "cuda_host:0" and t.copied
