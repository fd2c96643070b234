"""The OpenCL plugin (plugins/opencl, a C plugin loaded by path) through dlport from Python.

A cl_mem filled by an OpenCL kernel reaches NumPy and JAX with one copy; a NumPy array reaches a
cl_mem that a kernel reads; a plugin tensor goes out through ``__dlpack__`` and back as the same
cl_mem; every buffer, view and reference is released exactly once (OpenCL's own destructor
callbacks count the frees), on the error paths too; unloading while tensors live is safe.

The plugin's path is ``$DLPORT_OPENCL_PLUGIN`` (scripts/plugin-test.sh builds it), else
``target/plugins/libdlport_opencl.so``. Without it, or without an OpenCL device, the tests are
skipped with the reason.
"""

import ctypes
import gc
import os
import pathlib

import numpy as np
import pytest

import dlport
from dlport.testing import DLManagedTensorVersioned, capsule_pointer, owned_capsule, release

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH = os.environ.get("DLPORT_OPENCL_PLUGIN", str(ROOT / "target" / "plugins" / "libdlport_opencl.so"))
OPENCL = (4, 0)

FIELDS = [
    "buffers_created", "buffers_freed", "views_created", "views_destroyed", "refs_acquired",
    "refs_released", "allocations", "deallocations", "producer_deleters", "copies_to_host",
    "copies_from_host", "waits", "inits", "destroys",
]


class Counts(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in FIELDS]


DL_TENSOR_OFFSET = DLManagedTensorVersioned.dl_tensor.offset


@pytest.fixture(scope="module")
def lib():
    if not os.path.exists(PATH):
        pytest.skip(f"SKIPPED: the OpenCL plugin is not built at {PATH} (scripts/plugin-test.sh builds it)")
    if not any(b["name"] == "opencl" for b in dlport.backends()):
        try:
            assert dlport.load_plugin(PATH) == "opencl"
        except dlport.DLPackError as e:
            if "no OpenCL" in str(e) or "no usable OpenCL" in str(e):
                pytest.skip(f"SKIPPED: no OpenCL device: {e}")
            raise
    lib = ctypes.CDLL(PATH)
    lib.dlport_opencl_iota.restype = ctypes.c_void_p
    lib.dlport_opencl_iota.argtypes = [ctypes.c_float, ctypes.c_int64]
    lib.dlport_opencl_sum.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
    lib.dlport_opencl_counts.argtypes = [ctypes.POINTER(Counts)]
    lib.dlport_opencl_last_error.restype = ctypes.c_char_p
    return lib


def counts(lib):
    gc.collect()
    c = Counts()
    lib.dlport_opencl_counts(ctypes.byref(c))
    return {name: getattr(c, name) for name in FIELDS}


class ClBuffer:
    """A DLPack producer of a kDLOpenCL tensor: a cl_mem that a kernel filled with start, start+1..."""

    def __init__(self, lib, start, n):
        self.managed = lib.dlport_opencl_iota(start, n)
        assert self.managed, lib.dlport_opencl_last_error()
        self.cl_mem = ctypes.c_void_p.from_address(self.managed + DL_TENSOR_OFFSET).value

    def __del__(self):
        # Never exported (a consumer refused before asking): the producer releases it.
        if self.managed:
            release(self.managed)

    def __dlpack_device__(self):
        return OPENCL

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        managed, self.managed = self.managed, None
        assert managed, "a ClBuffer is exported once"
        return owned_capsule(managed)


def kernel_sum(lib, tensor):
    """Sums a dlport.Tensor on kDLOpenCL with an OpenCL kernel (through its DLPack export)."""
    cap = tensor.__dlpack__(max_version=(1, 3))
    managed = capsule_pointer(cap, b"dltensor_versioned")
    out = ctypes.c_double()
    status = lib.dlport_opencl_sum(managed + DL_TENSOR_OFFSET, ctypes.byref(out))
    assert status == 0, lib.dlport_opencl_last_error()
    del cap  # dlport's capsule destructor releases the export once
    return out.value


def assert_all_released(lib, before):
    c = counts(lib)
    live = lambda k: c[k] - before[k]  # noqa: E731
    assert live("buffers_created") == live("buffers_freed"), c
    assert live("views_created") == live("views_destroyed"), c
    assert live("refs_acquired") == live("refs_released"), c
    assert live("allocations") == live("deallocations"), c
    return c


def test_the_plugin_is_listed_with_what_it_serves(lib):
    (opencl,) = [b for b in dlport.backends() if b["name"] == "opencl"]
    assert opencl["kind"] == "plugin" and opencl["device_types"] == [4]
    assert opencl["origin"] == PATH
    from dlport.__main__ import report

    assert f"  opencl: device types 4, from {PATH}" in report().splitlines()
    buffer = ClBuffer(lib, 1.0, 4)
    assert "memory opencl:0; presented as opencl:0" in dlport.explain(buffer)
    del buffer
    gc.collect()
    assert {"view_create", "copy_to_host", "copy_from_host", "acquire", "wait"} <= set(opencl["callbacks"])
    assert [b["kind"] for b in dlport.backends() if b["name"] == "cpu"] == ["builtin"]


def test_a_kernel_filled_buffer_reaches_numpy_and_jax_with_one_copy(lib):
    before = counts(lib)
    x = ClBuffer(lib, 1.0, 1000)
    view = dlport.from_dlpack(x)
    assert view.__dlpack_device__() == OPENCL and view.device == "opencl:0"
    assert view.data_ptr() == x.cl_mem, "a view of the producer's cl_mem"
    host = dlport.from_dlpack(view, device="cpu")
    c = counts(lib)
    assert c["copies_to_host"] == before["copies_to_host"] + 1, "exactly one copy"
    a = np.from_dlpack(host)
    assert a.ctypes.data == host.data_ptr(), "NumPy takes the host copy without another"
    np.testing.assert_array_equal(a, np.arange(1, 1001, dtype=np.float32))
    jax = pytest.importorskip("jax")
    j = jax.dlpack.from_dlpack(host)
    np.testing.assert_array_equal(np.asarray(j), np.arange(1, 1001, dtype=np.float32))
    assert counts(lib)["copies_to_host"] == before["copies_to_host"] + 1, "JAX took it without a copy too"
    del a, j, host, view, x
    c = assert_all_released(lib, before)
    assert c["producer_deleters"] == before["producer_deleters"] + 1, "the producer's deleter ran once"


def test_a_numpy_array_reaches_a_cl_mem_that_a_kernel_reads(lib):
    before = counts(lib)
    a = np.linspace(0, 10, 257, dtype=np.float32)
    t = dlport.from_dlpack(a, device=OPENCL)
    assert t.__dlpack_device__() == OPENCL
    assert counts(lib)["copies_from_host"] == before["copies_from_host"] + 1
    assert kernel_sum(lib, t) == pytest.approx(float(a.sum()), rel=1e-5)
    # A strided source is compacted on the host, then written once.
    b = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    s = dlport.from_dlpack(b, device="opencl:0")
    back = np.from_dlpack(dlport.from_dlpack(s, device="cpu"))
    np.testing.assert_array_equal(back, b)
    del t, s, back
    assert_all_released(lib, before)


def test_a_plugin_tensor_goes_out_and_back_as_the_same_cl_mem(lib):
    before = counts(lib)
    x = ClBuffer(lib, 5.0, 64)
    view = dlport.from_dlpack(x)
    cap = view.__dlpack__(max_version=(1, 3))
    managed = capsule_pointer(cap, b"dltensor_versioned")
    assert ctypes.c_void_p.from_address(managed + DL_TENSOR_OFFSET).value == x.cl_mem
    c = counts(lib)
    assert c["refs_acquired"] == before["refs_acquired"] + 1 and c["waits"] > before["waits"]
    back = dlport.from_dlpack(cap)
    assert back.data_ptr() == x.cl_mem and back.device == "opencl:0", "no copy: the same cl_mem"
    assert counts(lib)["copies_to_host"] == before["copies_to_host"]
    assert kernel_sum(lib, back) == pytest.approx(sum(5.0 + i for i in range(64)))
    del cap, back, view, x
    c = assert_all_released(lib, before)
    assert c["producer_deleters"] == before["producer_deleters"] + 1


def test_error_paths_release_everything_once_and_name_the_plugin(lib):
    before = counts(lib)
    # A copy refused by the policy: the producer's tensor is released once.
    with pytest.raises(dlport.DLPackError, match="copy"):
        dlport.from_dlpack(ClBuffer(lib, 0.0, 8), device="cpu", copy=False)
    # A device the plugin does not have: its allocate fails, naming the plugin and callback.
    with pytest.raises(dlport.DLPackError) as e:
        dlport.from_dlpack(np.ones(4, dtype=np.float32), device=(4, 1))
    assert '"opencl"' in str(e.value) and "allocate" in str(e.value) and "device (4, 1)" in str(e.value)
    assert e.value.code == 32
    del e
    c = assert_all_released(lib, before)
    assert c["producer_deleters"] == before["producer_deleters"] + 1


def test_unloading_while_tensors_live_keeps_them_valid_until_released(lib):
    before = counts(lib)
    x = ClBuffer(lib, 2.0, 16)
    view = dlport.from_dlpack(x)
    dlport.unload_plugin("opencl")
    assert all(b["name"] != "opencl" for b in dlport.backends())
    with pytest.raises(dlport.DLPackError, match="no backend for kDLOpenCL"):
        view.__dlpack__()
    assert counts(lib)["destroys"] == before["destroys"], "alive while its tensor lives"
    del view, x
    c = assert_all_released(lib, before)
    assert c["destroys"] == before["destroys"] + 1, "destroyed once, after the last tensor"
    assert c["producer_deleters"] == before["producer_deleters"] + 1
    # Loaded again by path, it works again.
    assert dlport.load_plugin(PATH) == "opencl"
    t = dlport.from_dlpack(np.arange(4, dtype=np.float32), device=OPENCL)
    assert kernel_sum(lib, t) == 6.0


def test_a_plugin_tensor_goes_out_through_the_c_exchange_api(lib, monkeypatch):
    tvm_ffi = pytest.importorskip("tvm_ffi")
    before = counts(lib)
    x = ClBuffer(lib, 3.0, 32)
    view = dlport.from_dlpack(x)

    def no_dunder(self, **kwargs):
        raise AssertionError("tvm-ffi called __dlpack__ instead of the exchange API")

    monkeypatch.setattr(dlport.Tensor, "__dlpack__", no_dunder)
    y = tvm_ffi.from_dlpack(view)
    assert y.data_ptr() == x.cl_mem, "tvm-ffi holds the same cl_mem"
    assert counts(lib)["refs_acquired"] == before["refs_acquired"] + 1, "through the plugin's acquire"
    del y, view, x
    c = assert_all_released(lib, before)
    assert c["producer_deleters"] == before["producer_deleters"] + 1


def test_a_producer_claiming_kdlopencl_over_host_memory_is_refused_not_a_crash(lib):
    from dlport.testing import Producer

    before = counts(lib)
    for device in [None, "cpu"]:
        host = Producer(np.arange(4, dtype=np.float32), capsule_device=OPENCL, advertised=OPENCL)
        with pytest.raises(dlport.DLPackError, match="is not a cl_mem this plugin created"):
            dlport.from_dlpack(host, device=device)
    after = counts(lib)
    # Refused before any view or copy was made: nothing to release.
    for k in ["views_created", "copies_to_host", "refs_acquired", "allocations"]:
        assert after[k] == before[k], (k, before, after)


def test_pickling_a_plugin_tensor_needs_permission_to_copy(lib):
    # A plugin device is device memory: pickling sends host bytes, so it is refused unless the
    # caller allows one copy to the host for the block (the CUDA case is test_cuda.py's).
    import pickle

    before = counts(lib)
    x = ClBuffer(lib, 3.0, 32)
    view = dlport.from_dlpack(x)
    assert view.device == "opencl:0"
    for protocol in (2, 5):
        with pytest.raises(BufferError, match=r"dlport.pickling\(device_copy=True\)"):
            pickle.dumps(view, protocol=protocol)
    assert counts(lib)["copies_to_host"] == before["copies_to_host"], "a refusal copies nothing"
    with dlport.pickling(device_copy=True):
        s = pickle.dumps(view, protocol=5)
    assert counts(lib)["copies_to_host"] == before["copies_to_host"] + 1
    u = pickle.loads(s)
    assert u.device == "cpu" and u.origin == "opencl:0" and u.dtype == "float32"
    np.testing.assert_array_equal(np.from_dlpack(u), 3.0 + np.arange(32, dtype=np.float32))
    del u, s, view, x
    assert_all_released(lib, before)
