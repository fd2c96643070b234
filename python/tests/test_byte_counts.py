"""A tensor's byte count through every door (issue 56, class 1): its element count fits in int64,
its compact byte count need not (a stride-0 axis keeps its memory at one element). `nbytes` says
the exact number, the buffer protocol refuses a tensor whose bytes do not fit a Py_ssize_t
(BufferError naming the shape and itemsize, never a wrapped `len`), and an empty tensor's count
is 0 whatever its other extents. Through a producer (from_dlpack), a pickle (Tensor._rebuild) and
Dask's "dask" family (a header and one frame, no pickle), the tensor is refused or tells the
truth."""

import pickle

import numpy as np
import pytest

import dlport
from dlport._dask import _deserialize, _sizeof
from dlport.testing import Producer

HUGE = (2**61 + 1,)  # float64: 2**64 + 8 bytes, 8 in memory
READERS = {
    "bytearray": bytearray,
    "bytes": bytes,
    "memoryview.tobytes": lambda t: memoryview(t).tobytes(),
    "memoryview.cast": lambda t: memoryview(t).cast("B"),
}


def stride0(dtype, shape):
    """A tensor over one element of `dtype` whose every axis has stride 0, from a producer."""
    return dlport.from_dlpack(Producer(np.ones(1, dtype), shape=list(shape), strides=[0] * len(shape)))


def check_truthful(t, itemsize):
    """`nbytes` is the exact byte count; every buffer reader is refused with a BufferError that
    names the shape and the itemsize when the count does not fit a buffer."""
    count = int(np.prod([int(n) for n in t.shape], dtype=object)) * itemsize
    assert t.nbytes == count and type(t.nbytes) is int
    assert _sizeof(t) == count  # what Dask's memory accounting reads (dask.sizeof)
    if count <= 2**63 - 1:
        return
    for name, read in READERS.items():
        with pytest.raises(dlport.DLPackBufferError) as e:
            read(t)
        text = str(e.value)
        assert "does not fit a buffer" in text and f"itemsize {itemsize}" in text, (name, text)
        assert str(list(t.shape)) in text, (name, text)


@pytest.mark.parametrize(
    "dtype, shape",
    [
        (np.float64, HUGE),
        (np.complex128, (2**59 + 1,)),
        (np.int16, (2**31, 2**31 + 1)),
        (np.float32, (2**20, 0, 2**50)),
    ],
)
def test_from_dlpack_of_a_huge_stride_0_tensor_tells_its_true_byte_count(dtype, shape):
    t = stride0(dtype, shape)
    check_truthful(t, np.dtype(dtype).itemsize)


def test_a_byte_count_of_exactly_isize_max_is_exported_as_it_is():
    t = stride0(np.uint8, (2**63 - 1,))
    assert t.nbytes == 2**63 - 1
    m = memoryview(t)  # strided (stride 0): the consumer asked for strides
    assert (m.nbytes, m.shape, m.strides, m[12345]) == (2**63 - 1, (2**63 - 1,), (0,), 1)
    with pytest.raises((OverflowError, MemoryError)):
        bytes(t)  # CPython's own refusal of 2**63 - 1 bytes, read from the true len


def test_an_empty_tensor_counts_0_bytes_whatever_its_other_extents():
    shape = (2**33, 2**33, 0)  # the product of the first two overflows int64
    doors = {
        "from_dlpack": stride0(np.float64, shape),
        "_rebuild": dlport.Tensor._rebuild(bytearray(), "float64", shape, None, 0, "cpu"),
        "dask": _deserialize({"dlport": ["float64", list(shape), None, 0, "cpu"], "writeable": True},
                             [bytearray()]),
    }
    for door, t in doors.items():
        assert t.shape == shape and t.nbytes == 0, door
        assert bytearray(t) == b"" and memoryview(t).tobytes() == b"", door
        assert memoryview(t).shape == shape, door
        u = pickle.loads(pickle.dumps(t, protocol=5))
        assert u.shape == shape and u.nbytes == 0, door


def forged_doors(dtype, shape, strides, frame):
    """The tensor a pickle and a Dask header claim, rebuilt over `frame` (or the refusal)."""
    yield "_rebuild", lambda: dlport.Tensor._rebuild(bytearray(frame), dtype, shape, strides, 0, "cpu")
    header = {"dlport": [dtype, list(shape), list(strides), 0, "cpu"], "writeable": True}
    yield "dask", lambda: _deserialize(header, [memoryview(bytearray(frame))])


@pytest.mark.parametrize("dtype, itemsize, shape", [("float64", 8, HUGE), ("int16", 2, (2**31, 2**31 + 1))])
def test_a_pickle_or_dask_header_of_a_huge_tensor_is_refused_or_truthful(dtype, itemsize, shape):
    for door, make in forged_doors(dtype, shape, (0,) * len(shape), bytes(itemsize)):
        try:
            t = make()
        except dlport.DLPackValueError as e:
            assert "unpickling a dlport.Tensor" in str(e), door
            continue
        check_truthful(t, itemsize)
