"""``dlport.Tensor`` in Dask distributed's own serialization family, and in ``dask.sizeof``: the
functions, with no import of Dask (``dlport.dask`` registers them with Dask's dispatchers).

Why: Dask sends an object of a type it has no serializer for by pickle, and between the
scheduler and everyone else it pickles with protocol 4 (its "common denominator"), which has no
out-of-band buffers. A tensor gathered through the scheduler (``future.result()``,
``client.gather``) would be copied into the pickle stream and out of it. Registered in the
"dask" family, a tensor is a small header and one frame over its bytes in every direction, as a
NumPy array is. ``dask.sizeof`` is what Dask's memory accounting reads: registered, a tensor
counts its bytes, not the size of the Python object.

When: Dask reads the entry point group ``dask.sizeof`` when it imports ``dask.sizeof``; the
package declares :func:`register_sizeof` there (python/pyproject.toml), so the count needs no
import of dlport's. Distributed has no entry point for serializers: ``import dlport.dask``
registers the family (and the count), in the client and, through Dask's preload
(``dask worker --preload dlport.dask``), in every worker. ``import dlport`` never imports Dask and
installs no import hook.

The header carries what ``Tensor.__reduce_ex__`` sends in band (dtype, shape, strides, flags,
memory) and whether the sender's bytes were writable; the receiver rebuilds the tensor with
``Tensor._rebuild``, which checks every field before a view exists, so a forged header is a
``DLPackValueError`` naming the field, as a forged pickle is.
"""

from __future__ import annotations

import pickle
from typing import Any, Sequence

from ._native import Tensor


def _serialize(t: Tensor) -> tuple[dict[str, Any], list[memoryview]]:
    """The "dask" family's form of ``t``: ``__reduce_ex__(5)``'s fields in the header, its
    out-of-band buffer as the one frame (no copy for a row-major compact host tensor)."""
    _, (buf, dtype, shape, strides, flags, memory) = t.__reduce_ex__(5)
    frame = buf.raw() if isinstance(buf, pickle.PickleBuffer) else memoryview(buf)
    header = {
        "dlport": [dtype, list(shape), None if strides is None else list(strides), flags, memory],
        "writeable": not frame.readonly,
    }
    return header, [frame]


def _deserialize(header: dict[str, Any], frames: Sequence[Any]) -> Tensor:
    """A view of the frame Dask hands back (a copy only where the sender's bytes were writable
    and the frame is read-only, as Dask does for pickled frames)."""
    fields = header.get("dlport")
    if not isinstance(fields, (list, tuple)) or len(fields) != 5:
        raise _value_error(f"the Dask header's field 'dlport' must be a list of 5 fields, got {fields!r:.200}")
    if len(frames) != 1:
        raise _value_error(f"a dlport.Tensor travels as exactly 1 Dask frame, got {len(frames)}")
    dtype, shape, strides, flags, memory = fields
    frame = memoryview(frames[0])
    if header.get("writeable") is True and frame.readonly:
        frame = memoryview(bytearray(frame))
    return Tensor._rebuild(frame, dtype, _ints(shape), None if strides is None else _ints(strides), flags, memory)


def _ints(v: Any) -> Any:
    """A list from msgpack as the tuple ``_rebuild`` takes (anything else is left for its check,
    which names the field)."""
    return tuple(v) if isinstance(v, list) else v


def _value_error(message: str) -> Exception:
    from ._errors import DLPackValueError

    return DLPackValueError(f"deserializing a dlport.Tensor from Dask: {message}", 1002)  # a bad value


def _sizeof(t: Tensor) -> int:
    return int(t.nbytes)


def register_sizeof(sizeof: Any) -> None:
    """The ``dask.sizeof`` entry point: Dask calls it with its ``sizeof`` dispatcher."""
    sizeof.register(Tensor)(_sizeof)
