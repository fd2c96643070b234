"""Instructions a Python statement costs, counted by callgrind (noise-free, unlike time on a
shared machine). Used by exchange.py and pyo3_args.py."""

import os
import re
import subprocess
import sys

# What a counted program adds to its setup: no collection of the imported modules' objects
# mid-loop (one full collection counted ten million instructions, a different share in every
# run), and the loop in a function (fast locals, where a module-level loop writes a dict every
# turn).
COUNTED = """
import gc
gc.collect()
gc.freeze()
def loop():
    for _ in range({n}):
        {stmt}
loop()
"""


def total(setup, stmt, n, extra=()):
    """Instructions of the program `setup` + `stmt` run n times, under callgrind (`extra`: more
    callgrind options, such as `--toggle-collect=`)."""
    prog = setup + COUNTED.format(n=n, stmt=stmt)
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *extra,
           sys.executable, "-c", prog]
    # A fixed hash seed (str hashes, so dict probes, the same in every run) and one OpenBLAS
    # thread (NumPy's spare ones spin, counted in a share that varies from run to run).
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    err = subprocess.run(cmd, capture_output=True, text=True, env=env).stderr
    return int(re.search(r"refs:\s+([\d,]+)", err).group(1).replace(",", ""))


def per_call(setup, stmt, n=20_000):
    """Instructions per run of `stmt`: its loop, less the same loop with `pass`."""
    return (total(setup, stmt, n) - total(setup, "pass", n)) / n
