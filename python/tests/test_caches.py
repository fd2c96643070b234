"""What dlport remembers about producer types: nothing that keeps a type alive, and nothing
that outlives a change to the type."""

import gc
import os
import sys
import weakref

import numpy as np
import pytest

import dlport

EXCHANGE_API = dlport.Tensor.__dlpack_c_exchange_api__
# dlport's table exports dlport.Tensor objects only: an object of any other class that offers it
# is refused with this error, which shows that the exchange API was the route taken.
THROUGH_EXCHANGE_API = "dlport's exchange API takes dlport.Tensor objects"


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def producer_class(i, exchange, blob=2**20):
    """A new producer class holding `blob` bytes; through `__dlpack__`, or offering dlport's
    exchange API (which refuses its objects)."""
    namespace = {
        "blob": bytearray(blob),
        "__init__": lambda self: setattr(self, "a", np.arange(4.0)),
        "__dlpack__": lambda self, **kwargs: self.a.__dlpack__(**kwargs),
        "__dlpack_device__": lambda self: self.a.__dlpack_device__(),
    }
    if exchange:
        namespace["__dlpack_c_exchange_api__"] = EXCHANGE_API
    return type(f"Producer{i}", (), namespace)


def import_twice(obj):
    """from_dlpack twice (a type's second import is the one that may be served from a cache)."""
    for _ in range(2):
        if "__dlpack_c_exchange_api__" in type(obj).__dict__:
            with pytest.raises(TypeError, match=THROUGH_EXCHANGE_API):
                dlport.from_dlpack(obj)
        else:
            assert dlport.from_dlpack(obj).shape == (4,)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_producer_classes_die_with_their_last_reference():
    """1,000 producer classes per round, each holding 1 MiB, imported from and dropped: every
    class is dead after a collection (dlport keeps none alive), and memory stays flat over three
    rounds (3 GiB if the classes were kept)."""
    gc.collect()
    start = rss_mib()
    for round in range(3):
        refs = []
        for i in range(1000):
            cls = producer_class(i, exchange=i % 2 == 1)
            import_twice(cls())
            refs.append(weakref.ref(cls))
            del cls
        gc.collect()
        alive = sum(r() is not None for r in refs)
        assert alive == 0, f"round {round}: {alive} of 1000 producer classes are still alive"
    grown = rss_mib() - start
    assert grown < 200, f"RSS grew by {grown:.0f} MiB over 3 rounds of 1000 classes of 1 MiB"


def test_a_class_that_gains_or_loses_an_exchange_api_is_routed_anew():
    """The route of a class follows its attributes as they are now: set, deleted or replaced on
    the class, on a base class or on its metaclass, after the route was cached."""

    class P:
        def __init__(self):
            self.a = np.arange(3.0)

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    class Sub(P):
        pass

    def dunder(obj, shape=(3,)):
        for _ in range(3):
            assert dlport.from_dlpack(obj).shape == shape

    def exchange(obj):
        for _ in range(3):
            with pytest.raises(TypeError, match=THROUGH_EXCHANGE_API):
                dlport.from_dlpack(obj)

    p, sub = P(), Sub()
    dunder(p)
    dunder(sub)
    P.__dlpack_c_exchange_api__ = EXCHANGE_API
    exchange(p)
    exchange(sub)  # inherited from the base class
    Sub.__dlpack_c_exchange_api__ = None  # not a capsule: __dlpack__
    exchange(p)
    dunder(sub)
    del P.__dlpack_c_exchange_api__
    dunder(p)
    dunder(sub)
    del Sub.__dlpack_c_exchange_api__
    dunder(sub)
    # __dlpack__ itself replaced after the first calls.
    P.__dlpack__ = lambda self, **kwargs: np.arange(5.0).__dlpack__(**kwargs)
    dunder(p, shape=(5,))
    dunder(sub, shape=(5,))

    # An attribute of the metaclass is the class's attribute too.
    class Meta(type):
        pass

    class Q(metaclass=Meta):
        def __dlpack__(self, **kwargs):
            return np.arange(3.0).__dlpack__(**kwargs)

    q = Q()
    dunder(q)
    Meta.__dlpack_c_exchange_api__ = EXCHANGE_API
    exchange(q)
    del Meta.__dlpack_c_exchange_api__
    dunder(q)


def test_a_new_class_where_a_dead_one_was_gets_its_own_route():
    """A class made in the memory of a dead class whose route was cached is looked at afresh:
    classes are made until one takes the dead one's address (CPython reuses freed memory), and
    every one imports through its own route."""
    old = producer_class(0, exchange=True, blob=0)
    import_twice(old())
    address = id(old)
    del old
    gc.collect()
    reused = False
    keep = []
    for i in range(2000):
        cls = producer_class(i, exchange=False, blob=0)
        reused = id(cls) == address
        import_twice(cls())
        if reused:
            break
        keep.append(cls)  # so the next class cannot take this one's memory
    del keep
    print("a new class took the dead one's address:", reused)
