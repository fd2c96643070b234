"""``dlport.explain``: what a producer offers and what dlport would do with it, as text."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from ._errors import DLPackError
from ._native import Tensor, _route, from_dlpack

Device = Union[str, Tuple[int, int]]

_ROUTES = {
    "capsule": "a bare DLPack capsule (read once: explain consumes it)",
    "exchange": "the type's DLPack 1.3 C exchange API (__dlpack_c_exchange_api__), no Python call",
    "dunder": "__dlpack_device__(), then __dlpack__(max_version=(1, 3))",
    "dunder-no-device": "__dlpack__(max_version=(1, 3)) (NumPy's ndarray: host memory only)",
}


def _name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _failure(e: BaseException) -> str:
    code = f" (code {e.code})" if isinstance(e, DLPackError) else ""
    return f"{type(e).__name__}{code}: {e}"


def _describe(t: Tensor) -> List[str]:
    address = t.data_ptr()
    align = min(address & -address, 4096) if address else 0
    layout = "row-major compact" if t.strides == _row_major(t.shape) else f"strides {t.strides} (elements)"
    return [
        f"  shape {t.shape}, dtype {t.dtype}, {layout}",
        f"  memory {t.memory}; presented as {t.device}",
        f"  first element at {address:#x} ({f'a multiple of {align} bytes' if align else 'NULL'})",
        f"  read-only: {t.readonly}; copied by dlport: {t.copied}",
    ]


def _row_major(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def explain(
    x: Any,
    /,
    *,
    device: Optional[Device] = None,
    copy: Optional[bool] = None,
    layout: Optional[str] = None,
    align: Optional[int] = None,
) -> str:
    """Says, as text to paste into a bug report, what ``x`` offers (its type, the route dlport
    takes, what ``__dlpack_device__`` answers, what its tensor says: shape, dtype, strides,
    device, alignment, flags) and what ``dlport.from_dlpack(x, device=, copy=, layout=,
    align=)`` would do for that request: a view, a copy and why, or a refusal and why.

    It imports ``x`` up to three times (each import is released before it returns), so a
    producer's side effects of ``__dlpack__`` happen that often; a bare capsule can be read
    only once, so only the first question is answered for one.
    """
    lines = [f"producer: {_name(x)}"]
    try:
        route = _route(x)
    except Exception as e:  # noqa: BLE001 - a hostile type's attributes can raise anything
        return "\n".join(lines + [f"route: cannot be decided: {_failure(e)}"])
    try:
        has_dunder = route == "capsule" or hasattr(x, "__dlpack__")
    except Exception as e:  # noqa: BLE001 - a __getattribute__ that raises: reported, as from_dlpack's refusal
        lines.append(f"__dlpack__: looking it up raised {_failure(e)}")
        has_dunder = True  # from_dlpack tries it: what it does is reported below
    if not has_dunder:
        lines.append("route: none: the object has no __dlpack__ and is not a DLPack capsule")
        return "\n".join(lines)
    lines.append(f"route: {_ROUTES[route]}")
    if route != "capsule":
        if hasattr(type(x), "__dlpack_c_exchange_api__") and route != "exchange":
            lines.append(
                "  its type offers __dlpack_c_exchange_api__, which dlport does not use: that table"
                " disagrees with the type's __dlpack__ (python/README.md, 'PyTorch')"
            )
        try:
            probe = getattr(x, "__dlpack_device__", None)
        except Exception as e:  # noqa: BLE001
            lines.append(f"__dlpack_device__: looking it up raised {_failure(e)}")
            probe = False
        if probe is False:
            pass
        elif probe is None:
            lines.append("__dlpack_device__: absent")
        else:
            try:
                lines.append(f"__dlpack_device__(): {probe()!r}")
            except Exception as e:  # noqa: BLE001
                lines.append(f"__dlpack_device__(): raised {_failure(e)}")
    try:
        t = from_dlpack(x, copy=False)
    except Exception as e:  # noqa: BLE001
        lines.append(f"as it comes (copy=False): refused: {_failure(e)}")
        return "\n".join(lines)
    lines.append("as it comes (a view, no copy):")
    lines += _describe(t)
    del t
    if route == "capsule":
        return "\n".join(lines)
    asked = {"device": device, "copy": copy, "layout": layout, "align": align}
    shown = ", ".join(f"{k}={v!r}" for k, v in asked.items() if v is not None) or "no options"
    lines.append(f"request ({shown}):")
    if copy is not None and not isinstance(copy, bool):
        # from_dlpack reads its options before it touches x: its own verdict on this `copy`
        # (a refusal, or a value it takes as a bool, such as numpy.bool_).
        try:
            from_dlpack(x, device=device, copy=copy, layout=layout, align=align)
        except Exception as e:  # noqa: BLE001
            lines.append(f"  refused: {_failure(e)}")
            return "\n".join(lines)
        copy = bool(copy)
    if copy is not True:
        try:
            view = from_dlpack(x, device=device, copy=False, layout=layout, align=align)
            lines.append(f"  a view, no copy, presented as {view.device}")
            return "\n".join(lines)
        except Exception as e:  # noqa: BLE001
            reason = _failure(e)
        if copy is False:
            lines.append(f"  refused (copy=False and a view cannot do): {reason}")
            return "\n".join(lines)
        lines.append(f"  a view cannot do: {reason}")
    try:
        copied = from_dlpack(x, device=device, copy=True if copy else None, layout=layout, align=align)
    except Exception as e:  # noqa: BLE001
        lines.append(f"  refused: {_failure(e)}")
        return "\n".join(lines)
    lines.append("  one copy" + (" (copy=True)" if copy else ""))
    lines += _describe(copied)
    return "\n".join(lines)
