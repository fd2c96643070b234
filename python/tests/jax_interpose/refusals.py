"""The refusals of dlport.jax.install, each in a process of its own where JAX registered the
stand-in but made no backend (child.py runs them)."""

import sys

from support import case, expect

@case
def refuse_unregistered():
    import dlport.jax
    from jax._src import xla_bridge

    before = dict(xla_bridge._backend_factories)
    expect(LookupError, lambda: dlport.jax.install("nope"), "nope", "registered")
    assert xla_bridge._backend_factories == before


@case
def refuse_backend_exists():
    import jax

    import dlport.jax
    from jax._src import xla_bridge

    jax.devices()
    f = xla_bridge._backend_factories["xpu"]
    expect(RuntimeError, lambda: dlport.jax.install("xpu"), "already made", "restart")
    assert xla_bridge._backend_factories["xpu"] is f
    assert dlport.jax.installed() == {}


@case
def refuse_missing_surface():
    import dlport.jax
    from jax._src import xla_bridge
    from jax._src.lib import _jax

    f = xla_bridge._backend_factories["xpu"]
    saved = xla_bridge._discover_and_register_pjrt_plugins
    del xla_bridge._discover_and_register_pjrt_plugins
    expect(RuntimeError, lambda: dlport.jax.install("xpu"),
           "_discover_and_register_pjrt_plugins", "nothing was installed")
    xla_bridge._discover_and_register_pjrt_plugins = saved
    real = _jax.dlpack_managed_tensor_to_buffer

    def other(capsule, device):
        """dlpack_managed_tensor_to_buffer(capsule, device) -> ArrayImpl"""

    _jax.dlpack_managed_tensor_to_buffer = other
    try:
        expect(RuntimeError, lambda: dlport.jax.install("xpu"), "another signature")
    finally:
        _jax.dlpack_managed_tensor_to_buffer = real
    assert xla_bridge._backend_factories["xpu"] is f
    assert dlport.jax.installed() == {}
    # Then the real surfaces: installed, twice harmlessly.
    dlport.jax.install("xpu", device_type=1)
    dlport.jax.install("xpu", device_type=1)
    expect(ValueError, lambda: dlport.jax.install("xpu", device_type=2), "once")
    assert dlport.jax.installed() == {"xpu": 1}


@case
def refuse_custom_factory():
    import dlport.jax
    from jax._src import xla_bridge

    reg = xla_bridge._backend_factories["xpu"]
    xla_bridge._backend_factories["xpu"] = type(reg)(lambda: None, reg.priority)
    expect(RuntimeError, lambda: dlport.jax.install("xpu"), "own backend factory")


@case
def import_installs_nothing():
    import dlport  # noqa: F401
    from jax._src import xla_bridge

    assert "dlport.jax" not in sys.modules
    xla_bridge._discover_and_register_pjrt_plugins()
    for name, reg in xla_bridge._backend_factories.items():
        assert "dlport" not in repr(reg.factory), (name, reg.factory)
