"""dlport: checked DLPack exchange between Python frameworks.

``dlport.from_dlpack(x, device=None, copy=None)`` takes a tensor from any DLPack producer
(NumPy, JAX, PyTorch, CuPy, tvm-ffi, a bare capsule), validates it, and returns a
``dlport.Tensor``, itself a DLPack producer that every consumer can take. Pinned or managed
memory that a CPU-only consumer refuses is shown to it as ``cpu`` without a copy
(``device="cpu"``). The DLPack 1.3 C exchange API (``__dlpack_c_exchange_api__``) is used when a
producer offers it and offered by ``dlport.Tensor``.

``dlport.share(x)`` shares a tensor with another process on the same machine (Linux): a
``dlport.Shared`` (descriptor bytes plus file descriptors) that travels over a Unix socket
(``Shared.send`` / ``Shared.recv``) and opens there without a copy (``Shared.open``,
``dlport.open_shared``).

Failures raise ``dlport.DLPackError`` subclasses that are also ``BufferError``, ``ValueError``,
``TypeError`` or ``MemoryError``, with ``code`` (never 0). ``python -m dlport`` prints the
version, the backends found and the build.
"""

from ._errors import (
    DLPackBufferError,
    DLPackError,
    DLPackMemoryError,
    DLPackTypeError,
    DLPackValueError,
)
from ._native import (
    Shared,
    Tensor,
    __dlpack_version__,
    __version__,
    backends,
    from_dlpack,
    load_plugin,
    open_shared,
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
    "from_dlpack",
    "open_shared",
    "share",
    "load_plugin",
    "unload_plugin",
    "backends",
    "__version__",
    "__dlpack_version__",
]
