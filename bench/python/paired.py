"""Two ways of doing one thing, timed against each other in one run (jax_door_bench.py,
pjrt_bench.py): each side in alternating rounds of a number of calls, the median per call over
the rounds with the range, and the ratio of the medians, as a Markdown table."""

import os
import statistics
import time

import numpy as np


def plugin():
    """The PJRT plugin's path (DLPORT_PJRT_PLUGIN), or None after saying the bench skips."""
    path = os.environ.get("DLPORT_PJRT_PLUGIN")
    if not path:
        print("SKIP: DLPORT_PJRT_PLUGIN is not set")
    return path


def aligned(n):
    """`n` float32 values 0, 1, ... in 64-byte-aligned NumPy memory (what a view needs)."""
    raw = np.empty(n * 4 + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    out = raw[start : start + n * 4].view(np.float32)
    out[...] = np.arange(n, dtype=np.float32)
    return out


def per_op(f, loops):
    """Nanoseconds per call of `f` over `loops` calls."""
    t = time.perf_counter_ns()
    for _ in range(loops):
        f()
    return (time.perf_counter_ns() - t) / loops


def show(ts):
    return f"{statistics.median(ts) / 1000:.2f} µs ({min(ts) / 1000:.2f}–{max(ts) / 1000:.2f})"


def table(ours, theirs, rows, rounds, loops):
    """Prints a table of `rows`, each `(operation, our call, their call)`: both calls warmed by
    one round, then timed in `rounds` alternating rounds of `loops` calls each."""
    print(f"| operation | {ours} | {theirs} | ratio |")
    print("|---|---|---|---|")
    for name, a, b in rows:
        per_op(a, loops)
        per_op(b, loops)
        ta, tb = [], []
        for _ in range(rounds):
            ta.append(per_op(a, loops))
            tb.append(per_op(b, loops))
        ratio = statistics.median(ta) / statistics.median(tb)
        print(f"| {name} | {show(ta)} | {show(tb)} | {ratio:.2f} × |")
