"""Pickling dlport.Tensor (protocol 5 out of band, and in band), copy.copy / copy.deepcopy, and
forged pickles: every field refused by name before any view exists."""

import concurrent.futures
import copy
import io
import multiprocessing
import pickle
import sys

import numpy as np
import pytest

import dlport
from conftest import collect, needs_numpy_dlpack_1
from dlport.testing import managed_like, pinned_like
from pickle_cases import all_dtypes, make, raw, roundtrip_in_worker


def oob(t, buffers=None):
    """Pickles `t` with protocol 5 out of band; unpickles over `buffers(raw buffers)` (default: the
    PickleBuffers themselves, as an engine hands them back)."""
    bufs = []
    s = pickle.dumps(t, protocol=5, buffer_callback=bufs.append)
    return pickle.loads(s, buffers=bufs if buffers is None else buffers(bufs)), bufs


@pytest.mark.parametrize("name", list(all_dtypes()))
@pytest.mark.parametrize("how", ["protocol2", "protocol4", "protocol5-in-band", "protocol5-out-of-band"])
def test_every_dtype_round_trips(name, how):
    t, data = make(name)
    if how == "protocol5-out-of-band":
        u, bufs = oob(t)
        assert len(bufs) == 1
    else:
        u = pickle.loads(pickle.dumps(t, protocol=int(how[8])))
    assert (u.dtype, u.shape, u.strides) == (t.dtype, t.shape, t.strides)
    assert raw(u) == data
    assert not u.readonly and u.origin == "cpu" and u.memory == "cpu"


def test_out_of_band_rebuild_is_a_view_of_the_buffer():
    t, data = make("bfloat16")
    bufs = []
    s = pickle.dumps(t, protocol=5, buffer_callback=bufs.append)
    # The stream holds the metadata only.
    assert len(s) < 200 and data not in s
    received = [bytearray(b.raw()) for b in bufs]
    u = pickle.loads(s, buffers=received)
    assert u.data_ptr() == np.frombuffer(received[0], np.uint8).ctypes.data
    assert raw(u) == data
    # A second rebuild over the same buffer: the same address again, no copy.
    v = pickle.loads(s, buffers=received)
    assert v.data_ptr() == u.data_ptr()


@needs_numpy_dlpack_1
def test_read_only_buffer_gives_a_read_only_tensor():
    t, data = make("float32")
    u, _ = oob(t, lambda bufs: [bytes(b.raw()) for b in bufs])
    assert u.readonly and raw(u) == data
    # A writable buffer request (readinto's) is refused.
    with pytest.raises(TypeError, match="read-write"):
        io.BytesIO(b"abcd").readinto(u)
    # Its exports carry READ_ONLY, as any READ_ONLY tensor's: NumPy's view is not writeable.
    assert not np.from_dlpack(u).flags.writeable


@needs_numpy_dlpack_1
def test_read_only_tensor_stays_read_only_over_a_writable_buffer():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    r = dlport.from_dlpack(a)
    assert r.readonly
    u, _ = oob(r, lambda bufs: [bytearray(b.raw()) for b in bufs])
    assert u.readonly
    assert pickle.loads(pickle.dumps(r, protocol=2)).readonly
    assert pickle.loads(pickle.dumps(r, protocol=5)).readonly


def test_in_band_protocol_5_copy_is_writable_as_the_sender_was():
    t, data = make("float8_e4m3fn")
    u = pickle.loads(pickle.dumps(t, protocol=5))
    assert not u.readonly and u.data_ptr() != t.data_ptr() and raw(u) == data


def test_the_view_holds_the_buffer_and_releases_it_once():
    t, data = make("uint8")
    bufs = []
    s = pickle.dumps(t, protocol=5, buffer_callback=bufs.append)
    buf = bytearray(bufs[0].raw())
    del bufs, t
    base = sys.getrefcount(buf)
    u = pickle.loads(s, buffers=[buf])
    v = copy.copy(u)
    del u
    collect()
    with pytest.raises(BufferError):
        buf.append(0)  # exported: the view holds it
    assert raw(v) == data
    del v
    collect()
    buf.append(0)  # released: resizable again
    assert sys.getrefcount(buf) == base


def test_strided_tensor_is_made_compact_once_on_the_way_out():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    t = dlport.from_dlpack(a.T)
    assert t.strides == (1, 4)
    fn, args = t.__reduce_ex__(5)
    assert args[3] is None  # compact strides
    u = pickle.loads(pickle.dumps(t, protocol=5))
    assert u.strides == (3, 1) and np.array_equal(np.from_dlpack(u), a.T)
    back = dlport.from_dlpack(a[:, ::-2])
    assert np.array_equal(np.from_dlpack(oob(back)[0]), a[:, ::-2])


@pytest.mark.parametrize("like, memory", [(pinned_like, "cuda_host:0"), (managed_like, "cuda_managed:0")])
def test_pinned_and_managed_memory_travel_as_host_bytes(like, memory):
    a = np.arange(6, dtype=np.float32)
    t = dlport.from_dlpack(like(a))
    assert t.memory == memory
    for u in (pickle.loads(pickle.dumps(t, protocol=4)), oob(t)[0]):
        assert u.memory == "cpu" and u.origin == memory
        assert np.array_equal(np.from_dlpack(u), a)
        assert f"origin={memory}" in repr(u)
    assert "origin" not in repr(pickle.loads(pickle.dumps(dlport.from_dlpack(a), protocol=5)))


def test_empty_and_zero_dimensional_tensors():
    for a in (np.zeros((0, 3), np.float32), np.array(7.5, np.float64)):
        t = dlport.from_dlpack(a)
        for u in (oob(t)[0], pickle.loads(pickle.dumps(t, protocol=2))):
            assert u.shape == a.shape and np.array_equal(np.from_dlpack(u), a)


@needs_numpy_dlpack_1
def test_copy_is_a_view_and_deepcopy_a_copy():
    a = np.arange(5, dtype=np.float64)
    t = dlport.from_dlpack(a)
    c = copy.copy(t)
    assert c.data_ptr() == t.data_ptr() and not c.copied
    d = copy.deepcopy(t)
    assert d.data_ptr() != t.data_ptr() and d.copied and not d.readonly
    np.from_dlpack(d)[0] = 42  # writing the copy leaves the original alone
    assert a[0] == 0 and np.from_dlpack(d)[0] == 42
    nested = copy.deepcopy({"x": [t, t]})
    assert nested["x"][0] is nested["x"][1]  # the memo works: one copy per tensor


# Forged pickles: the rebuild's arguments, each field wrong in its own way. Each must be refused
# with DLPackValueError naming the field, before any view exists.
GOOD = (bytearray(24), "float32", (2, 3), None, 0, "cpu")


def forged(index, value):
    args = list(GOOD)
    args[index] = value
    return tuple(args)


@pytest.mark.parametrize(
    "args, field",
    [
        (forged(1, "float33"), "pickle.dtype"),
        (forged(1, "dtype(code=3, bits=64, lanes=1)"), "pickle.dtype"),
        (forged(1, "float"), "pickle.dtype"),
        (forged(1, 2), "pickle.dtype"),
        (forged(5, "cuda:-5"), "pickle.memory"),
        (forged(5, "nowhere"), "pickle.memory"),
        (forged(4, 2), "pickle.flags"),
        (forged(4, 8), "pickle.flags"),
        (forged(4, -1), "pickle.flags"),
        (forged(2, "ab"), "pickle.shape"),
        (forged(2, (2, 2**64)), "pickle.shape"),
        (forged(2, (2, -3)), "shape"),
        (forged(2, (1,) * 65), "ndim"),
        (forged(2, (2**62, 2**62)), "overflow"),
        (forged(2, (2**61,)), "overflow"),
        (forged(2, (2**40,)), "limit"),
        (forged(2, (2, 2)), "pickle.buffer length"),
        (forged(2, (2, 4)), "StorageTooSmall|needs"),
        (forged(3, (3,)), "strides"),
        (forged(3, (3, "x")), "pickle.strides"),
        (forged(3, (-3, 1)), "pickle.strides"),
        (forged(3, (2**62, 1)), "pickle.strides"),
        (forged(3, (4, 1)), "pickle.strides"),
        (forged(3, (1, 2)), "pickle.strides"),
        ((bytearray(4), "float32", (2**28,), (0,), 0, "cpu"), "pickle.strides"),
        ((bytearray(16), "float32", (2, 4), (0, 1), 0, "cpu"), "pickle.strides"),
        ((bytearray(8), "float64", (2**61 + 1,), (0,), 0, "cpu"), "pickle.strides"),
        (forged(0, bytearray(23)), "needs"),
        (forged(0, bytearray(25)), "pickle.buffer length"),
        (forged(0, 17), "pickle.buffer"),
        (forged(0, memoryview(bytearray(48))[::2]), "pickle.buffer"),
    ],
)
def test_forged_pickle_is_refused_naming_the_field(args, field):
    with pytest.raises(dlport.DLPackValueError) as e:
        dlport.Tensor._rebuild(*args)
    text = str(e.value)
    assert any(f.lower() in text.lower() for f in field.split("|")), text
    assert text.startswith("unpickling a dlport.Tensor")


def test_only_compact_strides_are_rebuilt():
    # dlport sends None; the compact strides written out are the same tensor.
    t = dlport.Tensor._rebuild(bytearray(range(24)), "uint8", (2, 3, 4), (12, 4, 1), 0, "cpu")
    assert np.array_equal(np.from_dlpack(t), np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    # A 4-byte pickle never views 2**28 elements, nor a writable buffer overlapping rows, and
    # Dask's header is refused the same way.
    from dlport._dask import _deserialize

    for strides in [(0,), (-1,)]:
        header = {"dlport": ["float32", [2**28], list(strides), 0, "cpu"], "writeable": True}
        with pytest.raises(dlport.DLPackValueError, match="pickle.strides"):
            _deserialize(header, [bytearray(4)])
    header = {"dlport": ["float32", [2, 4], [0, 1], 0, "cpu"], "writeable": True}
    with pytest.raises(dlport.DLPackValueError, match="pickle.strides"):
        _deserialize(header, [bytearray(16)])


@pytest.mark.parametrize("readonly", [False, True])
def test_an_empty_tensor_keeps_the_senders_writability(readonly):
    from dlport._dask import _deserialize, _serialize

    from dlport.testing import READ_ONLY, Producer

    # A versioned producer says READ_ONLY itself (NumPy before 2.1 refuses to export a read-only
    # array at all).
    a = np.zeros((0, 3), np.float32)
    t = dlport.from_dlpack(Producer(a, versioned=True, flags=READ_ONLY if readonly else 0))
    assert t.readonly == readonly
    got = {f"protocol {p}": pickle.loads(pickle.dumps(t, protocol=p)) for p in range(6)}
    got["out of band"] = oob(t)[0]
    header, frames = _serialize(t)
    got["dask"] = _deserialize(header, frames)
    got["dask, a read-only frame"] = _deserialize(header, [bytes(frames[0])])
    for how, u in got.items():
        assert (u.shape, u.readonly) == ((0, 3), readonly), how


def test_forged_stream_through_pickle_loads():
    t = dlport.from_dlpack(np.arange(6, dtype=np.float32))
    s = pickle.dumps(t, protocol=4)
    evil = s.replace(b"float32", b"float64")  # twice the bytes the buffer has
    with pytest.raises(dlport.DLPackValueError, match="needs"):
        pickle.loads(evil)


def test_device_memory_needs_permission_to_copy():
    # A CPU machine has no device memory to pickle: the refusal is checked in test_cuda.py.
    # Here: the switch itself nests and resets.
    from dlport._pickle import _device_copy

    assert not _device_copy()
    with dlport.pickling(device_copy=True):
        assert _device_copy()
        with dlport.pickling():
            assert not _device_copy()
        assert _device_copy()
    assert not _device_copy()
    with pytest.raises(TypeError):
        with dlport.pickling(device_copy="yes"):
            pass


@needs_numpy_dlpack_1
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_multiprocessing_and_concurrent_futures(method):
    names = ["bfloat16", "float8_e5m2", "float4_e2m1fn", "int4", "float64", "bool"]
    cases = [make(n, seed=i) for i, n in enumerate(names)]
    ctx = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        results = list(pool.map(roundtrip_in_worker, [t for t, _ in cases]))
    for (t, data), (dtype, shape, got, readonly, back) in zip(cases, results):
        assert (dtype, shape, got, readonly) == (t.dtype, t.shape, data, False)
        # The tensor the worker sent back: its bytes, pickled again, intact.
        assert back.dtype == t.dtype and raw(back) == data
    with ctx.Pool(1) as pool:
        dtype, shape, got, _, _ = pool.apply(roundtrip_in_worker, (cases[0][0],))
    assert (dtype, got) == ("bfloat16", cases[0][1])
