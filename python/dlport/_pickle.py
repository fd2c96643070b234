"""``dlport.pickling``: what pickling a ``dlport.Tensor`` may do in a block of code.

A tensor pickles as its bytes plus its dtype, shape and flags (pickle protocol 5 sends the
bytes out of band, without a copy, to engines that take them: Ray, Dask). Device memory (CUDA,
plugin and PJRT devices) is not host bytes: pickling it is refused unless the caller allows one
copy to the host, here, for the code in the ``with`` block (this thread or task only)::

    with dlport.pickling(device_copy=True):
        ref = ray.put(t)          # t in cuda:0 memory: copied to the host once, then sent

The receiver's tensor is in host memory, and ``Tensor.origin`` says ``cuda:0``.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_DEVICE_COPY: contextvars.ContextVar[bool] = contextvars.ContextVar("dlport_pickle_device_copy", default=False)


def _device_copy() -> bool:
    """Whether ``pickling(device_copy=True)`` is in force here (read by ``Tensor.__reduce_ex__``)."""
    return _DEVICE_COPY.get()


@contextlib.contextmanager
def pickling(*, device_copy: bool = False) -> Iterator[None]:
    """Within the block, pickling a ``dlport.Tensor`` in device memory copies it to the host
    (``device_copy=True``) instead of raising ``BufferError``. Host memory (``cpu``, pinned,
    managed) is always sent as it is. Nests, and is local to the thread or asyncio task."""
    if not isinstance(device_copy, bool):
        raise TypeError(f"device_copy must be True or False, got {device_copy!r}")
    token = _DEVICE_COPY.set(device_copy)
    try:
        yield
    finally:
        _DEVICE_COPY.reset(token)
