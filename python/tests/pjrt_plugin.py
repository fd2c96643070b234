"""What the tests of a real PJRT plugin share (test_pjrt.py, test_pjrt_attack.py,
test_jax_interpose.py and its child processes): the plugin's path (DLPORT_PJRT_PLUGIN, which
scripts/pjrt-test.sh sets) and the skip without it, the StableHLO program, and a python/README.md
block run as written."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = os.environ.get("DLPORT_PJRT_PLUGIN")
needs_plugin = pytest.mark.skipif(
    not PLUGIN, reason="DLPORT_PJRT_PLUGIN is not set (scripts/pjrt-test.sh sets it)"
)

# `2 * x + 1` over a 2x3 float32 tensor: the capability probe's program (dlport-native).
AFFINE = (
    Path(__file__).resolve().parents[2] / "native/src/pjrt/probe/affine.mlir"
).read_text()


def run_readme_block(heading, env=None):
    """Runs the first code block of python/README.md's section `heading` as written, in a process
    of its own with `env` added (the plugin found as the installed package ``xla_cpu_pjrt``: the
    unpacked wheel's root on PYTHONPATH), and checks it prints the text block that follows it.
    Skips where DLPORT_PJRT_PLUGIN is another build than that package's."""
    if Path(PLUGIN).name != "xla_cpu_pjrt.so":
        pytest.skip("the README's block loads the xla-cpu-pjrt package; DLPORT_PJRT_PLUGIN is another build")
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    section = readme[readme.index(heading) :]
    code, shown = re.findall(r"```(?:python|text)\n(.*?)```", section, re.S)[:2]
    package_root = Path(PLUGIN).parents[2]  # .../xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(package_root), **(env or {})},
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert p.stdout == shown, f"printed:\n{p.stdout}\nthe README shows:\n{shown}"
