import os
import socket
import sys
from typing import Any, Dict, List, Literal, Optional, SupportsIndex, Tuple, Union

from ._pickle import pickling as pickling
from ._errors import (
    DLPackBufferError as DLPackBufferError,
    DLPackError as DLPackError,
    DLPackMemoryError as DLPackMemoryError,
    DLPackTypeError as DLPackTypeError,
    DLPackValueError as DLPackValueError,
)

__version__: str
__dlpack_version__: Tuple[int, int]

Device = Union[str, Tuple[int, int]]

class Tensor:
    """A tensor held by dlport; a DLPack producer (``__dlpack__``, the C exchange API) and, in
    host memory, a buffer-protocol exporter."""

    __dlpack_c_exchange_api__: Any
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in elements (DLPack's unit)."""
    @property
    def ndim(self) -> int: ...
    @property
    def dtype(self) -> str:
        """``float32``, ``bfloat16``, ``float8_e4m3fn``, ``int4``, ..."""
    @property
    def device(self) -> str:
        """The device it presents: ``cpu``, ``cuda:0``, ``cuda_host:0``, ..."""
    @property
    def memory(self) -> str:
        """Where the memory really is (``cuda_host:0`` for pinned memory shown as ``cpu``)."""
    @property
    def origin(self) -> Optional[str]:
        """For an unpickled tensor: where the sender's memory was (``cuda_host:0``, ...)."""
    @property
    def readonly(self) -> bool:
        """READ_ONLY: consumers must not write (exports carry the flag)."""
    @property
    def copied(self) -> bool:
        """The memory is a copy dlport made (exports carry IS_COPIED)."""
    @property
    def nbytes(self) -> int: ...
    def data_ptr(self) -> int:
        """The address of the first element (``data + byte_offset``)."""
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview:
            """The buffer protocol (host memory): ``memoryview(t)``, ``numpy.asarray(t)``."""
        def __release_buffer__(self, buffer: memoryview, /) -> None: ...

    def __reduce_ex__(self, protocol: SupportsIndex, /) -> Tuple[Any, Tuple[Any, ...]]:
        """Pickling: protocol 5 sends the bytes out of band (no copy); a strided tensor is made
        compact once; device memory needs ``dlport.pickling(device_copy=True)``."""
    @staticmethod
    def _rebuild(buffer: Any, dtype: str, shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]],
                 flags: int, memory: str, /) -> "Tensor": ...
    def __copy__(self) -> "Tensor":
        """A view: another ``dlport.Tensor`` over the same memory."""
    def __deepcopy__(self, memo: Any, /) -> "Tensor":
        """A copy of the elements in new memory on the same device."""
    def compact(self, *, align: Optional[int] = None) -> "Tensor":
        """A row-major compact tensor with the same elements, aligned to ``align`` bytes
        (default 64 in host memory); no copy if it already is one."""

Layout = Literal["compact", "any"]

def from_dlpack(
    x: Any,
    /,
    *,
    device: Optional[Device] = None,
    copy: Optional[bool] = None,
    layout: Optional[Layout] = None,
    align: Optional[int] = None,
    max_alloc: Optional[int] = None,
) -> Tensor:
    """Imports any DLPack producer (or a bare DLPack capsule) as a ``dlport.Tensor``: a view,
    or one copy where ``device``, ``layout`` or ``align`` need one and ``copy`` allows it."""

def to_numpy(x: Any, /, *, copy: Optional[bool] = None) -> Any:
    """A NumPy array of ``x``, with an ml_dtypes dtype where NumPy has none: a view for
    bfloat16 and float8 (READ_ONLY kept), one copy for int4, uint4, float4 and float6
    (unpacked), and one copy, the producer's ``__array__``, for an array whose producer has no
    DLPack for its dtype (a JAX int4 array)."""

def to_jax(x: Any, /, *, copy: Optional[bool] = None) -> Any:
    """A ``jax.Array`` of ``x``: through JAX's DLPack where it takes the dtype (a view, or the
    one copy a layout needs); int4, uint4, float4 and ml_dtypes NumPy arrays through
    ``jax.device_put`` (one copy)."""

def explain(
    x: Any,
    /,
    *,
    device: Optional[Device] = None,
    copy: Optional[bool] = None,
    layout: Optional[Layout] = None,
    align: Optional[int] = None,
) -> str:
    """What ``x`` offers and what ``from_dlpack`` would do with it (view, copy or refusal, and
    why), as text for a bug report."""

def load_plugin(path: Union[str, "os.PathLike[str]"]) -> str:
    """Loads a C plugin library (a device backend) by path; returns its name."""

def unload_plugin(name: str) -> None:
    """Removes a plugin; its tensors stay valid until released."""

def backends() -> List[Dict[str, Any]]:
    """The registry's backends: name, kind, device_types, origin, callbacks."""

class Shared:
    """A tensor ready for another process on this machine (Linux): a descriptor plus the file
    descriptors that travel with it. The fds close with this object; the memory lives while any
    process maps it."""

    @property
    def descriptor(self) -> bytes:
        """The descriptor's bytes: dtype, shape, strides, device, kind of handle."""
    @property
    def fds(self) -> List[int]:
        """The fds that travel with the descriptor (borrowed: open while this object lives)."""
    def open(self) -> Tensor:
        """Opens the tensor in this process (a new mapping of the same memory)."""
    def send(self, sock: socket.socket) -> None:
        """Sends the descriptor and its fds over a connected AF_UNIX, SOCK_STREAM socket."""
    @staticmethod
    def recv(sock: socket.socket) -> "Shared":
        """Receives one descriptor and its fds from a connected AF_UNIX, SOCK_STREAM socket."""

def share(x: Any, /, *, copy: Optional[bool] = None, read_only: bool = False) -> Shared:
    """Shares a DLPack producer (or a ``dlport.Tensor``) with other processes: host memory in a
    sealed memfd (copied into one as ``copy`` allows), CUDA memory through CUDA IPC."""

def open_shared(descriptor: bytes, fds: List[int]) -> Tensor:
    """Opens a shared tensor without a copy; ``fds`` are borrowed (duplicated inside)."""

def set_alloc_limit(bytes: int, /) -> int:
    """Sets the process's allocation limit in bytes (0: the default, the machine's memory) for
    every door, and returns the limit it replaces. A call's ``max_alloc`` lowers it, never
    raises it."""

def alloc_limit() -> int:
    """The allocation limit in force for a call that gives no ``max_alloc``, in bytes."""
