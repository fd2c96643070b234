"""One JAX configuration per process (JAX's backends are process-global): the stand-in vendor
is the real XLA CPU plugin (DLPORT_PJRT_PLUGIN) behind a table that answers
PJRT_Client_PlatformName with "xpu", registered with JAX like any plugin. Usage:
``python child.py SETUP CASE...``; each case prints ``PASS name`` or raises."""

import ctypes
import gc
import os
import sys
import threading

import numpy as np

import refusals  # noqa: F401  (registers the refusal cases)
from support import AFFINE, CASES, aligned, case, expect, rss, vendor

@case
def jax_refuses():
    import jax.numpy as jnp

    x = jnp.arange(6.0)
    assert x.devices().pop().platform == "xpu"
    expect(BufferError, x.__dlpack_device__, "xpu")
    expect(Exception, x.__dlpack__)


@case
def export_view():
    import jax
    import jax.numpy as jnp

    import dlport
    import dlport.jax

    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    e = dlport.jax.export(x)
    assert e.__dlpack_device__() == (1, 0)
    t = dlport.from_dlpack(e)
    assert t.readonly and t.__dlpack_device__() == (1, 0) and t.shape == (3, 4)
    y = np.from_dlpack(t)
    assert y.ctypes.data == x.unsafe_buffer_pointer(), "a copy, not a view"
    assert not y.flags.writeable
    # dlport.from_dlpack takes the array itself: JAX's own DLPack refuses "xpu", so dlport
    # exports it through the interposed table (the same memory, READ_ONLY).
    expect(BufferError, x.__dlpack_device__, "xpu")
    d = dlport.from_dlpack(x)
    assert d.readonly and d.data_ptr() == x.unsafe_buffer_pointer(), "a copy, not a view"
    assert d.__dlpack_device__() == (1, 0) and d.shape == (3, 4)
    np.testing.assert_array_equal(y, np.arange(12, dtype=np.float32).reshape(3, 4))
    out = jax.jit(lambda a: a * 2 + 1)(x)
    np.testing.assert_array_equal(np.from_dlpack(dlport.jax.export(out)), np.asarray(out))
    cap = dlport.jax.to_dlpack(x)
    assert "dltensor_versioned" in repr(cap)
    np.testing.assert_array_equal(np.from_dlpack(dlport.from_dlpack(cap)), y)
    # Each shard of a multi-device array; the array itself is refused with the recipe.
    devs = jax.devices("xpu")
    assert len(devs) >= 2
    mesh = jax.sharding.Mesh(np.array(devs[:2]), ("i",))
    sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i"))
    m = jax.device_put(jnp.arange(8, dtype=jnp.float32), sh)
    expect(ValueError, lambda: dlport.jax.export(m), "addressable_shards", "2 devices")
    parts = [np.from_dlpack(dlport.jax.export(s.data)) for s in m.addressable_shards]
    np.testing.assert_array_equal(np.concatenate(parts), np.arange(8, dtype=np.float32))


@case
def import_view():
    import jax
    import jax.numpy as jnp

    import dlport.jax

    a = aligned(np.arange(6, dtype=np.float32).reshape(2, 3))
    z = dlport.jax.from_dlpack(a)
    assert z.devices().pop().platform == "xpu"
    assert z.unsafe_buffer_pointer() == a.ctypes.data, "a copy, not a view"
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v + 1)(z)), a + 1)
    np.testing.assert_array_equal(np.from_dlpack(dlport.jax.export(z)), a)
    # Read-only memory: copied by default, refused without copies.
    r = aligned(np.arange(4, dtype=np.float32))
    r.flags.writeable = False
    expect(BufferError, lambda: dlport.jax.from_dlpack(r, copy=False), "READ_ONLY")
    c = dlport.jax.from_dlpack(r)
    assert c.unsafe_buffer_pointer() != r.ctypes.data
    np.testing.assert_array_equal(np.asarray(c), r)
    # A stride PJRT cannot take, and misaligned memory: copied, or refused with copy=False.
    s = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))[:, ::2]
    expect(Exception, lambda: dlport.jax.from_dlpack(s, copy=False))
    np.testing.assert_array_equal(np.asarray(dlport.jax.from_dlpack(s)), s)
    m = aligned(np.arange(5, dtype=np.float32))[1:]
    assert m.ctypes.data % 64 != 0
    expect(Exception, lambda: dlport.jax.from_dlpack(m, copy=False))
    np.testing.assert_array_equal(np.asarray(dlport.jax.from_dlpack(m)), m)
    # An explicit device of the platform, and one that is not.
    d1 = jax.devices("xpu")[1]
    z1 = dlport.jax.from_dlpack(aligned(np.ones(3, np.float32)), device=d1)
    assert z1.devices() == {d1}
    cpu = jax.devices("cpu")[0]
    expect(BufferError, lambda: dlport.jax.from_dlpack(a, device=cpu), "cpu")
    # The producer is released once the view is gone.
    import weakref

    t = aligned(np.arange(3, dtype=np.float32))
    w = weakref.ref(t)
    v = dlport.jax.from_dlpack(t)
    del t
    gc.collect()
    assert w() is not None, "released while JAX's view lives"
    del v
    gc.collect()
    assert w() is None, "not released after JAX's view went"
    del jnp


@case
def export_protocol():
    """The producer export() returns: made at once (it outlives x.delete() before any
    consumer), the array API's keywords, a new export per later call."""
    import jax.numpy as jnp

    import dlport
    import dlport.jax

    x = jnp.arange(5, dtype=jnp.float32) + 1
    e = dlport.jax.export(x)
    x.delete()
    a = np.from_dlpack(e)
    np.testing.assert_array_equal(a, [1, 2, 3, 4, 5])
    expect(Exception, lambda: np.from_dlpack(e), "deleted")  # x is gone for a new export
    z = jnp.arange(3, dtype=jnp.float32)
    e = dlport.jax.export(z)
    expect(BufferError, lambda: e.__dlpack__(max_version=(1, 3), dl_device=(2, 0)), "dl_device")
    # No max_version: a legacy capsule, which cannot say READ_ONLY: a copy, or refused.
    legacy = e.__dlpack__()
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    t = dlport.from_dlpack(legacy)
    assert t.__dlpack_device__() == (1, 0)
    assert t.data_ptr() != z.unsafe_buffer_pointer()
    np.testing.assert_array_equal(np.from_dlpack(t), [0, 1, 2])
    expect(BufferError, lambda: e.__dlpack__(copy=False), "READ_ONLY")
    c = dlport.from_dlpack(e.__dlpack__(max_version=(1, 3), copy=True))
    assert c.copied
    np.testing.assert_array_equal(np.from_dlpack(c), [0, 1, 2])


@case
def platform_device_label():
    """Installed without device_type, "xpu" is labelled by the platform table (kDLOneAPI,
    the device's place): NumPy refuses it by that label, the capsule carries it."""
    import jax
    import jax.numpy as jnp

    import dlport
    import dlport.jax

    assert dlport.jax.installed() == {"xpu": 14}
    x = jax.device_put(jnp.arange(4, dtype=jnp.float32), jax.devices("xpu")[1])
    e = dlport.jax.export(x)
    assert e.__dlpack_device__() == (14, 1)
    expect(Exception, lambda: np.from_dlpack(e))
    cap = dlport.jax.to_dlpack(x)
    assert "dltensor_versioned" in repr(cap)
    expect(BufferError, lambda: dlport.jax.from_dlpack(np.arange(3, dtype=np.float32)), "14")
    # A producer on the platform's device (kDLOneAPI; the stand-in's memory is host memory):
    # viewed where it is, checked by dlport first.
    from dlport.testing import Producer

    a = aligned(np.arange(6, dtype=np.float32))
    p = Producer(a, capsule_device=(14, 1), advertised=(14, 1), versioned=True)
    v = dlport.jax.from_dlpack(p)
    assert v.devices() == {jax.devices("xpu")[1]}
    assert v.unsafe_buffer_pointer() == a.ctypes.data
    np.testing.assert_array_equal(np.asarray(v), a)
    del v
    gc.collect()
    assert p.deleted == 1, p.deleted
    ro = Producer(a, capsule_device=(14, 1), advertised=(14, 1), versioned=True, flags=1)
    expect(BufferError, lambda: dlport.jax.from_dlpack(ro), "READ_ONLY")
    odd = Producer(a[1:], capsule_device=(14, 1), advertised=(14, 1), versioned=True)
    expect(BufferError, lambda: dlport.jax.from_dlpack(odd), "aligned")
    b = aligned(np.arange(12, dtype=np.float32)).reshape(3, 4)
    col = Producer(b, capsule_device=(14, 0), advertised=(14, 0), versioned=True,
                   shape=(4, 3), strides=(1, 4))
    expect(BufferError, lambda: dlport.jax.from_dlpack(col), "row-major")
    far = Producer(a, capsule_device=(14, 9), advertised=(14, 9), versioned=True)
    expect(BufferError, lambda: dlport.jax.from_dlpack(far), "device id 9")
    gc.collect()
    assert ro.deleted == odd.deleted == col.deleted == far.deleted == 1


@case
def delete_while_exported():
    import jax.numpy as jnp

    import dlport._native as n
    import dlport.jax

    x = jnp.arange(1, 9, dtype=jnp.float32) * 3
    handle = []
    y = np.from_dlpack(dlport.jax.export(x))
    addr = y.ctypes.data
    x.delete()
    assert x.is_deleted()
    expect(Exception, lambda: np.asarray(x + 1))
    gc.collect()
    others = [jnp.full((8,), 100.0 + i, dtype=jnp.float32) * 1 for i in range(16)]
    assert all(o.unsafe_buffer_pointer() != addr for o in others), "exported memory reused"
    np.testing.assert_array_equal(y, np.arange(1, 9, dtype=np.float32) * 3)
    # Garbage collection and jax.clear_caches() of an exported array.
    import jax

    g = jnp.arange(4, dtype=jnp.float32) + 10
    gy = np.from_dlpack(dlport.jax.export(g))
    del g
    gc.collect()
    jax.clear_caches()
    more = [jnp.zeros((4,), jnp.float32) + i for i in range(16)]
    np.testing.assert_array_equal(gy, np.arange(4, dtype=np.float32) + 10)
    del handle, more, others


@case
def donation_while_exported():
    import jax
    import jax.numpy as jnp
    from jax._src.interpreters import mlir

    import dlport.jax

    mlir._platforms_with_donation.append("xpu")
    x = jnp.arange(1, 5, dtype=jnp.float32)
    y = np.from_dlpack(dlport.jax.export(x))
    f = jax.jit(lambda a: a * 2, donate_argnums=0)
    try:
        out = f(x)
        np.testing.assert_array_equal(np.asarray(out), [2, 4, 6, 8])
        assert out.unsafe_buffer_pointer() != y.ctypes.data, "the output reused exported memory"
        print("donation: copied around the export")
    except Exception as e:  # XLA refuses to donate a buffer with an external reference
        assert "external reference" in str(e) or "donat" in str(e).lower(), e
        print("donation: refused:", str(e).splitlines()[0])
    np.testing.assert_array_equal(y, [1, 2, 3, 4])
    # Without an export, donation still works (the interposer changes nothing else).
    z = jnp.arange(4, dtype=jnp.float32)
    np.testing.assert_array_equal(np.asarray(f(z)), [0, 2, 4, 6])
    assert z.is_deleted()


@case
def threads_release():
    import jax.numpy as jnp

    import dlport._native as n
    import dlport.jax

    xs = [jnp.full((64,), float(i), dtype=jnp.float32) + 0 for i in range(64)]
    raws = []
    views = []
    for x in xs:
        raws.append(x)
        views.append(np.from_dlpack(dlport.jax.export(x)))
    del xs, raws  # JAX's Destroy of each waits for its export
    gc.collect()
    errors = []

    def drop(chunk):
        try:
            for i, v in chunk:
                assert v[0] == float(i)
            chunk.clear()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    chunks = [[(i, views[i]) for i in range(k, 64, 8)] for k in range(8)]
    views.clear()
    ts = [threading.Thread(target=drop, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    del chunks
    gc.collect()


@case
def round_trips():
    import jax.numpy as jnp

    import dlport.jax

    x = jnp.arange(256, dtype=jnp.float32)

    def once():
        y = np.from_dlpack(dlport.jax.export(x))
        z = dlport.jax.from_dlpack(aligned(y))
        assert float(z[3]) == 3.0
        t = dlport.jax.to_dlpack(x)
        del y, z, t

    for _ in range(300):
        once()
    gc.collect()
    before = rss()
    n = int(os.environ.get("DLPORT_JAX_ROUND_TRIPS", "10000"))
    for _ in range(n):
        once()
    gc.collect()
    grown = rss() - before
    assert grown < 16 << 20, f"RSS grew {grown >> 20} MiB over {n} round trips"
    print(f"round trips: {n}, RSS growth {grown >> 10} KiB")


@case
def dtypes():
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    import dlport.jax

    names = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
             "bfloat16", "float32", "complex64", "float8_e4m3fn", "float8_e5m2",
             "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz"]
    for name in names:
        dt = jnp.dtype(getattr(ml_dtypes, name, None) or name)
        x = jnp.asarray(np.arange(6).reshape(2, 3) % 2, dtype=dt)
        t = dlport.from_dlpack(dlport.jax.export(x))
        assert t.shape == (2, 3), name
        host = np.asarray(x)
        assert t.nbytes == host.nbytes, (name, t.nbytes)
        assert ctypes.string_at(t.data_ptr(), t.nbytes) == host.tobytes(), name
    # int4: PJRT packs two per byte; DLPack's int4 is that packing.
    x = jnp.asarray([1, -2, 3, -4, 5, -6], dtype=jnp.int4)
    t = dlport.from_dlpack(dlport.jax.export(x))
    assert t.dtype in ("int4", "int4x1"), t.dtype
    assert t.nbytes == 3, t.nbytes
    del jax


@case
def refuse_unknown_array():
    import jax
    import jax.numpy as jnp

    import dlport.jax

    c = jax.device_put(jnp.arange(3.0), jax.devices("cpu")[0])
    expect(BufferError, lambda: dlport.jax.export(c), "cpu")
    expect(TypeError, lambda: dlport.jax.export(np.arange(3)), "jax.Array")


@case
def copy_when_asked():
    import jax.numpy as jnp

    import dlport._native as n
    import dlport.jax

    x = jnp.arange(6, dtype=jnp.float32)
    before = n._jax_host_copies()
    t = dlport.from_dlpack(dlport.jax.export(x, copy=True))
    assert t.copied and not t.readonly
    assert t.data_ptr() != x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(6, dtype=np.float32))
    assert n._jax_host_copies() == before + 1
    v = dlport.from_dlpack(dlport.jax.export(x))
    assert not v.copied and n._jax_host_copies() == before + 1


@case
def stubbed_plugin():
    """The stand-in lacks what a view needs: one counted host copy, or a refusal by name."""
    import jax.numpy as jnp

    import dlport._native as n
    import dlport.jax

    x = jnp.arange(1, 7, dtype=jnp.float32).reshape(2, 3)
    expect(BufferError, lambda: dlport.jax.export(x, copy=False), STUB, "copy=False")
    before = n._jax_host_copies()
    t = dlport.from_dlpack(dlport.jax.export(x))
    assert t.copied and t.data_ptr() != x.unsafe_buffer_pointer()
    assert n._jax_host_copies() == before + 1
    y = np.from_dlpack(t)
    x.delete()
    np.testing.assert_array_equal(y, np.arange(1, 7, dtype=np.float32).reshape(2, 3))


@case
def borrowed_client():
    """JAX's own client, as dlport.pjrt's: it compiles, runs and transfers; dropping it leaves
    JAX's client alive."""
    import jax
    import jax.numpy as jnp

    import dlport.jax

    expect(LookupError, lambda: dlport.jax.client("nope"), "not installed")
    c = dlport.jax.client("xpu")
    assert c.platform == "xpu" and c.device_type == 1
    assert len(c.devices) == len(jax.devices("xpu"))
    x = aligned(np.arange(6, dtype=np.float32).reshape(2, 3))
    buf = c.from_dlpack(x, copy=False)
    assert buf.data_ptr == x.ctypes.data
    (out,) = c.compile(AFFINE).execute(buf)
    np.testing.assert_array_equal(np.from_dlpack(out), x * 2 + 1)
    del c, buf, out
    gc.collect()
    y = jnp.arange(3, dtype=jnp.float32) + 1
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v * 3)(y)), [3, 6, 9])
    c2 = dlport.jax.client("xpu")
    assert c2.devices == dlport.jax.client("xpu").devices


STUB = "PJRT_Buffer_OpaqueDeviceMemoryDataPointer"


if __name__ == "__main__":
    setup, *names = sys.argv[1:]
    if setup == "stubbed":
        vendor(stubs=(STUB,))
    elif setup == "labelled":
        vendor(device_type=None)
    elif setup != "bare":
        vendor(install=setup == "installed")
    for name in names:
        CASES[name]()
        print("PASS", name, flush=True)
