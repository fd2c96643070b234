"""How dlport.Tensor meets Dask (issue 56, class 6): `import dlport` imports no Dask and installs no
import hook; Dask's `dask.sizeof` entry point counts a tensor's bytes; `import dlport.dask`
registers the "dask" serialization family, whichever of dlport and distributed was imported
first. The family's round trips through a cluster are python/tests/engines/test_dask.py's."""

import importlib.util
import subprocess
import sys

import pytest

needs_distributed = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="Dask distributed is not installed (scripts/engines-test.sh runs these in the peers' venv)",
)


def run(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_import_dlport_installs_no_hook_and_imports_no_dask():
    code = """
import sys
before = list(sys.meta_path), list(sys.path_hooks)
import dlport
after = list(sys.meta_path), list(sys.path_hooks)
print(before == after, sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))
"""
    assert run(code) == ["True", "[]"]


PREAMBLE = """
import numpy as np
from distributed.protocol import deserialize, serialize
from dask.sizeof import sizeof
import dlport
t = dlport.from_dlpack(np.arange(8, dtype=np.float32))
header, frames = serialize(t)
u = deserialize(header, frames)
print(header["serializer"], sizeof(t), u.shape == t.shape and bytes(u) == bytes(t))
"""


@needs_distributed
@pytest.mark.parametrize(
    "imports",
    ["import dlport.dask", "import distributed; import dlport.dask", "import dlport, distributed; import dlport.dask"],
)
def test_import_dlport_dask_registers_the_family(imports):
    assert run(imports + PREAMBLE) == ["dask", "32", "True"]


@needs_distributed
@pytest.mark.parametrize("imports", ["import dlport, distributed", "import distributed, dlport"])
def test_without_dlport_dask_a_tensor_is_pickled_and_sizeof_counts_its_bytes(imports):
    # dask.sizeof's entry point (python/pyproject.toml) counts the bytes; the family waits for
    # `import dlport.dask`, so the tensor goes by pickle (protocol 5 here: no copy in band).
    assert run(imports + PREAMBLE) == ["pickle", "32", "True"]
