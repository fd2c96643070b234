"""dlport.pjrt against the real XLA CPU plugin (DLPORT_PJRT_PLUGIN; skipped with the reason
without it): NumPy and JAX both ways, the StableHLO program on an imported view, the
addresses (no copy where one is promised) and each producer released exactly once."""

import gc
import weakref

import numpy as np
import pytest

import dlport
from pjrt_plugin import AFFINE, PLUGIN, needs_plugin, run_readme_block

pjrt = pytest.importorskip("dlport.pjrt", reason="the dlport wheel has no dlport.pjrt")
pytestmark = needs_plugin


@pytest.fixture(scope="module")
def client():
    return pjrt.load(PLUGIN)


def address(a):
    return int(a.__array_interface__["data"][0])


def aligned(values):
    """A float32 NumPy array whose data is 64-byte aligned (what PJRT views)."""
    raw = np.empty(values.size * 4 + 64, dtype=np.uint8)
    start = (-address(raw)) % 64
    out = raw[start : start + values.size * 4].view(np.float32).reshape(values.shape)
    out[...] = values
    return out


def test_devices(client):
    assert client.platform == "cpu"
    assert client.device_type == 1
    assert client.devices[0] == (1, 0)
    assert client.missing == []


def test_the_callers_device_type_labels_every_device():
    # A code the caller names wins over the platform name's ("cpu" is kDLCPU): kDLExtDev here,
    # the type a platform dlport does not know by name gets without one.
    ext = pjrt.load(PLUGIN, device_type=12)
    assert ext.platform == "cpu"
    assert ext.device_type == 12
    assert ext.devices == [(12, i) for i in range(len(ext.devices))]
    assert ext.devices


def test_numpy_both_ways_without_a_copy(client):
    x = aligned(np.arange(6, dtype=np.float32).reshape(2, 3))
    buf = client.from_dlpack(x, copy=False)
    assert buf.data_ptr == address(x)
    assert buf.shape == [2, 3] and buf.dtype == "float32"
    assert buf.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(buf)
    assert address(back) == address(x)
    out = client.compile(AFFINE).execute(buf)[0]
    y = np.from_dlpack(out)
    assert address(y) == out.data_ptr
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_the_producer_is_released_once_when_pjrt_lets_go(client):
    x = aligned(np.ones((2, 3), dtype=np.float32))
    gone = weakref.ref(x)  # NumPy's export holds the array until its deleter runs
    buf = client.from_dlpack(x, copy=False)
    del x
    gc.collect()
    assert gone() is not None, "released while PJRT views it"
    exported = np.from_dlpack(buf)
    del buf
    gc.collect()
    assert gone() is not None, "released while an export holds the buffer"
    del exported
    gc.collect()
    assert gone() is None, "not released after the last holder"


def test_refusals_and_copies(client):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    strided = x[:, ::2]
    with pytest.raises(BufferError):
        client.from_dlpack(strided, copy=False)
    buf = client.from_dlpack(strided)
    assert buf.data_ptr != address(x)
    np.testing.assert_array_equal(np.from_dlpack(buf), strided)
    ro = aligned(np.ones((2, 3), dtype=np.float32))
    ro.flags.writeable = False
    with pytest.raises(Exception, match="READ_ONLY"):
        client.from_dlpack(ro, copy=False)


def test_jax_both_ways(client):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = aligned(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = client.compile(AFFINE).execute(client.from_dlpack(x, copy=False))[0]
    j = jax.dlpack.from_dlpack(out)
    assert j.unsafe_buffer_pointer() == out.data_ptr
    np.testing.assert_array_equal(np.asarray(j), 2 * x + 1)
    # A jax.Array is read-only: PJRT gets a copy, never a view.
    a = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    with pytest.raises(Exception, match="READ_ONLY"):
        client.from_dlpack(a, copy=False)
    b = client.from_dlpack(a)
    assert b.data_ptr != a.unsafe_buffer_pointer()
    np.testing.assert_array_equal(np.from_dlpack(b), np.asarray(a))


def test_load_by_package_name():
    found = pjrt.plugins()
    if "xla_cpu_pjrt" not in found:
        pytest.skip(f"the xla-cpu-pjrt package is not installed in this venv (plugins: {found})")
    assert pjrt.plugin_path("xla_cpu_pjrt").endswith(".so")
    assert pjrt.load("xla_cpu_pjrt").platform == "cpu"


def test_unknown_package_is_named():
    with pytest.raises(LookupError, match="no-such-plugin"):
        pjrt.load("no-such-plugin")


def test_the_readmes_pjrt_block_prints_what_it_shows():
    """python/README.md's dlport.pjrt block, run as written in a process of its own (the plugin
    found as the installed package ``xla_cpu_pjrt``), prints what the README shows after it."""
    run_readme_block("## Any PJRT plugin as a DLPack device")


def test_the_probe_calls_each_function_and_says_what_dlport_does():
    """dlport.pjrt.probe is dlport-native's probe (the text C's dlport_pjrt_probe and the Rust
    example print), and ``python -m dlport pjrt`` prints it."""
    import re
    import subprocess
    import sys

    text = pjrt.probe(PLUGIN)
    print(text)
    lines = text.split("\n")
    for line in (
        "PJRT API: 0.",
        "struct_size: ",
        "extension 4: Layouts",
        "platform: cpu — DLPack device type 1",
        "memory kinds (device 0): ",
        "primitive PJRT_Client_BufferFromHostBuffer: implemented",
        "primitive PJRT_Client_CreateViewOfDeviceBuffer: implemented",
        "primitive PJRT_Buffer_OpaqueDeviceMemoryDataPointer: implemented",
        "primitive PJRT_Client_Compile: implemented",
        "primitive PJRT_LoadedExecutable_Execute: implemented",
        "dtype F32: float32; view yes, copy yes",
        "import host, 64-byte aligned, writable: a view",
        "import host, 4 bytes off 64-byte alignment: one copy — ",
        "import host, READ_ONLY: one copy — ",
        "export PJRT buffer to DLPack: by reference",
    ):
        assert any(l.startswith(line) for l in lines), f"{line!r} not in:\n{text}"
    misaligned = next(l for l in lines if "4 bytes off 64-byte alignment:" in l)
    assert "not 64-byte aligned" in misaligned, misaligned
    read_only = next(l for l in lines if l.startswith("import host, READ_ONLY:"))
    assert "not 64-byte aligned" not in read_only and "READ_ONLY" in read_only.split(" — ", 1)[1], read_only
    p = subprocess.run([sys.executable, "-m", "dlport", "pjrt", PLUGIN], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    addresses = re.compile(r"0x[0-9a-f]+")
    assert addresses.sub("0x", p.stdout) == addresses.sub("0x", text + "\n")
