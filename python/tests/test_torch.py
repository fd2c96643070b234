"""dlport against real PyTorch (the torch stage: scripts/torch-env.sh's .venv-torch).

dlport takes torch tensors through torch's `__dlpack__`, never its exchange table, whose export
ignores the conjugate and negative bits, the layout, meta, quantized and requires_grad tensors
(python/README.md, "PyTorch"). So dlport gives torch's own values and torch's own refusals.
"""

import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch stage runs in .venv-torch)")
np = pytest.importorskip("numpy")
import dlport  # noqa: E402


def torch_refusal(t):
    try:
        t.__dlpack__()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def check_like_dunder(t, expected_values):
    """dlport either refuses as torch's __dlpack__ does, or gives the expected values."""
    refusal = torch_refusal(t)
    if refusal is not None:
        with pytest.raises(BufferError if isinstance(refusal, BufferError) else type(refusal)):
            dlport.from_dlpack(t)
        return
    got = torch.from_dlpack(dlport.from_dlpack(t))
    assert torch.equal(got.resolve_conj().resolve_neg(), expected_values)


def test_conj_never_unconjugated():
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    check_like_dunder(z.conj(), z.conj().resolve_conj())


def test_neg_view_and_conj_imag():
    # torch's __dlpack__ exports a neg-bit view's raw memory (the bit is not in DLPack); dlport
    # gives exactly what torch's own __dlpack__ gives, and says so in python/README.md.
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    for t in (torch._neg_view(torch.tensor([1.0, 2.0])), z.conj().imag):
        native = torch.from_dlpack(t.__dlpack__())
        got = torch.from_dlpack(dlport.from_dlpack(t))
        assert got.data_ptr() == t.data_ptr()
        assert torch.equal(got, native)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse(),
        pytest.param(
            lambda: torch.empty(3, device="meta"),
            marks=pytest.mark.xfail(
                strict=True,
                reason="torch's __dlpack_device__ raises ValueError('Unknown device type meta'), "
                "which dlport passes on instead of a BufferError (issue #33: not done)",
            ),
        ),
        lambda: torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.quint8),
    ],
    ids=["sparse", "meta", "quantized"],
)
def test_unsupported_tensors_are_buffer_errors(make):
    t = make()
    with pytest.raises(BufferError) as e:
        dlport.from_dlpack(t)
    msg = str(e.value).lower()
    assert "layout" in msg or "device" in msg or "meta" in msg or "quantiz" in msg or "type" in msg, msg


def test_requires_grad_like_torch():
    t = torch.ones(3, requires_grad=True)
    check_like_dunder(t, t.detach())


DTYPES = [
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
    torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.float8_e4m3fn, torch.float8_e5m2,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_both_ways_no_copy(dtype):
    t = torch.arange(6).reshape(2, 3).to(dtype)
    try:
        t.__dlpack__()
    except Exception:  # noqa: BLE001
        pytest.skip(f"torch does not export {dtype}")
    d = dlport.from_dlpack(t)
    back = torch.from_dlpack(d)
    assert back.data_ptr() == t.data_ptr()
    assert back.dtype == dtype
    assert torch.equal(back.view(torch.uint8), t.view(torch.uint8))


@pytest.mark.parametrize(
    "view", [lambda t: t[1:, ::2], lambda t: t.T, lambda t: t[:, 1]], ids=["slice", "transpose", "column"]
)
def test_views(view):
    v = view(torch.arange(12.0).reshape(3, 4))
    back = torch.from_dlpack(dlport.from_dlpack(v))
    assert back.data_ptr() == v.data_ptr()
    assert back.stride() == v.stride()
    assert torch.equal(back, v)


def test_lifetime_by_refcount():
    t = torch.arange(4.0)
    before = sys.getrefcount(t), t.untyped_storage()._use_count() if hasattr(t.untyped_storage(), "_use_count") else None
    d = dlport.from_dlpack(t)
    back = torch.from_dlpack(d)
    del back, d
    import gc

    gc.collect()
    after = sys.getrefcount(t), t.untyped_storage()._use_count() if hasattr(t.untyped_storage(), "_use_count") else None
    assert after == before


def test_torch_to_numpy():
    t = torch.arange(6, dtype=torch.float32)
    a = np.from_dlpack(dlport.from_dlpack(t))
    assert a.ctypes.data == t.data_ptr()
    assert (a == t.numpy()).all()
