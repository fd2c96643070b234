"""A 64 MiB bfloat16 tensor through Ray's object store and through Dask, as a dlport.Tensor
(pickle protocol 5: its bytes out of band), against a torch tensor (when torch is installed:
torch pickles its storage in band) and a NumPy uint16 array (the stand-in NumPy users send for
bfloat16, out of band as well), in one run. Medians and p25-p75 of 9 rounds after one warm-up.

- Ray (one node, `ray.init(num_cpus=1)`): `ray.put` (the bytes copied into the shared-memory
  store once), then `ray.get` in the same process (a view of the store: no copy for dlport and
  NumPy), then both as one round trip.
- Dask (`LocalCluster`, one process worker): `client.scatter(x, hash=False)` to the worker, then
  `.result()` back: two trips over the loopback.

    $(bash scripts/peers-env.sh)/bin/python bench/python/engines.py [--quick]

Writes target/bench/engines.json and prints the table rows of BENCHMARKS.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import dlport
from dlport.testing import BFLOAT16, Producer

ROOT = pathlib.Path(__file__).resolve().parents[2]
BYTES = 64 << 20
ROUNDS = 3 if "--quick" in sys.argv else 9


def stats(samples):
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
    return {"median_ms": statistics.median(samples) * 1e3, "p25_ms": q[0] * 1e3, "p75_ms": q[2] * 1e3}


def cases():
    bits = np.random.default_rng(0).integers(0, 1 << 16, BYTES // 2, dtype=np.uint16)
    out = {"dlport.Tensor bfloat16": dlport.from_dlpack(Producer(bits, dtype=BFLOAT16, versioned=True))}
    if importlib.util.find_spec("torch"):
        import torch

        out["torch.Tensor bfloat16"] = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    out["numpy uint16 stand-in"] = bits
    return out


def bench_ray(objs):
    import ray

    ray.init(num_cpus=1, object_store_memory=1 << 30, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    rows = {}
    for name, x in objs.items():
        put, get, both = [], [], []
        for i in range(ROUNDS + 1):
            t0 = time.perf_counter()
            ref = ray.put(x)
            t1 = time.perf_counter()
            y = ray.get(ref)
            t2 = time.perf_counter()
            assert len(memoryview(y).cast("B") if not hasattr(y, "nbytes") else range(y.nbytes)) == BYTES
            del y, ref
            if i:
                put.append(t1 - t0)
                get.append(t2 - t1)
                both.append(t2 - t0)
        rows[name] = {"put": stats(put), "get": stats(get), "put+get": stats(both)}
    ray.shutdown()
    return rows


def bench_dask(objs):
    import distributed

    rows = {}
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        for name, x in objs.items():
            trip = []
            try:
                for i in range(ROUNDS + 1):
                    t0 = time.perf_counter()
                    f = client.scatter(x, hash=False)
                    y = f.result()
                    t1 = time.perf_counter()
                    del f, y
                    if i:
                        trip.append(t1 - t0)
            except Exception as e:  # noqa: BLE001 (the engine's own refusal is the row's result)
                while e.__cause__ is not None:  # the root cause names what the engine lacks
                    e = e.__cause__
                rows[name] = {"scatter+result": {"error": f"{type(e).__name__}: {str(e)[:80]}"}}
                continue
            rows[name] = {"scatter+result": stats(trip)}
    return rows


def main():
    objs = cases()
    result = {"bytes": BYTES, "rounds": ROUNDS, "python": sys.version.split()[0], "load": os.getloadavg()[0],
              "torch": "torch" in " ".join(objs), "ray": bench_ray(objs), "dask": bench_dask(objs)}
    import dask
    import ray

    result["versions"] = {"ray": ray.__version__, "dask": dask.__version__, "numpy": np.__version__}
    out = ROOT / "target" / "bench" / "engines.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))

    def cell(s):
        if "error" in s:
            return f"fails: {s['error']}"
        return f"{s['median_ms']:.2f} ({s['p25_ms']:.2f}–{s['p75_ms']:.2f})"

    print("| what | Ray put, ms | Ray get, ms | Ray put+get, ms | Dask scatter+result, ms |")
    print("|---|---|---|---|---|")
    for name in objs:
        r, d = result["ray"][name], result["dask"][name]
        print(f"| {name} | {cell(r['put'])} | {cell(r['get'])} | {cell(r['put+get'])} | {cell(d['scatter+result'])} |")
    if not result["torch"]:
        print("torch: not installed in this venv (scripts/peers-env.sh's venv has it): no torch row")
    print(f"load average (1 min) at the start: {result['load']:.2f}; {result['versions']}")


if __name__ == "__main__":
    main()
