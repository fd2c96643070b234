"""Paddle takes tensors dlport's C ABI hands out, and gives them back, through ctypes: through a
raw capsule (`paddle.from_dlpack(capsule)`), through the protocol (`paddle.from_dlpack(obj)`,
which calls `__dlpack__(max_version=(1, 2))`) and in both forms, and each export is released
exactly once (dlport's release tracker counts them). Paddle 3.3 reads two fields DLPack leaves
to the producer: it never calls the deleter of a tensor whose `manager_ctx` is NULL, and it
ignores `byte_offset`. Paddle imports through capsules only (it offers an exchange table as a
producer, which the Python package's tests use); Paddle -> dlport goes through its capsule."""

import ctypes
import gc

import numpy as np
import pytest

import dlport_ctypes as dl

paddle = pytest.importorskip("paddle", reason="paddlepaddle is not installed in this venv")


def released_after(fn):
    """Runs `fn` (which hands dlport exports to Paddle and drops them), then returns how many
    of the C ABI's exports were made and released during it."""
    gc.collect()
    e0, r0 = dl.export_counts()
    fn()
    gc.collect()
    e1, r1 = dl.export_counts()
    return e1 - e0, r1 - r0


def dlport_tensor(a):
    return dl.from_dlpack(np.ascontiguousarray(a))


@pytest.mark.parametrize("max_version", [None, (1, 3)], ids=["legacy", "versioned"])
def test_paddle_takes_capsules_and_releases_each_once(max_version):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlport_tensor(src)

    def run():
        for _ in range(50):
            cap = t.__dlpack__(max_version=max_version)
            p = paddle.from_dlpack(cap)
            np.testing.assert_array_equal(p.numpy(), src)
            del p, cap

    made, released = released_after(run)
    assert (made, released) == (50, 50), "every export Paddle took was released exactly once"


def test_paddle_takes_the_protocol_and_releases_each_once():
    src = np.arange(6, dtype=np.int64)
    t = dlport_tensor(src)

    def run():
        for _ in range(50):
            p = paddle.from_dlpack(t)
            np.testing.assert_array_equal(p.numpy(), src)
            del p

    assert released_after(run) == (50, 50)


def test_paddle_shares_the_memory_and_sees_writes():
    src = np.zeros(4, dtype=np.float32)
    t = dlport_tensor(src)
    p = paddle.from_dlpack(t)
    np.from_dlpack(t)[1] = 7.0
    assert p.numpy()[1] == 7.0, "a view, not a copy"
    del p
    gc.collect()


def test_paddle_reads_the_first_element_of_an_offset_tensor():
    """A tensor whose first element is past its data pointer: dlport writes that into `data`
    (byte_offset 0), since Paddle ignores byte_offset."""
    base = np.arange(12, dtype=np.float32)
    rel = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda ctx: None)
    lib = dl.lib
    lib.dlport_wrap.argtypes = [ctypes.c_void_p, dl.i32, dl.i32, ctypes.c_uint8, ctypes.c_uint8, ctypes.c_uint16,
                                dl.i32, ctypes.POINTER(dl.i64), ctypes.POINTER(dl.i64), dl.u64, dl.u64, ctypes.c_int,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    shape, strides = (dl.i64 * 1)(6), (dl.i64 * 1)(1)
    for versioned in (1, 0):
        out = ctypes.c_void_p()
        dl.check(lib.dlport_wrap(base.ctypes.data, 1, 0, 2, 32, 1, 1, shape, strides, 12, 0, versioned,
                                 ctypes.cast(rel, ctypes.c_void_p), None, ctypes.byref(out)))
        t = dl.import_managed(out.value, bool(versioned))
        made, released = released_after(
            lambda: np.testing.assert_array_equal(paddle.from_dlpack(t).numpy(), base[3:9]))
        assert (made, released) == (1, 1)
        t.free()
    gc.collect()


def test_paddle_to_dlport_and_back():
    x = paddle.to_tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    cap = x.__dlpack__(max_version=(1, 3))
    ptr, versioned = dl.consume_capsule(cap)
    t = dl.import_managed(ptr, versioned)
    assert t.describe()["shape"] == [2, 4]
    np.testing.assert_array_equal(np.from_dlpack(t), x.numpy())
    # And back to Paddle, whose own memory it still is.
    made, released = released_after(lambda: paddle.from_dlpack(t).numpy())
    assert (made, released) == (1, 1)
    t.free()
    del x, cap
    gc.collect()
