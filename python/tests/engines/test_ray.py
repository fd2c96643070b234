"""dlport.Tensor through Ray (pickle protocol 5, out of band into the object store): every dtype
by ray.put/ray.get and as task arguments and results; zero-copy (the same address on two gets),
READ_ONLY, and on to NumPy, JAX and torch by DLPack without a copy; an object made on one node of a
two-node cluster and read on the other; no leak over many round trips."""

import gc
import os
import time

import numpy as np
import pytest

import dlport
from pickle_cases import all_dtypes, make, raw

def private_rss() -> int:
    """This process's private resident memory (RssAnon: its heap and anonymous maps) in bytes
    (Linux). The object store's shared pages (RssShmem) are left out: the store reuses freed
    space, so the pages it has touched are the high-water mark of the objects alive at once,
    which grows when Ray frees released objects late (a loaded machine) and never shrinks. A
    leaked object is Ray's reference count's to show, and a leaked copy shows here."""
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("/proc/self/status has no RssAnon line")


BIG = 4 * 2**20  # past Ray's inline limit (100 KiB): the object lives in the shared-memory store


def test_put_get_every_dtype(ray_cluster):
    ray = ray_cluster
    for name in all_dtypes():
        t, data = make(name, seed=3)
        u = ray.get(ray.put(t))
        assert (u.dtype, u.shape, raw(u)) == (name, t.shape, data), name
        assert u.readonly and u.origin == "cpu"


def test_task_arguments_and_results_every_dtype(ray_cluster):
    ray = ray_cluster

    @ray.remote(resources={"node2": 0.01})
    def echo(t):
        import ctypes

        import dlport  # noqa: F401  (the worker unpickles the tensor with it)

        return t.dtype, t.shape, t.readonly, ctypes.string_at(t.data_ptr(), t.nbytes), t

    cases = {name: make(name, seed=7) for name in all_dtypes()}
    refs = {name: echo.remote(t) for name, (t, _) in cases.items()}
    for name, ref in refs.items():
        dtype, shape, readonly, got, back = ray.get(ref)
        t, data = cases[name]
        assert (dtype, shape, got) == (name, t.shape, data), name
        assert readonly  # Ray hands every out-of-band buffer back read-only
        assert back.dtype == name and raw(back) == data


def test_zero_copy_read_only_and_on_to_numpy_jax_and_torch(ray_cluster):
    ray = ray_cluster
    a = np.arange(BIG // 2, dtype=np.uint16)
    t = dlport.from_dlpack(a)
    ref = ray.put(t)
    x, y = ray.get(ref), ray.get(ref)
    print(f"\n[ray] two ray.get of one object: {x.data_ptr():#x} and {y.data_ptr():#x}")
    assert x.data_ptr() == y.data_ptr() != t.data_ptr()
    assert x.readonly and x.data_ptr() % 64 == 0
    n = np.from_dlpack(x)
    assert n.ctypes.data == x.data_ptr() and not n.flags.writeable
    assert np.array_equal(n, a)
    jnp = pytest.importorskip("jax.numpy")
    j = jnp.from_dlpack(x)
    assert j.unsafe_buffer_pointer() == x.data_ptr()  # JAX views it: no copy
    assert int(j[12345]) == 12345
    bf = dlport.from_dlpack(jnp.arange(1024, dtype=jnp.bfloat16))
    back = ray.get(ray.put(bf))
    jb = jnp.from_dlpack(back)
    assert jb.dtype == jnp.bfloat16 and jb.unsafe_buffer_pointer() == back.data_ptr()
    assert bool((jb == jnp.arange(1024, dtype=jnp.bfloat16)).all())
    torch = pytest.importorskip("torch")
    tt = torch.from_dlpack(x)
    print(f"[ray] torch.from_dlpack of the object: {tt.data_ptr():#x}")
    assert tt.data_ptr() == x.data_ptr()  # torch views it too: no copy
    assert int(tt[12345]) == 12345 and tt.dtype == torch.uint16
    tb = torch.from_dlpack(back)
    assert tb.dtype == torch.bfloat16 and tb.data_ptr() == back.data_ptr()
    assert torch.equal(tb, torch.arange(1024, dtype=torch.bfloat16))


def test_object_made_on_one_node_read_on_the_other(ray_cluster):
    ray = ray_cluster

    @ray.remote(resources={"node2": 0.01})
    def make_on_node2():
        import ml_dtypes  # noqa: F401
        import numpy as np

        import dlport
        import ray

        t = dlport.from_dlpack(np.arange(BIG // 8, dtype=np.float64))
        return ray.put(t), ray.get_runtime_context().get_node_id()

    @ray.remote(resources={"head": 0.01})
    def read_on_head(refs):
        import numpy as np
        import ray

        t = ray.get(refs[0])
        a = np.from_dlpack(t)
        return float(a.sum()), a.shape, t.readonly, ray.get_runtime_context().get_node_id()

    inner, made_on = ray.get(make_on_node2.remote())
    total, shape, readonly, read_on = ray.get(read_on_head.remote([inner]))
    print(f"\n[ray] made on node {made_on[:8]}, read on node {read_on[:8]}")
    assert made_on != read_on
    n = BIG // 8
    assert shape == (n,) and total == n * (n - 1) / 2 and readonly
    here = ray.get(inner)  # the driver reads it too
    assert np.array_equal(np.from_dlpack(here), np.arange(n, dtype=np.float64))


def test_no_leak_over_many_round_trips(ray_cluster):
    ray = ray_cluster
    rounds = 10_000
    t = dlport.from_dlpack(np.arange(BIG // 4, dtype=np.float32))
    core = ray._private.worker.global_worker.core_worker

    def once():
        u = ray.get(ray.put(t))
        assert u.shape == t.shape

    for _ in range(500):
        once()
    gc.collect()
    refs_before, rss_before = len(core.get_all_reference_counts()), private_rss()
    for _ in range(rounds):
        once()
    # Ray releases the objects on its own threads, a moment after the last reference goes
    # (longer on a loaded machine): the counts are read until they settle, for at most 60 s. A
    # leak never settles; a late release does.
    deadline = time.monotonic() + 60
    while True:
        gc.collect()
        refs_after, rss_after = len(core.get_all_reference_counts()), private_rss()
        grew = (rss_after - rss_before) / 2**20
        if (refs_after <= refs_before and grew < 32) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(f"\n[ray] {rounds} put/get round trips of a 4 MiB tensor: references {refs_before} -> "
          f"{refs_after}, private RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB")
    assert refs_after <= refs_before
    assert grew < 32, f"private RSS (RssAnon) grew {grew:.0f} MiB over {rounds} round trips"
