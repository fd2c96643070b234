"""`python -m dlport`: the version, DLPack's, the backends, the CUDA probe and the build."""

import subprocess
import sys

import dlport


def test_python_m_dlport_reports_what_it_found() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dlport"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == f"dlport {dlport.__version__}"
    assert out[1] == "DLPack {}.{}".format(*dlport.__dlpack_version__)
    assert out[2] == "backends:"
    assert any(line.startswith("  cpu: ") and "kDLCPU" in line for line in out)
    assert "plugins: none loaded (dlport.load_plugin(path) loads one)" in out
    cuda = [line for line in out if line.startswith("CUDA driver: ")]
    assert len(cuda) == 1
    # Found with a device count, or not found with the loader's reason (never a bare "no").
    assert cuda[0].startswith(("CUDA driver: found, ", "CUDA driver: not found: "))
    assert len(cuda[0].split(": ", 2)[-1]) > 10
    build = [line for line in out if line.startswith("build: ")]
    assert len(build) == 1 and ("debug" in build[0] or "release" in build[0])
