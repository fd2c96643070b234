"""Producers whose arrays are immutable (issue #57, case 13): dlport takes a jax.Array's memory as
READ_ONLY whatever capsule it sends. JAX before 0.12 (0.10.2 is the newest on CPython 3.11)
sends a legacy capsule, which has no flags; tests/upstream runs the real one. Here a class that
is jaxlib's ArrayImpl by name stands in, over an emulated legacy producer."""

import numpy as np

import dlport
from dlport.testing import Producer, aligned


def jax_like(producer):
    """An object whose type is named as jaxlib's concrete jax.Array, exporting `producer`'s
    legacy capsule."""

    class ArrayImpl:
        def __dlpack_device__(self):
            return producer.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            return producer.capsule(versioned=False)

    ArrayImpl.__module__ = "jaxlib._jax"
    ArrayImpl.__qualname__ = "ArrayImpl"
    return ArrayImpl()


def test_a_jax_array_is_read_only_whatever_its_capsule_says():
    a = aligned(4, np.float32)
    p = Producer(a)
    t = dlport.from_dlpack(jax_like(p))
    assert t.readonly and not t.copied and t.data_ptr() == a.ctypes.data
    assert not np.from_dlpack(t).flags.writeable
    del t
    assert p.deleted == 1


def test_the_same_capsule_from_another_producer_stays_writable():
    a = aligned(4, np.float32)
    t = dlport.from_dlpack(Producer(a))
    assert not t.readonly


def test_older_jaxlib_module_name():
    a = aligned(4, np.float32)
    obj = jax_like(Producer(a))
    type(obj).__module__ = "jaxlib.xla_extension"
    assert dlport.from_dlpack(obj).readonly
