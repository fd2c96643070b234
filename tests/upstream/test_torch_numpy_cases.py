"""Cases 11, 12 and 14 of issue #57: PyTorch's and NumPy's own DLPack, confirmed alone, then the
one dlport call, checking the address (a view), the values, the dtype and the flags on arrival."""

from __future__ import annotations

import numpy as np
import pytest

import dlport
from dlport import _bridge
from dlport.testing import aligned, managed_like

ml_dtypes = pytest.importorskip("ml_dtypes")


def needs_torch():
    """torch, or a skip naming the stack that has it."""
    return pytest.importorskip("torch", reason="this stack has no PyTorch (the peers' venv runs this case)")


def test_pytorch_96318_managed(case):
    torch = needs_torch()
    a = aligned(8, np.float32)
    a[:] = np.arange(8)
    x = managed_like(a)
    case.framework_fails(lambda: torch.from_dlpack(x), "Unsupported device_type: 13", package="torch")
    t = dlport.from_dlpack(x)
    assert (t.device, t.memory) == ("cpu", "cuda_managed:0") and not t.copied
    y = torch.from_dlpack(t)
    assert y.data_ptr() == a.ctypes.data, "a view: no copy"
    assert y.dtype == torch.float32 and y.tolist() == a.tolist()
    del y, t
    case.dlport("a view (same address), presented as cpu, memory cuda_managed:0; values equal")


def test_array_api_tests_433_meta(case):
    torch = needs_torch()
    m = torch.empty(4, device="meta")
    # The array API asks for BufferError where a tensor cannot cross; torch's
    # __dlpack_device__ raises ValueError (torch.from_dlpack and jax.dlpack.from_dlpack pass it on).
    case.framework_fails(
        lambda: torch.from_dlpack(m), "ValueError: Unknown device type meta for Dlpack", package="torch", kind=ValueError
    )
    with pytest.raises(BufferError) as refused:
        dlport.from_dlpack(m)
    assert isinstance(refused.value, dlport.DLPackBufferError)
    assert "__dlpack_device__" in str(refused.value), "the refusal names the method that failed"
    assert isinstance(refused.value.__cause__, ValueError), "torch's own error is the cause"
    case.dlport("refused, as a meta tensor has no memory: DLPackBufferError (a BufferError) naming "
                "__dlpack_device__, torch's ValueError as its cause")


def test_noissue_bfloat16_to_numpy(case):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x = jnp.arange(6, dtype=jnp.bfloat16).reshape(2, 3)
    case.framework_fails(lambda: np.from_dlpack(x), "Unsupported dtype in DLTensor", package="numpy")
    t = dlport.from_dlpack(x)
    # The buffer protocol's refusal no longer advises numpy.from_dlpack(t), which fails too.
    with pytest.raises(BufferError, match=r"dlport\.to_numpy\(t\)") as advice:
        memoryview(t)
    assert "numpy.from_dlpack(t) refuses" in str(advice.value)
    before = _bridge.copies()
    a = dlport.to_numpy(t)
    assert _bridge.copies() == before, "no copy"
    assert a.ctypes.data == t.data_ptr() == x.unsafe_buffer_pointer(), "a view: same address"
    assert a.dtype == np.dtype(ml_dtypes.bfloat16) and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert not a.flags.writeable, "JAX's array is immutable: READ_ONLY kept"
    f8 = jnp.arange(4, dtype=jnp.float8_e4m3fn)
    b = dlport.to_numpy(f8)
    assert b.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and b.tolist() == [0, 1, 2, 3]
    assert b.ctypes.data == f8.unsafe_buffer_pointer() and _bridge.copies() == before
    note = "a view (same address) as an ml_dtypes bfloat16 array, READ_ONLY kept; float8_e4m3fn too"
    try:
        import torch
    except ImportError:
        pass
    else:
        y = torch.arange(4, dtype=torch.bfloat16)
        case.framework_fails(lambda: np.from_dlpack(y), "Unsupported dtype in DLTensor", package="numpy")
        c = dlport.to_numpy(y)
        assert c.ctypes.data == y.data_ptr() and c.flags.writeable and c.tolist() == [0, 1, 2, 3]
        note += "; a torch bfloat16 tensor a writable view"
    case.dlport(note)
