"""What an attack of the PJRT door tried, from Python (issue #54), against the real XLA CPU
plugin (DLPORT_PJRT_PLUGIN; skipped with the reason without it): a buffer of another client
given to an executable, an argument of another type than the program's parameter, a
sub-byte copy, the CPU platform's devices 1..N, thousands of failed
loads, an empty array, a device type that is no DLPack type, a relative path, and how a plugin
package's library is found; and what the review found of the door beside the registry: a
buffer's ``__dlpack__`` answering as every dlport export, a copy under the allocation limit,
``load`` registering the client as a backend."""

import ctypes
import os
import sys

import numpy as np
import pytest

import dlport
from dlport import testing
from pjrt_plugin import AFFINE, PLUGIN, needs_plugin

pjrt = pytest.importorskip("dlport.pjrt", reason="the dlport wheel has no dlport.pjrt")


@needs_plugin
def test_an_executable_refuses_a_buffer_of_another_client():
    first, second = pjrt.load(PLUGIN), pjrt.load(PLUGIN)
    exe = first.compile(AFFINE)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(BufferError, match="another client"):
        exe.execute(second.from_dlpack(x))
    out = exe.execute(first.from_dlpack(x))[0]
    np.testing.assert_array_equal(np.from_dlpack(out), 2 * x + 1)


@needs_plugin
def test_an_argument_of_another_type_than_the_parameter_is_refused():
    client = pjrt.load(PLUGIN)
    exe = client.compile(AFFINE)
    with pytest.raises(BufferError, match=r"argument 0 is int32\[2,3\].*float32\[2,3\]"):
        exe.execute(client.from_dlpack(np.zeros((2, 3), np.int32)))


@needs_plugin
@pytest.mark.parametrize("offset", [0, 1])
def test_a_sub_byte_copy_keeps_its_values(offset):
    client = pjrt.load(PLUGIN)
    raw = testing.aligned(16, np.uint8)
    raw[offset : offset + 6] = [0x21, 0x43, 0x65, 0x77, 0x88, 0x99]
    int4 = testing.DLDataType(0, 4, 1)
    producer = testing.Producer(raw[offset : offset + 3], shape=[6], strides=[1], dtype=int4)
    buf = client.from_dlpack(producer, copy=True if offset == 0 else None)
    assert producer.deleted == 1
    assert buf.dtype == "int4" and buf.shape == [6]
    assert ctypes.string_at(buf.data_ptr, 3) == bytes([0x21, 0x43, 0x65])


@needs_plugin
def test_a_buffer_on_cpu_device_1_exports_as_host_memory():
    client = pjrt.load(PLUGIN)
    if len(client.devices) < 2:
        pytest.skip("the client has one device")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    buf = client.from_dlpack(x, device=1)
    assert buf.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(buf), x)


@needs_plugin
def test_thousands_of_failed_loads_keep_their_messages_and_the_next_load(tmp_path):
    for i in range(4200):
        missing = f"/nonexistent/dlport-{i}/libpjrt.so"
        with pytest.raises(BufferError, match=f"dlport-{i}/"):
            pjrt.pjrt_load(missing)
    link = tmp_path / "libxla_once_more.so"
    link.symlink_to(PLUGIN)
    assert pjrt.load(str(link)).platform == "cpu"


@needs_plugin
def test_an_empty_array_imports_with_the_default_policy():
    client = pjrt.load(PLUGIN)
    buf = client.from_dlpack(np.zeros((0, 3), np.float32))
    assert np.from_dlpack(buf).shape == (0, 3)
    producer = testing.Producer(np.zeros((0, 3), np.float32), data=0x1001)
    assert np.from_dlpack(client.from_dlpack(producer)).shape == (0, 3)


@needs_plugin
def test_a_device_type_that_is_no_dlpack_type_is_refused():
    with pytest.raises(BufferError, match="device_type = -7"):
        pjrt.load(PLUGIN, device_type=-7)


@needs_plugin
def test_a_relative_path_loads_the_file_that_exists(tmp_path, monkeypatch):
    (tmp_path / "libdlport_relative_pjrt.so").symlink_to(PLUGIN)
    monkeypatch.chdir(tmp_path)
    # The dynamic loader would search its own path for a bare name, and not find it there.
    assert pjrt.load("libdlport_relative_pjrt.so").platform == "cpu"


def _package(root, tmp_path, monkeypatch, entry_points):
    """A distribution registering ``entry_points`` under ``jax_plugins``, importable from
    ``root`` (its modules raise when run)."""
    info = root / "dlport_fake_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dlport-fake-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[jax_plugins]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    )
    monkeypatch.syspath_prepend(str(root))


@needs_plugin
def test_a_plugin_package_is_searched_without_running_it(tmp_path, monkeypatch):
    root = tmp_path / "site"
    pkg = root / "dlport_fake_pkg"
    (pkg / "sub" / "deeper").mkdir(parents=True)
    for d in (pkg, pkg / "sub"):
        (d / "__init__.py").write_text("raise RuntimeError('a plugin package was run')\n")
    # The first candidate is no plugin; the next one is.
    (pkg / "sub" / "a_pjrt.so").write_bytes(b"not a library")
    (pkg / "sub" / "deeper" / "z_pjrt.so").symlink_to(PLUGIN)
    (root / "dlport_fake_mod.py").write_text("raise RuntimeError('a plugin module was run')\n")
    (root / "dlport_fake_mod_pjrt.so").symlink_to(PLUGIN)
    _package(
        root,
        tmp_path,
        monkeypatch,
        {"fake_dotted": "dlport_fake_pkg.sub:initialize", "fake_module": "dlport_fake_mod"},
    )
    assert pjrt.load("fake_dotted").platform == "cpu"
    assert pjrt.load("fake_module").platform == "cpu"
    assert "dlport_fake_pkg" not in sys.modules and "dlport_fake_mod" not in sys.modules
    paths = pjrt.plugin_paths("fake_dotted")
    assert [os.path.basename(p) for p in paths] == ["a_pjrt.so", "z_pjrt.so"], paths
    # A directory named like the package does not shadow it.
    (tmp_path / "fake_module").mkdir()
    monkeypatch.chdir(tmp_path)
    assert pjrt.load("fake_module").platform == "cpu"


@needs_plugin
def test_a_pjrt_export_answers_as_every_dlport_export():
    """A PjrtBuffer's __dlpack__ is the registry's export: stream, dl_device and copy get the
    answers a dlport tensor's __dlpack__ gets (issue #54: it had rules of its own)."""
    client = pjrt.load(PLUGIN)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    buf = client.from_dlpack(x)
    other = dlport.from_dlpack(x)

    def answer(producer, **kw):
        try:
            producer.__dlpack__(**kw)
            return "ok"
        except Exception as e:  # the type and the message must agree
            return f"{type(e).__name__}: {e}"

    for kw in [
        {"stream": 7},
        {"stream": -1},
        {"stream": None},
        {"stream": 0},
        {"dl_device": (2, 0), "copy": False},
        {"dl_device": (1, 0), "copy": False},
        {"max_version": (1, 0), "copy": True},
    ]:
        assert answer(buf, **kw) == answer(other, **kw), kw
    assert "stream" in answer(buf, stream=7)
    # copy=True is one copy, said so (IS_COPIED), with the same values.
    copied = np.from_dlpack(buf, copy=True)
    np.testing.assert_array_equal(copied, x)
    assert int(copied.__array_interface__["data"][0]) != buf.data_ptr


@needs_plugin
def test_a_pjrt_copy_is_under_the_allocation_limit():
    client = pjrt.load(PLUGIN)
    x = np.arange(64, dtype=np.float32)
    before = dlport.alloc_limit()
    dlport.set_alloc_limit(64)
    try:
        with pytest.raises(Exception, match="allocation limit"):
            client.from_dlpack(x, copy=True)
    finally:
        dlport.set_alloc_limit(0 if before is None else before)
    assert client.from_dlpack(x, copy=True).shape == [64]


@needs_plugin
def test_load_registers_the_client_as_a_backend():
    client = pjrt.load(PLUGIN, device_type=12)
    names = {b["name"]: b for b in dlport.backends()}
    assert f"pjrt:{client.platform}" in names, names
    assert names[f"pjrt:{client.platform}"]["kind"] == "pjrt"
    assert names[f"pjrt:{client.platform}"]["device_types"] == [12]
    # A kDLExtDev tensor now resolves to the client: imported as its view, without a copy.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    buf = client.from_dlpack(x)
    assert buf.__dlpack_device__() == (12, 0)
    t = dlport.from_dlpack(buf, copy=False)
    assert t.__dlpack_device__() == (12, 0)
    pjrt.load(PLUGIN)  # the CPU platform's client takes the name back (host memory is cpu's)
    names = {b["name"]: b for b in dlport.backends()}
    assert names[f"pjrt:{client.platform}"]["device_types"] == []
