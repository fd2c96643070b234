"""The installed package: version, stubs, and what a tensor says about itself."""

import importlib.util
import pathlib
import re

import numpy as np

import dlport

HERE = pathlib.Path(__file__).resolve().parent


def test_version_is_the_crates_and_the_dlpack_version_is_1_3():
    cargo = (HERE.parent / "Cargo.toml").read_text()
    assert dlport.__version__ == re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
    assert dlport.__dlpack_version__ == (1, 3)


def test_the_package_ships_its_stubs_and_py_typed():
    pkg = pathlib.Path(dlport.__file__).parent
    assert (pkg / "py.typed").is_file()
    stub = (pkg / "__init__.pyi").read_text()
    for name in ("def from_dlpack", "class Tensor", "def __dlpack__", "def compact", "__dlpack_c_exchange_api__"):
        assert name in stub, name


def test_repr_and_properties():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = dlport.from_dlpack(a)
    assert repr(t) == "dlport.Tensor(shape=(2, 3), dtype=int16, device=cpu)"
    assert (t.ndim, t.nbytes, t.memory, t.readonly) == (2, 12, "cpu", False)
    assert repr(dlport.from_dlpack(np.array(1.5, dtype=np.float32))).startswith("dlport.Tensor(shape=(), ")
    assert "shape=(3,)" in repr(dlport.from_dlpack(np.arange(3)))
    assert isinstance(dlport.Tensor.__dlpack_c_exchange_api__, type(a.__dlpack__()))


def test_a_reused_tensor_object_starts_fresh():
    """An object in the memory of a dead dlport.Tensor carries nothing of its last life, and
    weak references to the dead one stay dead."""
    import weakref

    a, b = np.arange(6, dtype=np.float32), np.arange(3, dtype=np.int64).reshape(3, 1)
    died, ids = [], set()
    for i in range(300):
        src = a if i % 2 else b
        t = dlport.from_dlpack(src)
        ids.add(id(t))
        ref = weakref.ref(t, died.append)
        assert ref() is t and weakref.getweakrefcount(t) == 1
        assert (t.shape, t.dtype, t.data_ptr()) == (src.shape, src.dtype.name, src.ctypes.data)
        assert t._dlpack_users == 0
        del t
        assert ref() is None
    assert len(died) == 300, "every weak reference's callback ran once"
    assert len(ids) < 300, "premise: dead objects were reused"


def test_help_shows_python_text_not_rust_link_syntax():
    """`help(dlport)` renders the docstrings the Rust side writes: they are plain text for a
    Python reader, without rustdoc's intra-doc links."""
    import pydoc

    text = pydoc.render_doc(dlport, renderer=pydoc.plaintext)
    for name in ("from_dlpack", "explain", "Tensor", "compact", "Shared", "share"):
        assert name in text, name
    for rust in (r"\[`[^`]*`\]", r"\]\((?:Self|crate|super)::", r"\bSelf::", r"\bcrate::"):
        found = re.findall(rust, text)
        assert not found, f"{rust}: {found[:3]}"


def test_the_stubs_name_every_public_name_with_its_arguments():
    import inspect

    stub = (pathlib.Path(dlport.__file__).parent / "__init__.pyi").read_text()
    for name in dlport.__all__:
        assert re.search(rf"\b{re.escape(name)}\b", stub), name
    for keyword in inspect.signature(dlport.from_dlpack).parameters:
        assert f"{keyword}:" in stub.split("def from_dlpack", 1)[1].split("->", 1)[0], keyword
    assert "def copied" in stub and "def compact(self, *, align" in stub


def test_the_readmes_python_blocks_run():
    """Each ```python block of python/README.md runs as written (mypy checks them too), except
    a block marked `<!-- snippet: skip (why) -->`, whose reason is printed. The Ray block runs
    where Ray is installed (the snippet test installs it in its fresh venv). A block that loads the installed
    plugin package ``xla_cpu_pjrt`` runs where it is installed (the snippet test installs it;
    test_pjrt.py runs that block on the cached plugin)."""
    import dlport.pjrt

    has_cpu_plugin = "xla_cpu_pjrt" in dlport.pjrt.plugins()
    readme = HERE.parent / "README.md"
    found = re.findall(r"(<!-- snippet: skip \(([^\n]*)\) -->\n)?^```python\n(.*?)^```", readme.read_text(),
                       re.S | re.M)
    assert len(found) >= 3
    ran = 0
    for i, (_, skip, block) in enumerate(found):
        if skip:
            print(f"python/README.md block {i}: SKIPPED here: {skip}")
            continue
        if "import ray" in block and importlib.util.find_spec("ray") is None:
            print(f"python/README.md block {i}: SKIPPED here: Ray is not installed (scripts/snippets-test.sh runs it)")
            continue
        if 'dlport.pjrt.load("xla_cpu_pjrt")' in block and not has_cpu_plugin:
            print(f"python/README.md block {i}: SKIPPED here: the xla-cpu-pjrt package is not installed")
            continue
        exec(compile(block, f"python/README.md block {i}", "exec"), {})
        ran += 1
    assert ran >= 3
