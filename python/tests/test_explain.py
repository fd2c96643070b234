"""dlport.explain: what a producer offers and what dlport would do, as text for a bug report."""

import numpy as np
import pytest

import dlport
from conftest import collect
from dlport.testing import Producer, aligned, pinned_like


def test_a_strided_numpy_view_and_a_compact_request():
    v = np.arange(12.0).reshape(3, 4)[:, ::2]
    text = dlport.explain(v, layout="compact", align=64)
    lines = text.splitlines()
    assert lines[0] == "producer: numpy.ndarray"
    assert "NumPy's ndarray" in lines[1]
    assert "__dlpack_device__(): (1, 0)" in text
    assert "shape (3, 2), dtype float64, strides (4, 2) (elements)" in text
    assert "request (layout='compact', align=64):" in text
    assert "a view cannot do: DLPackBufferError (code 25)" in text and "strided" in text
    assert "one copy" in text and "copied by dlport: True" in text


def test_pinned_like_memory_says_where_it_is_and_what_it_presents():
    x = pinned_like(aligned(8, np.float32))
    text = dlport.explain(x)
    assert "__dlpack_device__(): (3, 0)" in text
    assert "memory cuda_host:0; presented as cpu" in text
    assert "a view, no copy, presented as cpu" in text
    collect()
    assert x.deleted == 2, "explain released each import it made"


def test_memory_no_backend_serves_is_refused_with_the_reason():
    x = Producer(aligned(4, np.float32), capsule_device=(2, 0), advertised=(2, 0))
    text = dlport.explain(x, device="cpu", copy=False)
    assert "as it comes (copy=False): refused: DLPackBufferError" in text
    assert "kDLCUDA (2)" in text or "cuda:0" in text
    collect()
    assert x.deleted == 1, "the refused import was released once"


def test_what_is_not_a_producer_and_what_fails_inside_one():
    assert "route: none" in dlport.explain(object())

    class Broken:
        def __dlpack_device__(self):
            raise ValueError("Unknown device type meta for Dlpack")

        def __dlpack__(self, **kwargs):
            raise RuntimeError("no")

    text = dlport.explain(Broken())
    assert "__dlpack_device__(): raised ValueError: Unknown device type meta" in text
    assert "refused: DLPackBufferError (code 1001)" in text


def test_a_capsule_is_read_once_and_dlports_own_tensor_names_the_exchange_api():
    t = dlport.from_dlpack(np.arange(3.0))
    assert "C exchange API" in dlport.explain(t).splitlines()[1]
    text = dlport.explain(t.__dlpack__(max_version=(1, 3)))
    assert "bare DLPack capsule" in text and "shape (3,), dtype float64" in text
    assert "request" not in text


@pytest.mark.parametrize("bad", [{"layout": "C"}, {"align": 3}, {"device": "gpu"}])
def test_bad_options_are_reported_not_raised(bad):
    text = dlport.explain(np.arange(3.0), **bad)
    assert "refused" in text or "cannot do" in text
