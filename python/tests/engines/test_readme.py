"""python/README.md's Ray example ("Past one machine"), run as a user pastes it: in a fresh
interpreter of the peers' venv (its own `ray.init()`), its printed value compared with the one
the README shows."""

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_ray_example_runs_as_written():
    text = README.read_text()
    section = text.split("## Past one machine", 1)[1]
    block = re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1)
    assert "ray.put" in block
    shown = re.search(r"# (\d+\.\d+)\n", block).group(1)
    done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == shown
    print(f"\n[readme] python/README.md's Ray example printed {shown}, as the README shows")
