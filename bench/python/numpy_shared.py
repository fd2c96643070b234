"""Python's way of sharing 256 MiB with another process, for comparison with dlport's share
(bench/src/bin/share.rs, run right before this in scripts/bench.sh): multiprocessing.shared_memory
with NumPy. Each round is timed from the producer's first call until the consumer's reply, as in
the Rust bench: "open" once the consumer holds a NumPy array over the memory, "read" once it has
also summed every element. Two producers: the data already in a SharedMemory block (as dlport's
memfd tensor), and a NumPy array copied into a new block each round (as dlport's share of a Vec).
The consumer is one process (spawned, not forked, like the Rust one), kept for every round.
Writes target/bench/numpy_shared.json.

    .venv/bin/python bench/python/numpy_shared.py [--quick]
"""
import json
import multiprocessing as mp
import pathlib
import sys
import time
from multiprocessing import shared_memory

import numpy as np

BYTES = 256 << 20
N = BYTES // 8
ROOT = pathlib.Path(__file__).resolve().parents[2]


def attach(name):
    try:
        return shared_memory.SharedMemory(name=name, track=False)  # Python >= 3.13
    except TypeError:
        # Before 3.13 attaching registers the block with the resource tracker again; the
        # spawned consumer shares the producer's tracker, whose registry is a set, so the
        # producer's unlink() still unregisters it once.
        return shared_memory.SharedMemory(name=name)


def consumer(conn):
    while True:
        msg = conn.recv()
        if msg is None:
            return
        name, want_sum = msg
        shm = attach(name)
        arr = np.ndarray((N,), dtype=np.uint64, buffer=shm.buf)
        total = int(arr.sum(dtype=np.uint64)) if want_sum else arr.size
        del arr
        shm.close()
        conn.send(total)


def stats(t):
    t = sorted(t)
    q = lambda p: t[round((len(t) - 1) * p)]
    return {"median": q(0.5), "p25": q(0.25), "p75": q(0.75)}


def main():
    rounds = 3 if "--quick" in sys.argv else 9
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=consumer, args=(theirs,))
    proc.start()
    data = np.arange(N, dtype=np.uint64)
    want_sum = int(data.sum(dtype=np.uint64))
    block = shared_memory.SharedMemory(create=True, size=BYTES)
    np.ndarray((N,), dtype=np.uint64, buffer=block.buf)[:] = data
    rows = []
    for name, copy in [
        ("multiprocessing.shared_memory + NumPy, data already in the block", False),
        ("multiprocessing.shared_memory + NumPy, a NumPy array copied into a new block", True),
    ]:
        times = [[], []]
        for rnd in range(rounds + 1):
            for k, want in enumerate((False, True)):
                start = time.perf_counter()
                if copy:
                    shm = shared_memory.SharedMemory(create=True, size=BYTES)
                    np.ndarray((N,), dtype=np.uint64, buffer=shm.buf)[:] = data
                else:
                    shm = block
                ours.send((shm.name, want))
                got = ours.recv()
                elapsed = time.perf_counter() - start
                if copy:
                    shm.close()
                    shm.unlink()
                assert got == (want_sum if want else N), got
                if rnd > 0:
                    times[k].append(elapsed)
        rows.append({"name": name, "open_s": stats(times[0]), "read_s": stats(times[1])})
        print(f"{name}: open {rows[-1]['open_s']['median'] * 1e3:.2f} ms, "
              f"read {rows[-1]['read_s']['median'] * 1e3:.2f} ms (medians of {rounds})")
    ours.send(None)
    proc.join()
    block.close()
    block.unlink()
    out = ROOT / "target" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "numpy_shared.json").write_text(json.dumps(
        {"bytes": BYTES, "rounds": rounds, "python": sys.version.split()[0],
         "numpy": np.__version__, "rows": rows}))
    print("wrote target/bench/numpy_shared.json")


if __name__ == "__main__":
    main()
