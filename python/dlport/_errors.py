"""dlport's exceptions: each a ``DLPackError`` and the builtin the array API names."""



class DLPackError(Exception):
    """A dlport failure. ``code``: core's stable error number (``DLPORT_ERR_*`` in the C ABI,
    1 to 44), or the binding's own (1001 a bad hand-over, 1002 a bad value, 1003 an argument of
    the wrong kind, 1004 a failed allocation); never 0."""

    code: int

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> "tuple[type, tuple[str, int]]":
        return (type(self), (str(self), self.code))


class DLPackBufferError(DLPackError, BufferError):
    """The data cannot cross as asked (invalid tensor, device, copy refused, flag)."""


class DLPackValueError(DLPackError, ValueError):
    """An argument value out of its range (a device name, an option, a stream, a device id)."""


class DLPackTypeError(DLPackError, TypeError):
    """An argument of the wrong kind."""


class DLPackMemoryError(DLPackError, MemoryError):
    """An allocation failed."""


__all__ = [
    "DLPackError",
    "DLPackBufferError",
    "DLPackValueError",
    "DLPackTypeError",
    "DLPackMemoryError",
]
