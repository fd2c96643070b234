"""Issue 47's Python classes, one test each, named for the class: a cyclic prev_api chain (7),
dlport.testing's capsules under a refused import (8), explain agreeing with from_dlpack (9), and
the messages of the exchange table's managed_tensor_to_py_object_no_sync and of
dlport.Tensor's constructor (11)."""

import ctypes
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlport
from conftest import collect
from dlport.testing import Producer, exchange_api, release


def test_cyclic_prev_api_chain_falls_back_to_dunder():
    # Run apart, with a timeout: before the fix the walk never ends, and Ctrl-C cannot stop it.
    code = textwrap.dedent(
        """
        import ctypes
        import numpy as np
        import dlport
        from dlport.testing import DLPackExchangeAPIHeader, DLPackVersion, bare_capsule

        cycle = DLPackExchangeAPIHeader(DLPackVersion(0, 9), None)
        cycle.prev_api = ctypes.addressof(cycle)  # a table whose previous table is itself
        a, b = DLPackExchangeAPIHeader(DLPackVersion(0, 1), None), DLPackExchangeAPIHeader(DLPackVersion(0, 2), None)
        a.prev_api, b.prev_api = ctypes.addressof(b), ctypes.addressof(a)  # a cycle of two

        def producer(header):
            class Cyclic:
                __dlpack_c_exchange_api__ = bare_capsule(ctypes.addressof(header), b"dlpack_exchange_api")

                def __init__(self):
                    self.a = np.arange(5, dtype=np.int32)

                def __dlpack__(self, **kw):
                    return self.a.__dlpack__(**kw)

                def __dlpack_device__(self):
                    return self.a.__dlpack_device__()
            return Cyclic()

        for header in (cycle, a):
            t = dlport.from_dlpack(producer(header))
            assert np.from_dlpack(t).tolist() == [0, 1, 2, 3, 4]
            assert "__dlpack_device__(), then __dlpack__" in dlport.explain(producer(header))
        print("fell back")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "fell back" in done.stdout


@pytest.mark.parametrize("versioned", [True, False])
def test_testing_capsule_keeps_the_import_error_and_releases_once(versioned):
    p = Producer(np.arange(4, dtype=np.float32), versioned=versioned)
    # Refused before the capsule is taken (an argument dlport reads first): the capsule dies
    # unconsumed while the error is pending, as an argument of the failed call.
    with pytest.raises(dlport.DLPackTypeError, match="copy must be"):
        dlport.from_dlpack(p.capsule(), copy="yes")
    collect()
    assert p.deleted == 1
    # Refused after it is taken: dlport releases it, once.
    bad = Producer(np.arange(4, dtype=np.float32), versioned=versioned, shape=(-1,))
    with pytest.raises(dlport.DLPackBufferError, match="negative"):
        dlport.from_dlpack(bad.capsule())
    collect()
    assert bad.deleted == 1


def test_explain_agrees_with_from_dlpack_on_copy():
    a = np.arange(3, dtype=np.float32)
    with pytest.raises(dlport.DLPackTypeError) as e:
        dlport.from_dlpack(a, copy="yes")
    report = dlport.explain(a, copy="yes")
    assert "a view" not in report.split("request")[1]
    assert "refused: DLPackTypeError" in report and str(e.value) in report
    assert "a view, no copy" in dlport.explain(a, copy=np.bool_(False)).split("request")[1]


def test_explain_reports_an_object_whose_getattribute_raises():
    class Hostile:
        def __getattribute__(self, name):
            raise RuntimeError(f"no {name} for you")

    report = dlport.explain(Hostile())
    assert report.startswith("producer: ")
    assert "RuntimeError" in report and "no __dlpack__ for you" in report
    with pytest.raises(Exception) as e:
        dlport.from_dlpack(Hostile())
    assert str(e.value).split(":")[-1].strip() in report or "refused" in report


def test_to_py_object_refusal_says_the_tensor_was_not_taken():
    api = exchange_api(dlport.Tensor)
    p = Producer(np.arange(4, dtype=np.float32), versioned=True, version=(2, 0))
    m = p.managed()
    out = ctypes.c_void_p()
    with pytest.raises(dlport.DLPackBufferError) as e:
        api.managed_tensor_to_py_object_no_sync(m, ctypes.byref(out))
    assert "was released" not in str(e.value)
    assert "not taken" in str(e.value) and "still the caller's" in str(e.value)
    assert p.deleted == 0 and not out.value
    release(m)  # the caller's, as the message says
    assert p.deleted == 1


def test_tensor_constructor_says_what_to_call():
    for call in (lambda: dlport.Tensor(), lambda: dlport.Tensor.__new__(dlport.Tensor), lambda: dlport.Tensor(1, x=2)):
        with pytest.raises(TypeError, match=r"dlport\.from_dlpack\(x\)") as e:
            call()
        assert "Tensor.__new__()" not in str(e.value)
