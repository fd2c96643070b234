"""The C ABI's own Python-facing pieces, through ctypes: its PyCapsule destructor, describe,
convert, the host view and bad tensors. Exchanges with NumPy, JAX and tvm-ffi are tested on the
Python package (python/tests)."""

import gc

import numpy as np
import pytest

import dlport_ctypes as dl


def test_unconsumed_capsule_is_released_by_the_rust_destructor_even_with_an_exception_set():
    src = dl.Producer(np.arange(4.0))
    # int(capsule) fails; CPython drops the temporary capsule while the TypeError is set.
    with pytest.raises(TypeError):
        int(src.__dlpack__())
    gc.collect()
    assert src.deleted == 1, "released exactly once, and the pending TypeError survived"

    used = dl.Producer(np.arange(4.0))
    cap = used.__dlpack__()
    ptr, versioned = dl.consume_capsule(cap)
    del cap
    gc.collect()
    assert used.deleted == 0, "a used_* capsule does not release: the consumer owns it"
    dl.import_managed(ptr, versioned).free()
    assert used.deleted == 1


def test_describe_and_convert():
    src = dl.Producer(np.arange(6.0).reshape(2, 3))
    ptr = src.managed()
    info = dl.describe_managed(ptr, False)
    assert info["shape"] == [2, 3] and info["strides"] == [3, 1] and info["dtype"] == "float64"
    assert src.deleted == 0, "describe borrows"
    out = dl.c_void_p()
    dl.check(dl.lib.dlport_convert(ptr, 0, 1, dl.ctypes.byref(out)))
    vinfo = dl.describe_managed(out.value, True)
    assert vinfo["version"] == {"major": 1, "minor": 3}
    dl.lib.dlport_release(out.value, 1)
    assert src.deleted == 1


def test_the_host_view_shows_pinned_memory_as_cpu_and_refuses_device_memory():
    pinned = dl.Producer(np.arange(8, dtype=np.float32), capsule_device=(1, 0), advertised=(3, 0))
    view = dl.host_view(pinned)
    assert view.__dlpack_device__() == (1, 0) and view.data_ptr == pinned.array.ctypes.data
    a = np.from_dlpack(view)
    assert a.ctypes.data == pinned.array.ctypes.data
    view.free()
    del a
    gc.collect()
    assert pinned.deleted == 1

    device = dl.Producer(np.arange(4, dtype=np.float32), capsule_device=(2, 0), advertised=(2, 0))
    with pytest.raises(dl.DlportError, match="a copy would be needed"):
        dl.host_view(device)
    assert device.deleted == 1, "the refused tensor was released"


def test_bad_tensors_are_errors_with_the_cores_message_and_are_released():
    with pytest.raises(dl.DlportError, match="managed tensor pointer is NULL"):
        dl.import_managed(None, True)
    v2 = dl.Producer(np.arange(3.0), versioned=True, version=(2, 0))
    with pytest.raises(dl.DlportError, match=r"version = 2.0 is not supported"):
        dl.from_dlpack(v2)
    assert v2.deleted == 1, "a 2.0 tensor is released, not leaked"
    bad = dl.Producer(np.arange(6.0), shape=(2, -3))
    with pytest.raises(dl.DlportError, match=r"shape\[1\] = -3 is negative"):
        dl.from_dlpack(bad)
    assert bad.deleted == 1


def test_strided_views_are_compacted_by_the_c_abi():
    v = np.arange(24, dtype=np.float32).reshape(4, 6).T
    c = dl.compact(v)
    info = c.describe()
    assert info["copied"] and info["contiguity"] in ("row_major", "both")
    np.testing.assert_array_equal(np.from_dlpack(c), v)
    with pytest.raises(dl.DlportError, match="copy policy is Never: the layout is"):
        dl.from_dlpack(np.arange(24, dtype=np.float32).reshape(4, 6).T, copy=False, layout="row_major",
                       alignment=64)


def device_ids():
    """The testkit's list of devices (testkit/src/malformed/device_ids.txt), which every door
    is tried with: (device_type, device_id, accepted by the rule of device ids)."""
    path = dl.ROOT / "testkit" / "src" / "malformed" / "device_ids.txt"
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            t, i, verdict = line.split()
            rows.append((int(t), int(i), verdict == "yes"))
    assert len([r for r in rows if not r[2]]) >= 8
    return rows


@pytest.mark.parametrize("device_type,device_id,accepted", device_ids())
def test_every_c_device_argument_applies_the_rule_of_device_ids(device_type, device_id, accepted):
    rule = dl.C["DLPORT_ERR_INVALID_DEVICE"]
    dev = (device_type, device_id)

    def outcome(fn):
        try:
            fn()
            return None
        except (dl.DlportError, BufferError) as e:
            return e

    t = dl.from_dlpack(np.arange(4.0))
    doors = {
        "dl_device": lambda: t.__dlpack__(max_version=(1, 3), dl_device=dev),
        "device": lambda: dl.from_dlpack(np.arange(4.0), device=dev),
        "advertised": lambda: dl.import_managed(dl.Producer(np.arange(4.0)).managed(), False, advertised=dev),
    }
    for door, fn in doors.items():
        e = outcome(fn)
        said = str(e) if e is not None else ""
        if accepted:
            assert f"= ({device_type}, {device_id}) is invalid" not in said, (door, said)
        else:
            assert e is not None, f"{door} = {dev} was accepted"
            assert getattr(e, "code", rule) == rule, (door, said)
            assert f"= ({device_type}, {device_id}) is invalid: " in said, (door, said)
    # The producer's tensor is released once on every refusal.
    p = dl.Producer(np.arange(4.0))
    outcome(lambda: dl.import_managed(p.managed(), False, device=dev))
    gc.collect()
    assert p.deleted == 1
