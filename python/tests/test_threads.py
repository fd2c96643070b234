"""Threads: imports and exports racing, tensors dropped on other threads, and deleters called
from threads that do not hold the GIL — each deleter runs exactly once."""

import ctypes
import queue
import threading

import numpy as np

import dlport
from conftest import collect, needs_numpy_dlpack_1
from dlport.testing import DLManagedTensorVersioned, Producer, aligned, capsule_pointer

THREADS, ROUNDS = 8, 200


def run(threads):
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_racing_imports_and_exports_release_every_tensor_once():
    sources = [Producer(aligned(16, np.float32), versioned=bool(i % 2)) for i in range(THREADS)]
    errors = []

    def work(src):
        try:
            for i in range(ROUNDS):
                t = dlport.from_dlpack(src, device="cpu")
                a = np.from_dlpack(t)
                assert a.ctypes.data == src.address
                if i % 3 == 0:
                    c = t.compact()
                    del c
                cap = t.__dlpack__(max_version=(1, 3))
                dlport.from_dlpack(cap)
                del a, t
        except Exception as e:  # reported below, with the thread's source
            errors.append(e)

    run([threading.Thread(target=work, args=(s,)) for s in sources])
    collect()
    assert not errors, errors
    assert [s.deleted for s in sources] == [ROUNDS] * THREADS


def test_a_tensor_dropped_on_another_thread_releases_its_producer_once():
    src = Producer(aligned(8, np.int32))
    box = queue.Queue()
    box.put(dlport.from_dlpack(src))

    def drop():
        t = box.get()
        assert t.data_ptr() == src.address
        del t

    run([threading.Thread(target=drop)])
    collect()
    assert src.deleted == 1


@needs_numpy_dlpack_1
def test_a_capsule_made_on_one_thread_is_consumed_on_another():
    t = dlport.from_dlpack(np.arange(6.0))
    box = queue.Queue()
    run([threading.Thread(target=lambda: box.put(t.__dlpack__(max_version=(1, 3))))])
    got = []
    run([threading.Thread(target=lambda: got.append(np.from_dlpack(_Once(box.get()))))])
    assert got[0].ctypes.data == t.data_ptr() and t._dlpack_users == 1
    got.clear()
    collect()
    assert t._dlpack_users == 0


def test_deleters_run_without_the_gil_on_a_plain_thread():
    src = Producer(aligned(4, np.float64))
    t = dlport.from_dlpack(src)
    api = capsule_pointer(dlport.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    from_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)))(
        ctypes.c_void_p.from_address(api + 24).value)
    exports = []
    for _ in range(4):
        out = ctypes.POINTER(DLManagedTensorVersioned)()
        assert from_py(t, ctypes.byref(out)) == 0
        exports.append(out)
    del t
    collect()
    assert src.deleted == 0, "four exports keep the memory alive"

    def release(out):
        # A CFUNCTYPE call releases the GIL: dlport's deleter runs without it.
        out.contents.deleter(out)

    run([threading.Thread(target=release, args=(e,)) for e in exports])
    collect()
    assert src.deleted == 1, "the last release, on some thread, released the producer once"


class _Once:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)
