"""dlport.to_numpy and dlport.to_jax (issue #57): the dtypes NumPy's and JAX's own DLPack cannot
carry, as ml_dtypes arrays: whole-byte types a view (READ_ONLY kept), sub-byte types unpacked in
one counted copy, every refusal naming why. The upstream cases (tests/upstream) take the real
frameworks' arrays; these take emulated producers of every form."""

import numpy as np
import pytest

import dlport
from dlport import _bridge
from dlport.testing import BFLOAT16, READ_ONLY, DLDataType, Producer, aligned

ml_dtypes = pytest.importorskip("ml_dtypes")

INT4, UINT4, FLOAT4 = DLDataType(0, 4, 1), DLDataType(1, 4, 1), DLDataType(17, 4, 1)


def packed(data, dtype, n, **kw):
    """A tensor of ``n`` sub-byte elements packed in ``data`` (bytes, little bit-endian)."""
    return dlport.from_dlpack(Producer(np.array(data, np.uint8), dtype=dtype, shape=(n,), strides=(1,), **kw))


def test_int4_is_unpacked_in_one_copy():
    t = packed([0x21, 0xF3], INT4, 4)
    assert t.dtype == "int4"
    before = _bridge.copies()
    a = dlport.to_numpy(t)
    assert _bridge.copies() - before == 1
    assert a.dtype == np.dtype(ml_dtypes.int4) and a.tolist() == [1, 2, 3, -1]
    assert a.flags.writeable


@pytest.mark.parametrize(
    "dtype, data, n, want",
    [
        (UINT4, [0xF1, 0x07], 3, [1, 15, 7]),  # an odd count: the last byte's high half unused
        (FLOAT4, [0x21, 0xF7], 4, [0.5, 1.0, 6.0, -6.0]),
        (INT4, [0x98], 2, [-8, -7]),
    ],
)
def test_sub_byte_values(dtype, data, n, want):
    assert dlport.to_numpy(packed(data, dtype, n)).tolist() == want


def test_sub_byte_copy_false_is_refused_naming_why():
    with pytest.raises(dlport.DLPackBufferError, match="copy=False: int4 is packed in DLPack"):
        dlport.to_numpy(packed([0x21], INT4, 2), copy=False)


def test_bfloat16_is_a_view_with_read_only_kept():
    data = aligned(6, np.uint16)
    data[:] = np.array([0, 1, 2, 3, 4, 5], ml_dtypes.bfloat16).view(np.uint16)
    for flags, writable in ((0, True), (READ_ONLY, False)):
        t = dlport.from_dlpack(Producer(data, dtype=BFLOAT16, versioned=True, flags=flags))
        before = _bridge.copies()
        a = dlport.to_numpy(t)
        assert _bridge.copies() == before
        assert a.ctypes.data == t.data_ptr() == data.ctypes.data
        assert a.dtype == np.dtype(ml_dtypes.bfloat16) and a.tolist() == [0, 1, 2, 3, 4, 5]
        assert a.flags.writeable is writable
        assert a.base is not None  # the tensor stays alive while the array lives


def test_strided_bfloat16_view():
    data = aligned(6, np.uint16)
    data[:] = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    t = dlport.from_dlpack(Producer(data, dtype=BFLOAT16, shape=(3,), strides=(2,)))
    a = dlport.to_numpy(t)
    assert a.tolist() == [0, 2, 4] and a.strides == (4,) and a.ctypes.data == data.ctypes.data


def test_copy_true_copies_once():
    t = dlport.from_dlpack(np.arange(4.0))
    before = _bridge.copies()
    a = dlport.to_numpy(t, copy=True)
    assert _bridge.copies() - before == 1 and a.ctypes.data != t.data_ptr() and a.tolist() == [0, 1, 2, 3]


def test_numpy_dtypes_are_numpy_from_dlpack():
    x = np.arange(4, dtype=np.int16)
    a = dlport.to_numpy(x)
    assert a.ctypes.data == x.ctypes.data and a.dtype == np.int16


def test_ml_dtypes_array_is_itself():
    x = np.array([1, 2], ml_dtypes.bfloat16)
    assert dlport.to_numpy(x) is x


def test_to_jax_sub_byte_tensor_unpacks_then_device_put():
    jax = pytest.importorskip("jax")
    before = _bridge.copies()
    j = dlport.to_jax(packed([0x21, 0xF3], INT4, 4))
    assert _bridge.copies() - before == 2  # unpacked, then jax.device_put's copy
    assert str(j.dtype) == "int4" and j.tolist() == [1, 2, 3, -1]
    assert isinstance(j, jax.Array)


def test_to_jax_float32_is_jax_dlpack_view():
    pytest.importorskip("jax")
    x = aligned(4, np.float32)
    before = _bridge.copies()
    j = dlport.to_jax(x)
    assert _bridge.copies() == before and j.unsafe_buffer_pointer() == x.ctypes.data


def test_buffer_protocol_advice_is_to_numpy():
    data = aligned(2, np.uint16)
    t = dlport.from_dlpack(Producer(data, dtype=BFLOAT16))
    with pytest.raises(BufferError, match=r"dlport\.to_numpy\(t\) gives an ml_dtypes array"):
        memoryview(t)


def test_copy_true_of_a_producer_copies_once():
    x = np.arange(4.0)
    before = _bridge.copies()
    a = dlport.to_numpy(x, copy=True)
    assert _bridge.copies() - before == 1 and a.ctypes.data != x.ctypes.data


def test_the_allocation_limit_bounds_every_copy_to_numpy_and_to_jax_make():
    """NumPy's and JAX's copies here count against dlport's limit as dlport's own do."""
    refused = "needs 4194304 bytes, above the allocation limit of 1048576 bytes"
    big = np.zeros(1 << 21, ml_dtypes.bfloat16)  # 4 MiB
    packed4 = dlport.from_dlpack(np.zeros(1 << 18, np.uint8))  # 256 KiB of bytes
    before = dlport.set_alloc_limit(1 << 20)
    try:
        with pytest.raises(BufferError, match=refused):
            dlport.to_numpy(big, copy=True)
        with pytest.raises(BufferError, match=refused):
            dlport.to_numpy(dlport.from_dlpack(np.zeros(1 << 20, np.float32)), copy=True)
        # 2**19 int4 elements unpack through 2**19 * (2 * 4 + 1) bytes of NumPy arrays.
        int4 = dlport.from_dlpack(
            Producer(np.asarray(packed4), dtype=INT4, shape=(1 << 19,), strides=(1,))
        )
        with pytest.raises(BufferError, match="needs 4718592 bytes, above the allocation limit"):
            dlport.to_numpy(int4)
        assert dlport.to_numpy(np.zeros(1 << 10, ml_dtypes.bfloat16), copy=True).nbytes == 2048
    finally:
        dlport.set_alloc_limit(0)
    assert dlport.alloc_limit() == before
