"""Paddle (3.3) with the dlport package, both ways, with release counts: Paddle takes a
dlport.Tensor through a raw capsule (`t.__dlpack__()`, both forms) and through the protocol
(`paddle.from_dlpack(t)`, which asks `max_version=(1, 2)`); dlport takes Paddle's tensors
through their exchange table and their capsules. Each hand-off releases the producer's tensor
exactly once (a counting producer under dlport, the counts after collection). Paddle imports
only through capsules; it reads `manager_ctx` (no deleter call when NULL) and ignores
`byte_offset`, so these also check that dlport fills both as Paddle expects."""

import numpy as np
import pytest

import dlport
from conftest import collect
from dlport.testing import Producer

paddle = pytest.importorskip("paddle", reason="paddlepaddle is not installed (python/requirements-dev.txt pins it)")


def counted(array):
    """A dlport.Tensor over a counting producer's memory (no copy)."""
    src = Producer(array)
    return src, dlport.from_dlpack(src)


@pytest.mark.parametrize("max_version", [None, (1, 3)], ids=["legacy", "versioned"])
def test_paddle_takes_dlport_capsules_and_releases_each_once(max_version):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    src, t = counted(array)
    for _ in range(20):
        p = paddle.from_dlpack(t.__dlpack__(max_version=max_version))
        np.testing.assert_array_equal(p.numpy(), array)
        del p
    del t
    collect()
    assert src.deleted == 1, "dlport's view and every export Paddle took were released"


def test_paddle_takes_dlport_tensors_through_the_protocol():
    array = np.arange(6, dtype=np.int64)
    src, t = counted(array)
    for i in range(20):
        v = paddle.from_dlpack(t)
        array[2] = i
        assert v.numpy()[2] == i, "a view of the same memory"
        del v
    del t
    collect()
    assert src.deleted == 1


@pytest.mark.xfail(strict=True, reason="Paddle 3.3 releases only one of several live tensors "
                   "over the same memory, NumPy's exports as much as dlport's")
def test_paddle_releases_every_one_of_several_live_views():
    import sys
    a = np.arange(6.0)
    before = sys.getrefcount(a)
    views = [paddle.from_dlpack(a.__dlpack__(max_version=(1, 2))) for _ in range(3)]
    del views
    collect()
    assert sys.getrefcount(a) == before, "NumPy's exports released"


def test_paddle_reads_the_first_element_of_an_offset_view():
    base = np.arange(12, dtype=np.float32)
    src, t = counted(base[3:9])
    np.testing.assert_array_equal(paddle.from_dlpack(t).numpy(), base[3:9])
    del t
    collect()
    assert src.deleted == 1


def test_dlport_takes_paddle_tensors_and_gives_them_back():
    x = paddle.to_tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    t = dlport.from_dlpack(x)  # Paddle's exchange table
    assert t.shape == (2, 4)
    np.testing.assert_array_equal(np.from_dlpack(t), x.numpy())
    c = dlport.from_dlpack(x.__dlpack__())  # a raw capsule
    np.testing.assert_array_equal(np.from_dlpack(c), x.numpy())
    back = paddle.from_dlpack(t)
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    del t, c, back
    collect()


@pytest.mark.parametrize("dl_device", [(1, -1), (1, 5), (1, 2**31 - 1)])
def test_a_cpu_id_other_than_0_is_refused_by_name(dl_device):
    t = dlport.from_dlpack(np.arange(3.0))
    with pytest.raises(ValueError, match=rf"dl_device = \(1, {dl_device[1]}\) is invalid: ") as e:
        t.__dlpack__(dl_device=dl_device)
    assert e.value.code == 42
    with pytest.raises(ValueError, match=rf"device = \(1, {dl_device[1]}\) is invalid: "):
        dlport.from_dlpack(np.arange(3.0), device=dl_device)


def test_a_producer_advertising_cpu_3_is_refused_by_the_rule():
    src = Producer(np.arange(3.0), advertised=(1, 3))
    with pytest.raises(ValueError, match=r"__dlpack_device__\(\) = \(1, 3\) is invalid: kDLCPU has one device"):
        dlport.from_dlpack(src)
    collect()
    assert src.deleted == 1


class PaddleWrapper:
    """An object that forwards the protocol to a Paddle tensor (no exchange table): dlport asks
    its `__dlpack_device__`, which Paddle answers `(kDLCPU, None)`."""

    def __init__(self, x):
        self.x = x

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.x.__dlpack__(**kwargs)


def test_paddles_device_answer_with_no_id_is_read_for_host_memory():
    x = paddle.to_tensor(np.arange(4, dtype=np.float32))
    assert x.__dlpack_device__()[1] is None, "Paddle 3.3 answers (kDLCPU, None)"
    t = dlport.from_dlpack(PaddleWrapper(x))
    assert t.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), x.numpy())
    gpu = Producer(np.arange(3.0), advertised=(2, None))
    with pytest.raises(TypeError, match=r"a device id of None is read as 0 only for host memory"):
        dlport.from_dlpack(gpu)
    collect()
