"""Bad inputs raise the array API's exceptions with dlport's message, never crash, and every
tensor handed over is released exactly once."""

import numpy as np
import pytest

import dlport
from conftest import collect, needs_numpy_dlpack_1
from dlport.testing import DLDataType, Producer, aligned, bare_capsule, capsule_name


@needs_numpy_dlpack_1
def test_a_consumed_capsule_and_a_foreign_name_are_value_errors():
    a = np.arange(4.0)
    cap = a.__dlpack__(max_version=(1, 3))
    dlport.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="already consumed"):
        dlport.from_dlpack(cap)
    with pytest.raises(ValueError, match='name is "not_a_tensor"'):
        dlport.from_dlpack(bare_capsule(a.ctypes.data, b"not_a_tensor"))


def test_objects_that_are_not_producers_are_type_errors():
    with pytest.raises(TypeError, match="__dlpack__ or a DLPack capsule, got list"):
        dlport.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError):
        dlport.from_dlpack()


@pytest.mark.parametrize("producer, message", [
    (dict(versioned=True, version=(2, 0)), r"version = 2.0 is not supported"),
    (dict(shape=(2, -3)), r"shape\[1\] = -3 is negative"),
    (dict(dtype=DLDataType(17, 8, 1)), "dtype.bits = 8 is invalid for kDLFloat4_e2m1fn"),
    (dict(versioned=True, flags=1 << 9), "flags"),
])
def test_invalid_tensors_are_buffer_errors_and_are_released(producer, message):
    src = Producer(aligned(6, np.float64), **producer)
    with pytest.raises(BufferError, match=message) as e:
        dlport.from_dlpack(src)
    assert e.value.code > 0, "the core's stable error code"
    collect()
    assert src.deleted == 1, "released exactly once"


def test_a_producer_without_max_version_gets_the_legacy_call():
    src = Producer(aligned(4, np.float32), knows_max_version=False)
    t = dlport.from_dlpack(src)
    assert [c["max_version"] for c in src.calls] == [(1, 3), None]
    assert t.data_ptr() == src.address


def test_a_bad_dlpack_device_answer_is_a_type_error():
    src = Producer(aligned(4, np.float32), advertised="cpu")
    with pytest.raises(TypeError, match=r"__dlpack_device__\(\) returned 'cpu'"):
        dlport.from_dlpack(src)
    assert src.calls == [], "nothing was exported"


def test_bad_from_dlpack_arguments():
    a = np.arange(3.0)
    with pytest.raises(ValueError, match="device") as e:
        dlport.from_dlpack(a, device="gpu:0")
    assert e.value.code == 22
    with pytest.raises(TypeError, match="device must be a name"):
        dlport.from_dlpack(a, device=1.5)
    with pytest.raises(ValueError, match="device type must be a DLDeviceType"):
        dlport.from_dlpack(a, device=(0, 0))
    with pytest.raises(TypeError, match="copy must be True, False or None, got 'yes'"):
        dlport.from_dlpack(a, copy="yes")
    with pytest.raises(ValueError, match=r"device = \(1, 1099511627776\) is out of range"):
        dlport.from_dlpack(a, device=(1, 2**40))
    with pytest.raises(TypeError, match=r"device must be a \(device_type, device_id\) pair.*got \(1,\)"):
        dlport.from_dlpack(a, device=(1,))
    # A caller's control characters come back escaped, on one line.
    with pytest.raises(ValueError, match=r'device name "cpu\\0\\n" is not recognised'):
        dlport.from_dlpack(a, device="cpu\0\n")
    with pytest.raises(BufferError, match=r"no backend for device_type\(99\)"):
        dlport.from_dlpack(a, device=(99, 0))


def test_from_dlpack_takes_its_arguments_as_the_array_api_says():
    """`from_dlpack(x, /, *, device=None, copy=None, layout=None, align=None)`: every shape of
    call."""
    import inspect

    assert str(inspect.signature(dlport.from_dlpack)) == (
        "(x, /, *, device=None, copy=None, layout=None, align=None, max_alloc=None)"
    )
    assert dlport.from_dlpack.__doc__.startswith("Imports `x`")
    a = np.arange(3.0)
    for kwargs in [{}, {"device": None}, {"copy": None}, {"device": "cpu", "copy": False},
                   {"copy": np.bool_(False), "device": (1, 0)}, {"copy": True}]:
        t = dlport.from_dlpack(a, **kwargs)
        assert t.shape == (3,) and t.device == "cpu", kwargs
        assert (t.data_ptr() == a.ctypes.data) != bool(kwargs.get("copy")), kwargs
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        dlport.from_dlpack()
    with pytest.raises(TypeError, match="takes 1 positional arguments but 2 were given"):
        dlport.from_dlpack(a, "cpu")
    with pytest.raises(TypeError, match="positional-only arguments passed as keyword arguments: 'x'"):
        dlport.from_dlpack(x=a)
    with pytest.raises(TypeError, match="unexpected keyword argument 'dl_device'"):
        dlport.from_dlpack(a, dl_device="cpu")
    with pytest.raises(TypeError, match="copy must be True, False or None, got 1"):
        dlport.from_dlpack(a, copy=1)
    # Keyword names that are equal but not the interned strings (built at run time).
    name = "".join(["co", "py"])
    t = dlport.from_dlpack(a, **{name: True})
    assert t.data_ptr() != a.ctypes.data
    # A producer whose __dlpack__ or __dlpack_device__ raises: a BufferError naming the producer
    # and the method, the producer's exception as its cause; its own BufferError and
    # KeyboardInterrupt-like exceptions pass through unchanged.
    class Broken:
        def __dlpack__(self, **kwargs):
            raise KeyError("producer failed")

    with pytest.raises(BufferError, match=r"Broken.__dlpack__\(\) failed.*KeyError\('producer failed'\)") as e:
        dlport.from_dlpack(Broken())
    assert isinstance(e.value, dlport.DLPackBufferError) and e.value.code == 1001
    assert isinstance(e.value.__cause__, KeyError)

    class BadDevice:
        def __dlpack_device__(self):
            raise ValueError("Unknown device type meta for Dlpack")

        def __dlpack__(self, **kwargs):
            raise AssertionError("not reached")

    with pytest.raises(BufferError, match=r"BadDevice.__dlpack_device__\(\) failed.*meta") as e:
        dlport.from_dlpack(BadDevice())
    assert isinstance(e.value.__cause__, ValueError)

    class OwnRefusal:
        def __dlpack__(self, **kwargs):
            raise BufferError("the producer's own words")

    with pytest.raises(BufferError, match="^the producer's own words$") as e:
        dlport.from_dlpack(OwnRefusal())
    assert not isinstance(e.value, dlport.DLPackError)

    class Interrupted:
        def __dlpack__(self, **kwargs):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dlport.from_dlpack(Interrupted())


def test_bad_dlpack_arguments():
    t = dlport.from_dlpack(np.arange(3.0))
    with pytest.raises(ValueError, match="stream") as e:
        t.__dlpack__(stream=5)
    assert e.value.code == 34
    # Every bad argument: its name and value in the message, TypeError for the wrong kind,
    # ValueError out of range (the array API's split), as from_dlpack says them.
    bad = [
        (TypeError, {"max_version": 1}, "max_version must be a (major, minor) pair of ints"),
        (TypeError, {"max_version": (1,)}, "got (1,)"),
        (TypeError, {"max_version": (1, 3.0)}, "got (1, 3.0)"),
        (ValueError, {"max_version": (1, -1)}, "max_version = (1, -1) is out of range"),
        (ValueError, {"max_version": (2**70, 0)}, "is out of range"),
        (TypeError, {"dl_device": "cpu"}, "dl_device must be a (device_type, device_id) pair"),
        (ValueError, {"dl_device": (0, 0)}, "dl_device = (0, 0): the device type must be"),
        (ValueError, {"dl_device": (1, 2**31)}, "dl_device = (1, 2147483648) is out of range"),
        (TypeError, {"stream": "0"}, "stream must be None or an int from -2**63 to 2**63 - 1, got '0'"),
        (ValueError, {"stream": 2**80}, "stream = 1208925819614629174706176 is out of range"),
        (TypeError, {"copy": "yes"}, "copy must be True, False or None, got 'yes'"),
    ]
    for kind, kwargs, message in bad:
        with pytest.raises(kind) as e:
            t.__dlpack__(**kwargs)
        assert message in str(e.value), (kwargs, str(e.value))
    # NumPy's integers and bool_ are ints and bools here too.
    t.__dlpack__(max_version=(np.int64(1), np.int32(3)), dl_device=(np.int64(1), 0),
                 copy=np.bool_(False))
    assert t._dlpack_users == 0
    with pytest.raises(BufferError, match="cuda:0"):
        t.__dlpack__(max_version=(1, 3), dl_device=(2, 0), copy=False)
    with pytest.raises(TypeError, match="positional"):
        t.__dlpack__(None)
    assert t._dlpack_users == 0, "no failed export left a reference behind"


def test_tensors_are_made_by_from_dlpack_only():
    with pytest.raises(TypeError):
        dlport.Tensor()


def test_an_unconsumed_dlport_capsule_is_released_even_with_an_exception_set():
    t = dlport.from_dlpack(np.arange(4.0))
    # int(capsule) fails; CPython drops the temporary capsule while the TypeError is set.
    with pytest.raises(TypeError):
        int(t.__dlpack__(max_version=(1, 3)))
    collect()
    assert t._dlpack_users == 0, "released exactly once, and the pending TypeError survived"
    cap = t.__dlpack__()
    assert capsule_name(cap) == "dltensor" and t._dlpack_users == 1
    del cap
    collect()
    assert t._dlpack_users == 0


def test_the_exchange_api_is_skipped_when_a_type_offers_a_broken_one():
    class Odd(Producer):
        __dlpack_c_exchange_api__ = 12345  # not a capsule: __dlpack__ is used instead

    src = Odd(aligned(4, np.float32))
    t = dlport.from_dlpack(src)
    assert src.calls and t.data_ptr() == src.address


def test_every_error_dlport_raises_carries_its_code():
    """Every exception dlport raises is a dlport class, also the builtin the array API names,
    with `code`: the core's error number, or the binding's own (1002 a value out of range, 1003
    an argument of the wrong kind); never 0."""
    a = np.arange(3.0)
    t = dlport.from_dlpack(a)
    used = a.__dlpack__()
    dlport.from_dlpack(used)
    T, V, B = dlport.DLPackTypeError, dlport.DLPackValueError, dlport.DLPackBufferError
    cases = [
        (T, 1003, lambda: dlport.from_dlpack(a, copy="yes")),
        (T, 1003, lambda: dlport.from_dlpack(a, device=1.5)),
        (V, 1002, lambda: dlport.from_dlpack(a, device=(1, 2**40))),
        (V, 22, lambda: dlport.from_dlpack(a, device="gpu:0")),
        (T, 1003, lambda: dlport.from_dlpack(1)),
        (V, 1002, lambda: dlport.from_dlpack(used)),
        (T, 1003, lambda: t.__dlpack__(max_version=1)),
        (V, 1002, lambda: t.__dlpack__(max_version=(1, -1))),
        (V, 34, lambda: t.__dlpack__(stream=5)),
        (T, 1003, lambda: dlport.share(a, copy="no")),
        (V, 1002, lambda: dlport.from_dlpack(a, device="\ud800")),
        (B, 23, lambda: dlport.from_dlpack(a, device=(99, 0))),
    ]
    builtin = {T: TypeError, V: ValueError, B: BufferError}
    for cls, code, call in cases:
        with pytest.raises(cls) as e:
            call()
        assert type(e.value) is cls, (e.value, cls)
        assert isinstance(e.value, dlport.DLPackError)
        assert isinstance(e.value, builtin[cls])
        assert e.value.code == code, (e.value, code)
        assert e.value.code != 0
