"""dlport: checked DLPack exchange between Python frameworks.

``dlport.from_dlpack(x, device=None, copy=None, layout=None, align=None)`` takes a tensor from
any DLPack producer (NumPy, JAX, PyTorch, CuPy, tvm-ffi, a bare capsule), validates it, and
returns a ``dlport.Tensor``, itself a DLPack producer that every consumer can take. Pinned or
managed memory, which JAX, PyTorch and TensorFlow refuse under its own device type, is presented
as ``cpu`` without a copy (``Tensor.memory`` says where it is). ``layout="compact"`` and
``align=64`` give a consumer such as JAX the layout it takes, copying only when needed
(``Tensor.copied``). The DLPack 1.3 C exchange API (``__dlpack_c_exchange_api__``) is used when
a producer offers it (PyTorch's excepted: its table disagrees with its ``__dlpack__``) and
offered by ``dlport.Tensor``. ``dlport.explain(x)`` says what a producer offers and what dlport
would do with it; ``dlport.testing`` has emulated producers for your own tests.
``dlport.to_numpy(x)`` and ``dlport.to_jax(x)`` carry the dtypes a framework's own DLPack
cannot: bfloat16 and float8 into NumPy as ml_dtypes arrays (no copy), int4, uint4 and
float4 into and out of JAX (one copy, through ``jax.device_put`` or the array's own transfer).

``dlport.Tensor`` pickles (protocol 5: the bytes out of band, so Ray and Dask move them
without a copy, and the receiver's tensor is a view of the buffer the engine hands back;
``copy.copy`` is a view, ``copy.deepcopy`` a copy); ``dlport.pickling(device_copy=True)`` allows
a copy of device memory to the host for a block. ``import dlport.dask`` registers the tensor in
Dask distributed's own serialization family (``import dlport`` never imports Dask).

``dlport.share(x)`` shares a tensor with another process on the same machine (Linux): a
``dlport.Shared`` (descriptor bytes plus file descriptors) that travels over a Unix socket
(``Shared.send`` / ``Shared.recv``) and opens there without a copy (``Shared.open``,
``dlport.open_shared``).

Failures raise ``dlport.DLPackError`` subclasses that are also ``BufferError``, ``ValueError``,
``TypeError`` or ``MemoryError``, with ``code`` (never 0). ``python -m dlport`` prints the
version, the backends found and the build.

``dlport.set_alloc_limit(bytes)`` caps every copy dlport makes in the process (0: the machine's
memory, the default); a call's ``max_alloc=`` can lower it, never raise it.
"""

from ._errors import (
    DLPackBufferError,
    DLPackError,
    DLPackMemoryError,
    DLPackTypeError,
    DLPackValueError,
)
from ._bridge import to_jax, to_numpy
from ._explain import explain
from ._pickle import pickling
from ._native import (
    Shared,
    Tensor,
    __dlpack_version__,
    __version__,
    alloc_limit,
    backends,
    from_dlpack,
    load_plugin,
    open_shared,
    set_alloc_limit,
    share,
    unload_plugin,
)

__all__ = [
    "DLPackError",
    "DLPackBufferError",
    "DLPackValueError",
    "DLPackTypeError",
    "DLPackMemoryError",
    "Shared",
    "Tensor",
    "explain",
    "to_jax",
    "to_numpy",
    "pickling",
    "from_dlpack",
    "open_shared",
    "share",
    "load_plugin",
    "unload_plugin",
    "backends",
    "set_alloc_limit",
    "alloc_limit",
    "__version__",
    "__dlpack_version__",
]
