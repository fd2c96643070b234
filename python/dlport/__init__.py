"""dlport: checked DLPack exchange between Python frameworks.

``dlport.from_dlpack(x, device=None, copy=None)`` takes a tensor from any DLPack producer
(NumPy, JAX, PyTorch, CuPy, tvm-ffi, a bare capsule), validates it, and returns a
``dlport.Tensor``, itself a DLPack producer that every consumer can take. Pinned or managed
memory that a CPU-only consumer refuses is shown to it as ``cpu`` without a copy
(``device="cpu"``). The DLPack 1.3 C exchange API (``__dlpack_c_exchange_api__``) is used when a
producer offers it and offered by ``dlport.Tensor``.
"""

from ._native import Tensor, __dlpack_version__, __version__, from_dlpack

__all__ = ["Tensor", "from_dlpack", "__version__", "__dlpack_version__"]
