"""The PyO3 argument path against the package's `from_dlpack`, in one run: a 16-element float32
NumPy array taken by the example extension's `passthrough(x: DLPackTensor) -> DLPackTensor`
(dlport-pyo3's extraction, then the result object), by `dlport.from_dlpack(a)`, and by
`numpy.from_dlpack(a)`. Every round times each call once, in an order that reverses from one
round to the next; a ratio is the median over rounds of the call's time against
`dlport.from_dlpack`'s in the same round, so that both sides of a ratio run at the same CPU
speed (a shared machine's speed moves between rounds). Instructions per call are counted by
callgrind where valgrind is installed. Replaces (or appends) the section of BENCHMARKS.md.

Build both extensions with the same profile first, the release wheels (scripts/bench.sh):
  DLPORT_PY_FEATURES=bench bash scripts/python-build.sh --release
  DLPORT_EXT_FEATURES=dlpark bash scripts/python-extension-test.sh --release
Usage: .venv/bin/python bench/python/pyo3_args.py [--quick]
"""

import pathlib
import platform
import shutil
import statistics
import sys
import timeit

import numpy as np

import callgrind  # this directory
import dlport
import dlport_example
import sections  # this directory

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUICK = "--quick" in sys.argv
ROUNDS = 20 if QUICK else 300
CALLS = 2_000
BASE = "`dlport.from_dlpack(a)`"
HEADING = "## PyO3 argument path for a NumPy array vs the package's from_dlpack"

SETUP = """
import numpy as np, dlport, dlport_example
a = np.arange(16, dtype=np.float32)
"""
CASES = {
    "`dlport_example.passthrough(a)` (dlport-pyo3: `DLPackTensor` argument and result)":
        "dlport_example.passthrough(a)",
    "`dlport_example.take(a)` (dlport-pyo3: the argument alone, dropped)":
        "dlport_example.take(a)",
    "`dlport_example.take_dlpark(a)` (dlpark 0.10's `python::from_dlpack` + `validate`, dropped)":
        "dlport_example.take_dlpark(a)",
    "`dlport.from_dlpack(a)`": "dlport.from_dlpack(a)",
    "`numpy.from_dlpack(a)`": "np.from_dlpack(a)",
}
if not hasattr(dlport_example, "take_dlpark"):
    sys.exit("dlport_example lacks take_dlpark: build it with DLPORT_EXT_FEATURES=dlpark "
             "(scripts/python-extension-test.sh --release)")


def per_call():
    env = {}
    exec(SETUP, env)
    fns = {name: eval(f"lambda: {stmt}", env) for name, stmt in CASES.items()}
    times = {name: [] for name in fns}
    for f in fns.values():
        f()
    order = list(fns.items())
    for _ in range(ROUNDS):
        for name, f in order:
            times[name].append(timeit.timeit(f, number=CALLS) / CALLS * 1e9)
        order.reverse()
    base = times[BASE]
    out = {}
    for name, v in times.items():
        q = statistics.quantiles(v, n=4)
        ratio = statistics.median(t / b for t, b in zip(v, base))
        out[name] = (statistics.median(v), q[0], q[2], ratio)
    return out


def instructions(n=20_000):
    """Instructions per call of each case: its loop, less the same loop with `pass`."""
    return {name: callgrind.per_call(SETUP, stmt, n) for name, stmt in CASES.items()}


def main():
    times = per_call()
    counts = instructions() if shutil.which("valgrind") else {}
    base_i = counts.get(BASE)
    lines = [
        HEADING,
        "",
        "Command: `DLPORT_PY_FEATURES=bench scripts/python-build.sh --release && "
        "DLPORT_EXT_FEATURES=dlpark scripts/python-extension-test.sh --release && "
        ".venv/bin/python bench/python/pyo3_args.py` "
        f"(Python {platform.python_version()}, NumPy {np.__version__}, dlport {dlport.__version__}; "
        f"medians over {ROUNDS} rounds of {CALLS:,} calls each, p25–p75 in parentheses; each "
        "round times every call once, in an order that reverses from round to round, and a ratio "
        "is the median over rounds of the call's time against `dlport.from_dlpack`'s in the same "
        "round; instructions per call by callgrind in the same run). The argument path is "
        "the example extension's `passthrough`: dlport-pyo3 takes the array as a `DLPackTensor` "
        "and returns it as the extension's `Tensor`, the same work as `dlport.from_dlpack(a)`; "
        "`take` is the argument alone (imported, validated, held as the `Tensor` object an "
        "import makes, released), and `take_dlpark` "
        "the same argument through dlpark 0.10's PyO3 path in the same extension (dlpark 0.10 "
        "depends on pyo3 0.30, as dlport-pyo3 does, so both link into one module). An argument "
        "is held as the `Tensor` object the import makes, one pointer: pyo3 moves an argument and "
        "a result by value through its conversions, and holding the 168-byte tensor value "
        "instead (before commit 'DLPackTensor holds its object') made `passthrough` 1.07–1.12 × "
        "in time at 1.02 × the instructions, while `take` was 0.87 ×.",
        "",
        "| call | time | vs `dlport.from_dlpack` | instructions | vs `dlport.from_dlpack` |",
        "|---|---|---|---|---|",
    ]
    for name, (med, lo, hi, ratio) in times.items():
        inst = counts.get(name)
        lines.append(
            f"| {name} | {med:.0f} ns ({lo:.0f}–{hi:.0f}) | {ratio:.2f} × | "
            + (f"{inst:,.0f} | {inst / base_i:.2f} × |" if inst is not None else "– | – |"))
    lines.append("")
    body = "\n".join(lines)
    sections.replace(HEADING, body)
    print(body)


if __name__ == "__main__":
    main()
