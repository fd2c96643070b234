"""``dlport.Tensor`` in Dask distributed's own serialization family, and in ``dask.sizeof``.

Why: Dask sends an object of a type it has no serializer for by pickle, and between the
scheduler and everyone else it pickles with protocol 4 (its "common denominator"), which has no
out-of-band buffers. A tensor gathered through the scheduler (``future.result()``,
``client.gather``) would be copied into the pickle stream and out of it. Registered in the
"dask" family, a tensor is a small header and one frame over its bytes in every direction, as a
NumPy array is. ``dask.sizeof`` is what Dask's memory accounting reads: registered, a tensor
counts its bytes, not the size of the Python object.

When: ``import dlport`` calls :func:`install`. Where ``distributed.protocol`` is already
imported, it registers at once. Elsewhere it puts a finder on ``sys.meta_path`` that answers only
for ``distributed.protocol`` (every other import passes it by) and registers right after that
module has run. dlport never imports Dask itself.

The header carries what ``Tensor.__reduce_ex__`` sends in band (dtype, shape, strides, flags,
memory) and whether the sender's bytes were writable; the receiver rebuilds the tensor with
``Tensor._rebuild``, which checks every field before a view exists, so a forged header is a
``DLPackValueError`` naming the field, as a forged pickle is.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import pickle
import sys
import threading
import warnings
from typing import Any, Sequence

from ._native import Tensor

_TARGET = "distributed.protocol"
_lock = threading.Lock()
_registered = False


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


def _register() -> None:
    """Registers the serializer pair and the sizeof, once. A failure (a Dask release that moved
    these names) is a warning, never an error in the user's ``import distributed``: tensors then
    travel by pickle, as before."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
    try:
        from dask.sizeof import sizeof
        from distributed.protocol.serialize import dask_deserialize, dask_serialize

        dask_serialize.register(Tensor)(_serialize)
        dask_deserialize.register(Tensor)(_deserialize)
        sizeof.register(Tensor)(_sizeof)
    except Exception as e:  # noqa: BLE001 (any failure of a foreign package's API)
        warnings.warn(
            f"dlport could not register dlport.Tensor with Dask ({type(e).__name__}: {e}); "
            "tensors travel by pickle, copied in band where Dask uses pickle protocol 4",
            RuntimeWarning,
            stacklevel=2,
        )


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``distributed.protocol`` as the other finders would, and has its loader call
    :func:`_register` right after the module has run. Answers ``None`` for every other name."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module: Any) -> None:
            run(module)
            _uninstall()
            _register()

        loader.exec_module = exec_module  # type: ignore[union-attr]  # this spec's own loader
        return spec


_finder = _Finder()


def _uninstall() -> None:
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass


def install() -> None:
    """Registers now if ``distributed.protocol`` has been imported, else when it is."""
    module = sys.modules.get(_TARGET)
    if module is not None and hasattr(module, "dask_serialize"):
        _register()
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
