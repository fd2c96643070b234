"""The Python package's exchange costs, in one run (the wheel must be a release build with the
timing loops: DLPORT_PY_FEATURES=bench scripts/python-build.sh --release). Writes target/bench/python_exchange.json, which
bench/python/report.py turns into BENCHMARKS.md's "Python package" section.

1. `dlport.from_dlpack(numpy array)` against `numpy.from_dlpack(numpy array)` (goal: no slower);
2. an import through a type's DLPack exchange API, per tensor, timed in native code (goal:
   <= 80 ns, the RFC's figure), for dlport's own table and for tvm-ffi's;
3. tvm-ffi taking a dlport tensor through the exchange API against through `__dlpack__`.

Each figure is the median over rounds of the per-call time of a timeit loop; rounds of the
compared calls alternate, so that drift on a noisy machine hits both alike.
Usage: .venv/bin/python bench/python/exchange.py [--quick]
"""

import json
import pathlib
import platform
import shutil
import statistics
import sys
import timeit

import numpy as np
import tvm_ffi

import callgrind  # this directory

import dlport
from dlport import _native

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUICK = "--quick" in sys.argv
ROUNDS = 7 if QUICK else 25
CALLS = 2_000 if QUICK else 20_000


def per_call(cases):
    """Median and quartiles (ns per call) of each named zero-argument callable, rounds alternating."""
    times = {name: [] for name in cases}
    for name, f in cases.items():
        f()  # warm caches (and the exchange-API type cache)
    for _ in range(ROUNDS):
        for name, f in cases.items():
            times[name].append(timeit.timeit(f, number=CALLS) / CALLS * 1e9)
    return {name: summary(v) for name, v in times.items()}


def summary(values):
    q = statistics.quantiles(values, n=4)
    return {"median": statistics.median(values), "p25": q[0], "p75": q[2], "min": min(values)}


def native_loop(obj, full):
    """ns per import through type(obj)'s exchange API, timed inside native code."""
    n = CALLS * 10
    _native._bench.exchange_loop(obj, 1000, full)
    return summary([_native._bench.exchange_loop(obj, n, full) / n for _ in range(ROUNDS)])


SETUP = """
import numpy as np, dlport, tvm_ffi
from dlport import _native
a = np.arange(16, dtype=np.float32)
t = dlport.from_dlpack(a)
w = tvm_ffi.core.DLTensorTestWrapper(tvm_ffi.from_dlpack(a))
"""

def instructions(body, toggle=None, n=20_000):
    """Instructions per call under callgrind: the program with `body` run n times, less the same
    program with `pass` (or, with `toggle`, only the instructions inside that native function)."""
    if toggle:
        return callgrind.total(SETUP, body, n, [f"--toggle-collect={toggle}"]) / n
    return callgrind.per_call(SETUP, body, n)


def main():
    a = np.arange(16, dtype=np.float32)
    numpy_vs = per_call({
        "dlport.from_dlpack(a)": lambda: dlport.from_dlpack(a),
        "numpy.from_dlpack(a)": lambda: np.from_dlpack(a),
    })

    t = dlport.from_dlpack(a)
    wrapper = tvm_ffi.core.DLTensorTestWrapper(tvm_ffi.from_dlpack(a))
    exchange = {
        "dlport table: export + validate + release": native_loop(t, False),
        "dlport table: export + import into a dlport tensor + release": native_loop(t, True),
        "tvm-ffi table: export + validate + release": native_loop(wrapper, False),
        "tvm-ffi table: export + import into a dlport tensor + release": native_loop(wrapper, True),
    }
    from_python = per_call({
        "dlport.from_dlpack(dlport tensor)": lambda: dlport.from_dlpack(t),
        "dlport.from_dlpack(tvm-ffi wrapper)": lambda: dlport.from_dlpack(wrapper),
    })

    nop = tvm_ffi.get_global_func("testing.nop")
    tvm = per_call({
        "tvm_ffi.from_dlpack(t) (exchange API)": lambda: tvm_ffi.from_dlpack(t),
        "tvm_ffi.from_dlpack(t.__dlpack__()) (__dlpack__)": lambda: tvm_ffi.from_dlpack(t.__dlpack__()),
        "testing.nop(t) (exchange API argument)": lambda: nop(t),
        "testing.nop(tvm_ffi.from_dlpack(t.__dlpack__())) (__dlpack__)":
            lambda: nop(tvm_ffi.from_dlpack(t.__dlpack__())),
    })

    counts = {}
    if shutil.which("valgrind"):
        loop = "*__pyfunction_exchange_loop*"
        counts = {
            "dlport.from_dlpack(a)": instructions("dlport.from_dlpack(a)"),
            "numpy.from_dlpack(a)": instructions("np.from_dlpack(a)"),
            "dlport table: export + validate + release": instructions("_native._bench.exchange_loop(t, 20000, False)", loop, 1) / 20000,
            "tvm-ffi table: export + validate + release": instructions("_native._bench.exchange_loop(w, 20000, False)", loop, 1) / 20000,
            "dlport table: export + import into a dlport tensor + release": instructions("_native._bench.exchange_loop(t, 20000, True)", loop, 1) / 20000,
            "tvm-ffi table: export + import into a dlport tensor + release": instructions("_native._bench.exchange_loop(w, 20000, True)", loop, 1) / 20000,
            "tvm_ffi.from_dlpack(t) (exchange API)": instructions("tvm_ffi.from_dlpack(t)"),
            "tvm_ffi.from_dlpack(t.__dlpack__()) (__dlpack__)": instructions("tvm_ffi.from_dlpack(t.__dlpack__())"),
        }

    result = {
        "command": ".venv/bin/python bench/python/exchange.py" + (" --quick" if QUICK else ""),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "tvm_ffi": tvm_ffi.__version__,
        "dlport": dlport.__version__,
        "rounds": ROUNDS,
        "calls_per_round": CALLS,
        "numpy_vs": numpy_vs,
        "exchange_native": exchange,
        "from_python": from_python,
        "tvm_ffi_takes_dlport": tvm,
        "instructions": counts,
    }
    out = ROOT / "target" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "python_exchange.json").write_text(json.dumps(result, indent=1))
    for section in ("numpy_vs", "exchange_native", "from_python", "tvm_ffi_takes_dlport"):
        print(f"{section}:")
        for name, s in result[section].items():
            print(f"  {name}: {s['median']:.1f} ns (p25-p75 {s['p25']:.1f}-{s['p75']:.1f})")
    for name, c in counts.items():
        print(f"  instructions: {name}: {c:.0f}")


if __name__ == "__main__":
    main()
