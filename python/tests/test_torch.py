"""dlport against real PyTorch 2.15 (the peers stage: scripts/peers-env.sh's .venv-peers, which
has JAX, NumPy, Ray and Dask too).

Which path each side takes:
- torch -> dlport: torch's ``__dlpack__``, never its C exchange table. The table hands over the
  raw memory of tensors its ``__dlpack__`` refuses (the conjugate bit, requires_grad, sparse,
  meta, quantized), so dlport gives exactly torch's own values and refusals.
- dlport -> torch: ``torch.from_dlpack`` calls ``dlport.Tensor.__dlpack__`` (torch offers a
  table as a producer but does not read one as a consumer).
Lifetimes are checked by torch's own use count of a tensor (``Tensor._use_count()``).
"""

import ctypes
import gc
import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the peers stage runs in .venv-peers)")
np = pytest.importorskip("numpy")
import dlport  # noqa: E402
from dlport.testing import DLManagedTensorVersioned, exchange_api  # noqa: E402


def uses(t) -> int:
    """torch's use count of the tensor (its TensorImpl): 1 + each DLPack export alive, which
    holds a handle to it."""
    return t._use_count()


def collect():
    gc.collect()
    gc.collect()


def torch_refusal(t):
    try:
        t.__dlpack__()
    except BufferError as e:
        return e
    return None


# ── The failures the issue found, each a test that failed before ──

def test_conj_is_refused_as_torch_refuses_it_not_read_unconjugated():
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    with pytest.raises(BufferError, match="conjugate bit"):
        dlport.from_dlpack(z.conj())
    got = torch.from_dlpack(dlport.from_dlpack(z.conj().resolve_conj()))
    assert torch.equal(got, torch.tensor([1 - 2j, 3 + 4j], dtype=torch.complex64))


def test_torchs_exchange_table_still_ignores_the_conjugate_bit():
    """Why dlport skips torch's table: called directly, it hands over a conjugate view as its
    raw (unconjugated) memory. When torch fixes its table this test fails, and dlport may take
    the table for torch tensors again (python/pyo3/src/exchange.rs, is_torch_tensor)."""
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj()
    api = exchange_api(torch.Tensor)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert api.managed_tensor_from_py_object_no_sync(z, ctypes.byref(out)) == 0
    m = out.contents
    first = ctypes.cast(m.dl_tensor.data + m.dl_tensor.byte_offset, ctypes.POINTER(ctypes.c_float))
    assert (first[0], first[1]) == (1.0, 2.0), "the table gave the raw memory, not 1 - 2j"
    m.deleter(out)
    assert dlport._native._route(z) == "dunder", "dlport takes torch tensors through __dlpack__"
    assert "does not use" in dlport.explain(z)


UNSUPPORTED = {
    "sparse": (lambda: torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse(), "layout other than torch.strided"),
    "meta": (lambda: torch.empty(3, device="meta"), "meta"),
    "quantized": (lambda: torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.quint8),
                  "QUInt/QInt types are not supported"),
    "requires_grad": (lambda: torch.ones(3, requires_grad=True), "require gradient"),
}


@pytest.mark.filterwarnings("ignore:.*quantize.*:UserWarning")
@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_what_torch_refuses_is_a_buffer_error_naming_the_problem(case):
    """Sparse, meta, quantized and requires_grad tensors: torch's own __dlpack__ words in a
    BufferError (meta: its __dlpack_device__'s ValueError, wrapped in a DLPackBufferError that
    names the method, the ValueError as its cause)."""
    make, words = UNSUPPORTED[case]
    t = make()
    with pytest.raises(BufferError, match=re.escape(words) if case != "meta" else "meta") as e:
        dlport.from_dlpack(t)
    if case == "meta":
        assert isinstance(e.value, dlport.DLPackBufferError) and e.value.code == 1001
        assert "__dlpack_device__" in str(e.value) and isinstance(e.value.__cause__, ValueError)
    else:
        assert str(e.value) == str(torch_refusal(t))
    if case == "requires_grad":
        back = torch.from_dlpack(dlport.from_dlpack(t.detach()))
        assert back.data_ptr() == t.data_ptr()


def test_neg_bit_views_give_what_torchs_own_dlpack_gives():
    """torch's __dlpack__ exports a neg-bit view's raw memory (DLPack has no such bit); dlport
    gives exactly that, as python/README.md says; resolve_neg() first for the values."""
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    for t in (torch._neg_view(torch.tensor([1.0, 2.0])), z.conj().imag):
        native = torch.from_dlpack(t.__dlpack__())
        got = torch.from_dlpack(dlport.from_dlpack(t))
        assert got.data_ptr() == t.data_ptr()
        assert torch.equal(got, native)
        resolved = torch.from_dlpack(dlport.from_dlpack(t.resolve_neg()))
        assert torch.equal(resolved, t.resolve_neg())


class PinnedLike:
    """A real torch CPU tensor that speaks DLPack as torch's pinned tensors do:
    __dlpack_device__ says (kDLCUDAHost, 0), the capsule says kDLCPU."""

    def __init__(self, t):
        self.t = t

    def __dlpack_device__(self):
        return (3, 0)

    def __dlpack__(self, **kwargs):
        kwargs.pop("dl_device", None)
        return self.t.__dlpack__(**kwargs)


def test_the_seed_with_real_torch_tensors_needs_no_keyword():
    jax = pytest.importorskip("jax")
    t = torch.arange(16, dtype=torch.float32)
    base = uses(t)
    p = PinnedLike(t)
    with pytest.raises(Exception, match="Unknown backend cuda"):
        jax.dlpack.from_dlpack(p)
    collect()
    assert uses(t) == base, "JAX released the capsule it refused"

    d = dlport.from_dlpack(p)
    assert (d.device, d.memory) == ("cpu", "cuda_host:0")
    x = jax.dlpack.from_dlpack(d)
    y = torch.from_dlpack(d)
    assert x.unsafe_buffer_pointer() == y.data_ptr() == t.data_ptr(), "one memory, no copy"
    np.testing.assert_array_equal(np.asarray(x), t.numpy())
    assert uses(t) == base + 1, "dlport holds one reference to torch's tensor"
    del d, x
    collect()
    assert uses(t) == base + 1, "torch's y still holds dlport's export"
    del y
    collect()
    assert uses(t) == base, "released exactly once"


# ── Every dtype, views, both directions ──

DTYPES = [
    getattr(torch, name) for name in (
        "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
        "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
        "float4_e2m1fn_x2",
    ) if hasattr(torch, name)
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_both_ways_without_a_copy_or_refused_as_torch_refuses(dtype):
    raw = torch.randint(0, 256, (2, 48), dtype=torch.uint8)
    if dtype == torch.bool:
        raw = raw % 2
    t = raw.view(dtype)
    refusal = torch_refusal(t)
    if refusal is not None:
        with pytest.raises(BufferError):
            dlport.from_dlpack(t)
        return
    base = uses(t)
    d = dlport.from_dlpack(t)
    assert uses(t) == base + 1
    back = torch.from_dlpack(d)
    assert back.data_ptr() == t.data_ptr() and back.dtype == dtype and back.shape == t.shape
    assert torch.equal(back.view(torch.uint8), raw)
    del d, back
    collect()
    assert uses(t) == base


@pytest.mark.parametrize(
    "view",
    [lambda t: t[1:, ::2], lambda t: t.T, lambda t: t[:, 1], lambda t: t[0].expand(5, 4), lambda t: t[2:]],
    ids=["slice", "transpose", "column", "broadcast", "offset"],
)
def test_views_keep_their_strides_and_memory(view):
    v = view(torch.arange(12.0).reshape(3, 4))
    back = torch.from_dlpack(dlport.from_dlpack(v))
    assert back.data_ptr() == v.data_ptr() and back.stride() == v.stride()
    assert torch.equal(back, v)
    c = dlport.from_dlpack(v, layout="compact", align=64)
    assert c.copied == (not v.is_contiguous() or v.data_ptr() % 64 != 0)
    assert torch.equal(torch.from_dlpack(c), v.contiguous())


def test_torch_consumes_dlport_through_dunder_and_dlport_torch_through_dunder(monkeypatch):
    calls = []

    class Spy(torch.Tensor):
        def __dlpack__(self, **kwargs):
            calls.append(("torch", kwargs))
            return super().__dlpack__(**kwargs)

    t = torch.arange(4.0)
    d = dlport.from_dlpack(t.as_subclass(Spy))
    assert [c[0] for c in calls] == ["torch"], "dlport called torch's __dlpack__ once"
    assert calls[0][1].get("max_version") == (1, 3)

    original = dlport.Tensor.__dlpack__

    def spy(self, **kwargs):
        calls.append(("dlport", kwargs))
        return original(self, **kwargs)

    monkeypatch.setattr(dlport.Tensor, "__dlpack__", spy)
    back = torch.from_dlpack(d)
    assert calls[-1][0] == "dlport", "torch called dlport.Tensor.__dlpack__"
    assert back.data_ptr() == t.data_ptr()


def test_torch_and_numpy_through_dlport_both_ways():
    t = torch.arange(6, dtype=torch.float32)
    a = np.from_dlpack(dlport.from_dlpack(t))
    assert a.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(a, t.numpy())
    b = np.arange(6, dtype=np.int16)
    u = torch.from_dlpack(dlport.from_dlpack(b))
    assert u.data_ptr() == b.ctypes.data and u.tolist() == b.tolist()


def test_torch_and_jax_through_dlport_both_ways():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    t = torch.arange(32, dtype=torch.float32)
    assert t.data_ptr() % 64 == 0, "torch's CPU allocator aligns to 64 bytes"
    base = uses(t)
    x = jax.dlpack.from_dlpack(dlport.from_dlpack(t))
    assert x.unsafe_buffer_pointer() == t.data_ptr()
    np.testing.assert_array_equal(np.asarray(x), t.numpy())
    del x
    collect()
    assert uses(t) == base

    j = jnp.arange(8, dtype=jnp.bfloat16)
    u = torch.from_dlpack(dlport.from_dlpack(j))
    assert u.data_ptr() == j.unsafe_buffer_pointer() and u.dtype == torch.bfloat16
    assert u.float().tolist() == list(range(8))

    # A strided torch view reaches JAX through the layout option: one copy, values kept.
    v = torch.arange(24.0).reshape(4, 6)[:, ::2]
    with pytest.raises(Exception, match="compact"):
        jax.dlpack.from_dlpack(dlport.from_dlpack(v))
    c = dlport.from_dlpack(v, layout="compact", align=64)
    assert c.copied
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(c)), v.numpy())


def test_managed_and_pinned_capsules_torch_refuses_reach_it_through_dlport():
    """torch 2.15 refuses kDLCUDAManaged and kDLCUDAHost in a capsule ("Unsupported
    device_type"); dlport presents such host-accessible memory as cpu, so torch takes it."""
    from dlport.testing import Producer, aligned, managed_like

    for make in (lambda a: managed_like(a),
                 lambda a: Producer(a, capsule_device=(3, 0), advertised=(3, 0), versioned=True)):
        a = aligned(4, np.float32)
        a[:] = [1, 2, 3, 4]
        with pytest.raises(BufferError, match="Unsupported device_type"):
            torch.from_dlpack(make(a))
        p = make(a)
        t = torch.from_dlpack(dlport.from_dlpack(p))
        assert t.data_ptr() == a.ctypes.data and t.tolist() == [1, 2, 3, 4]
        del t
        collect()
        assert p.deleted == 1
