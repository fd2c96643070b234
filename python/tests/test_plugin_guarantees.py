"""Which plugins dlport takes, and how it loads them, from Python (issue #47).

- A plugin asking for a host-class device type (kDLCPU, kDLCUDAHost, kDLROCMHost,
  kDLCUDAManaged, kDLTPUHost) or a type dlport's built-in backends serve (kDLCUDA) is refused by
  field and value, whether or not a CUDA driver is present.
- ``load_plugin`` gives the path's bytes to ``dlopen`` exactly (``os.fsencode``'s): a file whose
  name is not UTF-8 loads; an empty path is refused, never ``dlopen("")`` (the program itself).

The plugins are ``plugins/tests/typed_plugin.c``, compiled here with the system's C compiler
(skipped, saying why, without one).
"""

import os
import pathlib
import shutil
import subprocess

import pytest

import dlport

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "plugins" / "tests" / "typed_plugin.c"


def build(out: bytes, device_type: int, name: str) -> bytes:
    """Compiles typed_plugin.c serving `device_type` as `name` into the path `out` (bytes)."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("SKIPPED: no C compiler (cc) to build plugins/tests/typed_plugin.c")
    subprocess.run(
        [cc.encode(), b"-std=c11", b"-fPIC", b"-shared", b"-I" + os.fsencode(ROOT / "capi" / "include"),
         f"-DPLUGIN_TYPE={device_type}".encode(), f'-DPLUGIN_NAME="{name}"'.encode(),
         os.fsencode(SOURCE), b"-o", out],
        check=True,
    )
    return out


@pytest.mark.parametrize("device_type", [1, 2, 3, 11, 13, 20])
def test_a_plugin_asking_for_a_host_class_device_type_is_refused(tmp_path, device_type):
    path = build(os.fsencode(tmp_path / f"libtyped_{device_type}.so"), device_type, "py_hosty")
    with pytest.raises(dlport.DLPackError) as e:
        dlport.load_plugin(os.fsdecode(path))
    assert f"device_types has {device_type} (" in str(e.value)
    assert "py_hosty" not in [b["name"] for b in dlport.backends()]


def test_load_plugin_uses_the_path_bytes_exactly_and_refuses_the_empty_path(tmp_path):
    # A file name that is not UTF-8: Python names it with surrogate escapes (os.fsdecode).
    path = build(os.fsencode(tmp_path) + b"/libtyped_\xff\xfe.so", 12, "py_bytes")
    for given in [os.fsdecode(path), pathlib.Path(os.fsdecode(path))]:
        assert dlport.load_plugin(given) == "py_bytes"
        dlport.unload_plugin("py_bytes")
    with pytest.raises(dlport.DLPackError, match="the path is empty"):
        dlport.load_plugin("")
