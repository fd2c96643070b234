"""dlport.Tensor through Dask distributed (LocalCluster with process workers: pickle protocol 5,
frames out of band): scatter, compute on a worker, gather, for every dtype."""

import numpy as np
import pytest

import dlport
from pickle_cases import all_dtypes, make, raw


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason="Dask is not installed: run scripts/engines-test.sh")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
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
