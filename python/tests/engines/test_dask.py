"""dlport.Tensor through Dask distributed (LocalCluster with process workers: pickle protocol 5,
frames out of band; dlport.Tensor registered in Dask's own serialization family by
`import dlport.dask`, here and, through Dask's preload, in every worker): scatter, compute on a
worker, gather, for every dtype; the family's frame, forged headers. Registration without an
import hook is python/tests/test_dask_registration.py's."""

import numpy as np
import pytest

import dlport
import dlport.dask  # noqa: F401  (registers dlport.Tensor in Dask's "dask" family)
from pickle_cases import all_dtypes, make, raw


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason="Dask is not installed: run scripts/engines-test.sh")
    import dask

    # The workers import dlport.dask as they start (Dask's preload), as the client has.
    with dask.config.set({"distributed.worker.preload": ["dlport.dask"]}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def test_scatter_compute_gather_every_dtype(client):
    def inspect(t):
        import ctypes

        return t.dtype, t.shape, ctypes.string_at(t.data_ptr(), t.nbytes), t

    cases = {name: make(name, seed=11) for name in all_dtypes()}
    futures = {name: client.scatter(t) for name, (t, _) in cases.items()}
    results = client.gather({name: client.submit(inspect, f, pure=False) for name, f in futures.items()})
    for name, (dtype, shape, got, back) in results.items():
        t, data = cases[name]
        assert (dtype, shape, got) == (name, t.shape, data), name
        assert back.dtype == name and raw(back) == data


def test_compute_on_a_worker_and_writability(client):
    def double(t):
        import numpy as np

        import dlport

        a = np.from_dlpack(t)
        return dlport.from_dlpack(a * 2), bool(a.flags.writeable), t.readonly

    a = np.arange(1 << 20, dtype=np.float32)
    out, writable, readonly = client.submit(double, client.scatter(dlport.from_dlpack(a))).result()
    assert np.array_equal(np.from_dlpack(out), a * 2)
    # Dask keeps each frame's writability: a writable tensor arrives writable.
    assert writable and not readonly
    ro = a.copy()
    ro.flags.writeable = False
    _, writable, readonly = client.submit(double, client.scatter(dlport.from_dlpack(ro))).result()
    assert readonly and not writable


def test_dask_family_sends_one_frame_over_the_tensors_own_bytes():
    from dask.sizeof import sizeof
    from distributed.protocol import deserialize, serialize

    a = np.arange(1 << 20, dtype=np.uint16)
    t = dlport.from_dlpack(a)
    header, frames = serialize(t)
    # Dask's own family, not pickle: the scheduler pickles with protocol 4 (no out-of-band
    # buffers), so a pickled tensor would be copied in band on every gather through it.
    assert header["serializer"] == "dask"
    (frame,) = frames
    view = np.frombuffer(frame, dtype=np.uint8)
    assert view.ctypes.data == t.data_ptr() and view.nbytes == t.nbytes  # no copy on the way out
    u = deserialize(header, frames)
    assert u.data_ptr() == t.data_ptr() and u.dtype == "uint16" and not u.readonly  # a view
    assert np.array_equal(np.from_dlpack(u), a)
    assert sizeof(t) == t.nbytes  # Dask's memory accounting counts the bytes


def test_a_gather_through_the_scheduler_keeps_every_dtype(client):
    # future.result() goes through the scheduler (pickle protocol 4 there).
    cases = {name: make(name, seed=5) for name in all_dtypes()}
    for name, (t, data) in cases.items():
        back = client.scatter(t, hash=False).result()
        assert (back.dtype, back.shape, raw(back)) == (name, t.shape, data), name
        assert back.readonly == t.readonly, name


def test_forged_dask_headers_are_refused_by_field():
    from distributed.protocol.serialize import dask_deserialize

    load = dask_deserialize.dispatch(dlport.Tensor)
    good = {"dlport": ["float32", [4], None, 0, "cpu"], "writeable": True}
    assert load(good, [bytearray(16)]).shape == (4,)
    forged = {
        "the Dask header's field 'dlport'": ({"writeable": True}, [bytearray(16)]),
        "exactly 1 Dask frame": (good, [bytearray(8), bytearray(8)]),
        "pickle.shape": ({"dlport": ["float32", ["4"], None, 0, "cpu"]}, [bytearray(16)]),
        "pickle.dtype": ({"dlport": ["float99", [4], None, 0, "cpu"]}, [bytearray(16)]),
        "needs 20 bytes, but the storage has 16": ({"dlport": ["float32", [5], None, 0, "cpu"]}, [bytearray(16)]),
        "pickle.flags": ({"dlport": ["float32", [4], None, 1 << 40, "cpu"]}, [bytearray(16)]),
    }
    for field, (header, frames) in forged.items():
        with pytest.raises(dlport.DLPackValueError, match=field):
            load(header, frames)
