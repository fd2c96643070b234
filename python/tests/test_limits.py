"""One door for the allocation limit and the alignment range: Python's arguments are
translated, core decides (the same table as core/tests/guarantees.rs, capi/tests/guarantees.rs
and native/tests/install.rs). The limit is the lowest of a call's ``max_alloc``, the registry's
and the process's (``dlport.set_alloc_limit``): a call cannot raise it."""

import copy
import ctypes
import subprocess
import sys

import numpy as np
import pytest

import dlport
from dlport.testing import SET_ERROR, DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor, exchange_api

# The alignments every door accepts (powers of two up to 2^30) and refuses.
ACCEPTED = [1, 2, 64, 4096, 8192, 1 << 20, 1 << 30]
REFUSED = [0, 3, -64, 1 << 31, 1 << 64]


def broadcast(n):
    """n bytes of one value, stride 0: a compact copy needs n bytes. Writable, so that NumPy 2.0
    (CPython 3.9's last), which refuses to export read-only arrays, exports it too."""
    one = np.full(1, 7, np.uint8)
    return np.lib.stride_tricks.as_strided(one, shape=(n,), strides=(0,), writeable=True)


def test_the_alignment_range_is_cores_in_every_call():
    v = np.arange(12.0).reshape(3, 4).T
    for a in ACCEPTED:
        if a <= 1 << 20:
            t = dlport.from_dlpack(v, align=a)
            assert t.data_ptr() % a == 0, a
            np.testing.assert_array_equal(np.from_dlpack(t), v)
            assert dlport.from_dlpack(v).compact(align=a).data_ptr() % a == 0, a
        else:
            # Accepted as an option (not a ValueError); copy=False then refuses the copy.
            with pytest.raises(BufferError, match="align"):
                dlport.from_dlpack(v, align=a, copy=False)
    for a in REFUSED:
        with pytest.raises(ValueError, match=rf"align = {a} is out of range: .*2\^30"):
            dlport.from_dlpack(v, align=a)
        with pytest.raises(ValueError, match=rf"align = {a} is out of range"):
            dlport.from_dlpack(v).compact(align=a)


def test_a_call_cannot_raise_the_process_limit():
    default = dlport.alloc_limit()
    assert default > 1 << 20
    before = dlport.set_alloc_limit(1 << 20)
    try:
        assert before == default
        assert dlport.alloc_limit() == 1 << 20
        for max_alloc in (None, 1 << 30, 1 << 63):
            with pytest.raises(BufferError, match="above the allocation limit of 1048576 bytes"):
                dlport.from_dlpack(broadcast(2 << 20), layout="compact", max_alloc=max_alloc)
        # A call can lower it.
        with pytest.raises(BufferError, match="needs 2048 bytes, above the allocation limit of 1024 bytes"):
            dlport.from_dlpack(broadcast(2048), layout="compact", max_alloc=1024)
        # Under every limit, the copy is made.
        t = dlport.from_dlpack(broadcast(2048), layout="compact", max_alloc=4096)
        assert t.copied and np.from_dlpack(t).sum() == 7 * 2048
    finally:
        assert dlport.set_alloc_limit(0) == 1 << 20
    assert dlport.alloc_limit() == default, "0 restores the machine's memory"
    t = dlport.from_dlpack(broadcast(2 << 20), layout="compact")
    assert t.copied


def test_bad_limits_are_refused_by_name():
    for bad in (-1, 1 << 64):
        with pytest.raises(ValueError, match="out of range"):
            dlport.set_alloc_limit(bad)
        with pytest.raises(ValueError, match="max_alloc = .* is out of range"):
            dlport.from_dlpack(np.zeros(4), max_alloc=bad)
    with pytest.raises(TypeError, match="takes an int"):
        dlport.set_alloc_limit("1 GiB")
    with pytest.raises(TypeError, match="max_alloc must be"):
        dlport.from_dlpack(np.zeros(4), max_alloc="1 GiB")


def test_a_limit_set_first_thing_holds_after_the_native_registry_is_installed():
    # A fresh interpreter: the limit is set before any import installs the native registry.
    code = """
import numpy as np, dlport
dlport.set_alloc_limit(1 << 20)
try:
    one = np.full(1, 7, np.uint8)
    v = np.lib.stride_tricks.as_strided(one, shape=(2 << 20,), strides=(0,), writeable=True)
    dlport.from_dlpack(v, layout="compact", max_alloc=1 << 40)
except BufferError as e:
    assert "allocation limit of 1048576 bytes" in str(e), e
    print("refused")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "refused", out.stdout + out.stderr


def exchange_allocate(n):
    """The exchange API's allocator asked for ``n`` uint8 on the CPU: ``None`` when it gave a
    tensor (released at once), else the error it reported."""
    api = exchange_api(dlport.Tensor)
    shape = (ctypes.c_int64 * 1)(n)
    proto = DLTensor(None, DLDevice(1, 0), 1, DLDataType(1, 8, 1), shape, None, 0)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = []
    on_error = SET_ERROR(lambda ctx, kind, msg: errors.append(msg.decode()))
    if api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, on_error) == 0:
        out.contents.deleter(out)  # the allocation is the caller's: released once, here
        return None
    assert errors
    return errors[0]


def test_every_python_door_refuses_four_mib_under_a_one_mib_limit():
    before = dlport.set_alloc_limit(1 << 20)
    try:
        refused = "needs 4194304 bytes, above the allocation limit of 1048576 bytes"
        assert refused in exchange_allocate(4 << 20)
        with pytest.raises(BufferError, match=refused):
            dlport.from_dlpack(broadcast(4 << 20), layout="compact")
        view = dlport.from_dlpack(broadcast(4 << 20))
        with pytest.raises(BufferError, match=refused):
            view.compact()
        with pytest.raises(BufferError, match=refused):
            copy.deepcopy(view)
        with pytest.raises(BufferError, match=refused):
            view.__dlpack__(max_version=(1, 3), copy=True)
        if hasattr(dlport, "share"):
            with pytest.raises(BufferError, match=refused):
                dlport.share(view, copy=True)
        dlport.set_alloc_limit(8 << 20)
        assert exchange_allocate(4 << 20) is None
        assert view.compact().copied
    finally:
        dlport.set_alloc_limit(0)
    assert dlport.alloc_limit() == before


def test_a_limit_raised_above_the_machines_memory_holds_in_every_python_door():
    memory = dlport.alloc_limit()
    raised = 2 * memory
    past = 3 * memory
    assert dlport.set_alloc_limit(raised) == memory
    try:
        assert dlport.alloc_limit() == raised
        refused = f"above the allocation limit of {raised} bytes"
        assert refused in exchange_allocate(past)
        with pytest.raises(BufferError, match=refused):
            dlport.from_dlpack(broadcast(past), layout="compact")
        with pytest.raises(BufferError, match=refused):
            dlport.from_dlpack(broadcast(past)).compact()
    finally:
        dlport.set_alloc_limit(0)
    assert dlport.alloc_limit() == memory


def test_max_alloc_zero_is_refused_by_name_never_a_zero_byte_limit():
    # 0 means "none of its own" wherever a limit is a number (set_alloc_limit(0), C's
    # max_alloc_bytes = 0), so a call's max_alloc=0 is refused, view or copy.
    for v in (np.zeros(4), broadcast(16)):
        with pytest.raises(ValueError, match="max_alloc = 0 is invalid"):
            dlport.from_dlpack(v, max_alloc=0)


def vm_size():
    """The process's address space in bytes (Linux), or None."""
    try:
        with open("/proc/self/status") as f:
            line = next(line for line in f if line.startswith("VmSize:"))
    except OSError:
        return None
    return int(line.split()[1]) * 1024


def test_an_aligned_copy_counts_what_its_alignment_can_take():
    # Two bytes aligned to 2^30 can take 2 + 2^30 - 1 bytes of address space, besides the
    # 2-byte copy they are aligned from: the limit counts that, in every call that aligns.
    t = dlport.from_dlpack(np.arange(2, dtype=np.uint8))
    counted = "needs 1073741827 bytes, above the allocation limit of 1048576 bytes"
    before = dlport.set_alloc_limit(1 << 20)
    try:
        size = vm_size()
        for _ in range(8):
            with pytest.raises(BufferError, match=counted):
                t.compact(align=1 << 30)
            with pytest.raises(BufferError, match=counted):
                dlport.from_dlpack(np.arange(2, dtype=np.uint8), align=1 << 30)
        if size is not None:
            assert vm_size() - size < 1 << 30, "nothing was reserved"
    finally:
        dlport.set_alloc_limit(0)
    assert dlport.alloc_limit() == before
    # Within the limit, the copy is made and aligned as asked.
    c = t.compact(align=1 << 30)
    assert c.data_ptr() % (1 << 30) == 0 and np.from_dlpack(c).tolist() == [0, 1]
