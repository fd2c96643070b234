"""dlport against JAX's own DLPack on every build of XLA's CPU plugin that scripts/pjrt-test.sh
runs (issue #54 item 7: export and import <= 1.0 x jax.dlpack on the same buffers), in one run.

Each build runs in a process of its own (a JAX process registers a plugin build once): the
build registered with JAX as "build" with dlport's table interposed (`dlport.jax.install`,
device_type 1), then, in alternating rounds (ROUNDS rounds of LOOPS calls per side):

  export + NumPy import + release, of the same jax.Array on the build's device
           (dlport: numpy.from_dlpack(dlport.jax.export(x)); JAX: numpy.from_dlpack(x))
  import:  a jax.Array view of the same 64-byte-aligned NumPy array, dropped
           (dlport: dlport.jax.from_dlpack(a); JAX: jax.dlpack.from_dlpack(a, device=dev))

and dlport's own PJRT door on the build (a client of its own, dlport.pjrt.load), against
JAX's side of the rows above:

  PJRT door: export + NumPy import + release
           (dlport: numpy.from_dlpack(buffer), a view of the NumPy array; JAX: numpy.from_dlpack(x))
  PJRT door: import (view) + destroy
           (dlport: client.from_dlpack(a, copy=False); JAX: jax.dlpack.from_dlpack(a, device=dev))

Every row also gives a memcpy of the same 4 KiB (numpy.copyto), the physical limit of a copy.
Where JAX cannot load a build, its rows say so and compare dlport's PJRT door on that build
with that memcpy instead. The builds are read from scripts/pjrt-test.sh and its cache (run it once).
Needs a release wheel of dlport in the interpreter (`scripts/python-build.sh --release`):

  .venv/bin/python bench/python/pjrt_builds_bench.py
"""

import os
import re
import statistics
import subprocess
import sys

import numpy as np

from paired import aligned, per_op, show  # this directory

ROUNDS, LOOPS = 31, 400
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def builds():
    """(label, plugin path) of each build scripts/pjrt-test.sh runs, found in its cache."""
    text = open(os.path.join(ROOT, "scripts", "pjrt-test.sh"), encoding="utf-8").read()
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dlport", "pjrt")
    out = []
    for line in re.findall(r'"([^"]+)"', text.split("builds=(", 1)[1].split(")", 1)[0]):
        name, version, rel = line.split()
        out.append((f"{name} {version}", os.path.join(cache, f"{name}-{version}", rel)))
    return out


def timed(a, b, rounds=ROUNDS, loops=LOOPS):
    """Both calls warmed by one round, then `rounds` alternating rounds of `loops` calls."""
    per_op(a, loops)
    per_op(b, loops)
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(per_op(a, loops))
        tb.append(per_op(b, loops))
    return ta, tb


def one(label, so):
    """The rows of one build, printed as Markdown."""
    import dlport.pjrt

    n = 1024
    a = aligned(n)
    dst = np.empty_like(a)
    client = dlport.pjrt.load(so)
    api = "API {}.{}".format(*client.api_version)
    buf = client.from_dlpack(a, copy=False)
    assert buf.data_ptr == a.ctypes.data
    door = [
        ("PJRT door: export + NumPy import + release", lambda: np.from_dlpack(buf)),
        ("PJRT door: import (view) + destroy", lambda: client.from_dlpack(a, copy=False)),
    ]
    try:
        import jax
        import jax.numpy as jnp
        from jax._src import xla_bridge

        import dlport.jax

        xla_bridge.register_plugin("build", library_path=so)
        dlport.jax.install("build", device_type=1)
        dev = jax.devices("build")[0]
        x = jax.device_put(jnp.arange(n, dtype=jnp.float32), dev) + 0
        x.block_until_ready()
        # Both sides are views (checked once before timing).
        assert np.from_dlpack(dlport.jax.export(x)).ctypes.data == x.unsafe_buffer_pointer()
        assert np.from_dlpack(x).ctypes.data == x.unsafe_buffer_pointer()
        assert dlport.jax.from_dlpack(a).unsafe_buffer_pointer() == a.ctypes.data
        jax_ok = f"jax {jax.__version__}"
        rows = [
            ("export + NumPy import + release", lambda: np.from_dlpack(dlport.jax.export(x)),
             lambda: np.from_dlpack(x)),
            ("import: a JAX view of NumPy memory", lambda: dlport.jax.from_dlpack(a),
             lambda: jax.dlpack.from_dlpack(a, device=dev)),
            (door[0][0], door[0][1], lambda: np.from_dlpack(x)),
            (door[1][0], door[1][1], lambda: jax.dlpack.from_dlpack(a, device=dev)),
        ]
    except Exception as e:  # noqa: BLE001 - a build JAX cannot load is a row that says why
        jax_ok = None
        why = f"{type(e).__name__}: {e}".splitlines()[0][:120]
        rows = [(name, ours, None) for name, ours in door]
    memcpy = lambda: np.copyto(dst, a)  # noqa: E731
    for name, ours, theirs in rows:
        if theirs is None:
            ta, tm = timed(ours, memcpy)
            ratio = statistics.median(ta) / statistics.median(tm)
            print(f"| {label} ({api}; JAX cannot load it: {why}) | {name} | {show(ta)} | — | — "
                  f"| {show(tm)} | {ratio:.2f} × memcpy |")
            continue
        ta, tb = timed(ours, theirs)
        _, tm = timed(ours, memcpy, rounds=5)
        ratio = statistics.median(ta) / statistics.median(tb)
        mark = "✅" if ratio <= 1.0 else "❌"
        print(f"| {label} ({api}, {jax_ok}) | {name} | {show(ta)} | {show(tb)} | {ratio:.2f} × {mark} "
              f"| {show(tm)} | {statistics.median(ta) / statistics.median(tm):.2f} × memcpy |")
    sys.stdout.flush()


def main(argv):
    if len(argv) == 3 and argv[0] == "--one":
        one(argv[1], argv[2])
        return 0
    print(f"numpy {np.__version__}, 1024 float32, {ROUNDS}x{LOOPS} calls per side, alternating")
    print("| build | operation | dlport | jax.dlpack | ratio | memcpy of the 4 KiB | dlport vs memcpy |")
    print("|---|---|---|---|---|---|---|")
    failed = 0
    for label, so in builds():
        if not os.path.isfile(so):
            print(f"| {label} | — | SKIPPED: {so} is not there (scripts/pjrt-test.sh downloads it) | | | | |")
            continue
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", label, so], text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        sys.stdout.write(p.stdout)
        if p.returncode != 0:
            failed = 1
            print(f"| {label} | FAILED | {p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else ''} | | | | |")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
