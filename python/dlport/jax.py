"""JAX's own arrays on any PJRT plugin platform as DLPack tensors, both ways, with no patch to
JAX.

JAX's DLPack serves a closed list of platforms (cpu, cuda, rocm, oneapi). For any other plugin
("xpu", a new vendor's), dlport interposes a ``PJRT_Api`` table between JAX and the vendor's
table: it forwards every call, and sees JAX's own client and buffers::

    import jax, dlport.jax
    dlport.jax.install("xpu")              # after the plugin registered, before JAX uses it
    x = jax.numpy.arange(6.0)              # on "xpu"
    y = numpy.from_dlpack(dlport.jax.export(x))   # a read-only view of x's memory
    z = dlport.jax.from_dlpack(y)          # a jax.Array viewing the same memory

An export holds JAX's ``PJRT_Buffer`` (an external reference, and JAX's ``Destroy``/``Delete``
of it deferred) until its consumer releases it: ``x.delete()``, donation and garbage
collection never free or overwrite exported memory.

JAX's private surfaces this module uses are named once, in ``_Surfaces``, and each is checked
before use: a JAX that lacks one makes ``install`` refuse, never crash. ``import dlport``
installs nothing.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from typing import Any

from . import _native
from ._native import from_dlpack as _dlport_from_dlpack

__all__ = [
    "Export", "install", "installed", "client", "export", "to_dlpack", "from_dlpack", "stand_in"
]

#: The oldest JAX whose private surfaces this module was checked against.
MIN_JAX = (0, 12)
#: The signature prefix of ``_jax.dlpack_managed_tensor_to_buffer`` this module calls.
_IMPORT_SIGNATURE = (
    "dlpack_managed_tensor_to_buffer(dlpack: types.CapsuleType, device: Device, "
    "stream: int | None, copy: bool | None = ..., dl_device_type: int | None = ..."
)
_KDLCPU = 1
_lock = threading.Lock()
#: platform -> (the interposed table's capsule, the DLPack device type of its memory)
_installed: dict[str, tuple[Any, int]] = {}


class _Surfaces:
    """Every private JAX surface dlport.jax uses, looked up and checked in one place."""

    def __init__(self) -> None:
        if sys.version_info < (3, 12):
            raise RuntimeError(
                f"dlport.jax needs Python 3.12 or newer (JAX {'.'.join(map(str, MIN_JAX))}+ "
                f"does); this is Python {sys.version.split()[0]}"
            )
        try:
            import jax
            from jax._src import xla_bridge
            from jax._src.lib import _jax
        except ImportError as e:
            raise RuntimeError(f"dlport.jax needs JAX {MIN_JAX[0]}.{MIN_JAX[1]}+: {e}") from e
        version = tuple(int(p) for p in re.findall(r"\d+", jax.__version__)[:2])
        if version < MIN_JAX:
            raise RuntimeError(
                f"dlport.jax needs JAX {MIN_JAX[0]}.{MIN_JAX[1]} or newer; this is JAX "
                f"{jax.__version__}"
            )
        self.jax = jax
        self.version = jax.__version__
        need = {
            "jax._src.xla_bridge._backend_factories": (xla_bridge, "_backend_factories", dict),
            "jax._src.xla_bridge._backends": (xla_bridge, "_backends", dict),
            "jax._src.xla_bridge.register_backend_factory": (
                xla_bridge, "register_backend_factory", None),
            "jax._src.xla_bridge.register_plugin": (xla_bridge, "register_plugin", None),
            "jax._src.xla_bridge.make_pjrt_c_api_client": (
                xla_bridge, "make_pjrt_c_api_client", None),
            "jax._src.xla_bridge._discover_and_register_pjrt_plugins": (
                xla_bridge, "_discover_and_register_pjrt_plugins", None),
            "jax._src.lib._jax.get_pjrt_plugin": (_jax, "get_pjrt_plugin", None),
            "jax._src.lib._jax.load_pjrt_plugin": (_jax, "load_pjrt_plugin", None),
            "jax._src.lib._jax.pjrt_plugin_loaded": (_jax, "pjrt_plugin_loaded", None),
            "jax._src.lib._jax.dlpack_managed_tensor_to_buffer": (
                _jax, "dlpack_managed_tensor_to_buffer", None),
        }
        found = {}
        for name, (where, attr, kind) in need.items():
            value = getattr(where, attr, None)
            ok = isinstance(value, kind) if kind is not None else callable(value)
            if not ok:
                raise RuntimeError(
                    f"dlport.jax: JAX {jax.__version__} has no {name} of the kind dlport.jax "
                    f"uses (found {type(value).__name__}); this JAX is not supported: nothing "
                    f"was installed"
                )
            found[attr] = value
        doc = (found["dlpack_managed_tensor_to_buffer"].__doc__ or "").strip()
        if not doc.startswith(_IMPORT_SIGNATURE):
            raise RuntimeError(
                f"dlport.jax: JAX {jax.__version__}'s "
                f"jax._src.lib._jax.dlpack_managed_tensor_to_buffer has another signature "
                f"({doc.splitlines()[0] if doc else 'undocumented'}); nothing was installed"
            )
        self.factories: dict[str, Any] = found["_backend_factories"]
        self.backends: dict[str, Any] = found["_backends"]
        self.register_backend_factory = found["register_backend_factory"]
        self.make_client = found["make_pjrt_c_api_client"]
        self.register_plugin = found["register_plugin"]
        self.discover = found["_discover_and_register_pjrt_plugins"]
        self.get_pjrt_plugin = found["get_pjrt_plugin"]
        self.load_pjrt_plugin = found["load_pjrt_plugin"]
        self.plugin_loaded = found["pjrt_plugin_loaded"]
        self.to_buffer = found["dlpack_managed_tensor_to_buffer"]


_checked: _Surfaces | None = None


def _surfaces() -> _Surfaces:
    """JAX's surfaces for the per-call paths: checked by the last successful install (JAX's
    modules do not change under a running process), else now."""
    global _checked
    if _checked is None:
        _checked = _Surfaces()
    return _checked


def install(platform: str, *, device_type: int | None = None) -> None:
    """Puts dlport's interposed table between JAX and the PJRT plugin registered as
    ``platform``: JAX's backend for it is then made through dlport's table, with the vendor's
    options. Call it after the plugin registered itself (entry-point plugins are discovered
    here) and before anything makes JAX's backends (``jax.devices()``, the first array).
    ``device_type`` is the DLPack code of the platform's memory (default: the platform's
    name's, else kDLExtDev). Installing a platform twice is harmless. Refuses, changing
    nothing, when the backend already exists, the platform is not registered, or this JAX
    lacks a surface dlport uses."""
    with _lock:
        if platform in _installed:
            if device_type is not None and device_type != _installed[platform][1]:
                raise ValueError(
                    f"dlport.jax: {platform!r} is installed with device type "
                    f"{_installed[platform][1]}, not {device_type}: install it once"
                )
            return
        s = _Surfaces()
        s.discover()
        registration = s.factories.get(platform)
        if registration is None:
            raise LookupError(
                f"dlport.jax.install({platform!r}): no PJRT plugin is registered under that "
                f"name (registered: {sorted(s.factories)}); register the vendor's plugin first "
                f"(jax._src.xla_bridge.register_plugin or its jax_plugins entry point)"
            )
        if platform in s.backends:
            raise RuntimeError(
                f"dlport.jax.install({platform!r}): JAX already made the {platform!r} backend, "
                f"so its buffers cannot be seen any more; restart the process and call "
                f"install before anything uses JAX's devices (jax.devices(), an array)"
            )
        factory = registration.factory
        if not (
            isinstance(factory, functools.partial)
            and factory.func is s.make_client
            and factory.args == (platform,)
        ):
            raise RuntimeError(
                f"dlport.jax.install({platform!r}): the plugin registered its own backend "
                f"factory ({factory!r}), not JAX's PJRT plugin factory, so dlport cannot make "
                f"its client in the vendor's place; nothing was installed"
            )
        options = factory.keywords.get("options")
        vendor = s.get_pjrt_plugin(platform)
        ours = _native._jax_interpose(vendor, origin=platform, device_type=device_type)
        internal = f"{platform}_dlport"
        if not s.plugin_loaded(internal):
            s.load_pjrt_plugin(internal, None, ours)
        s.register_backend_factory(
            platform,
            functools.partial(s.make_client, internal, options=options),
            priority=registration.priority,
            fail_quietly=registration.fail_quietly,
            experimental=registration.experimental,
            c_api=ours,
        )
        code = _native._jax_device_type(ours)
        _installed[platform] = (ours, code)
        global _checked
        _checked = s


def stand_in(platform: str, library_path: str, *, stubs: tuple[str, ...] = ()) -> None:
    """Registers the PJRT plugin library at ``library_path`` with JAX as ``platform``, its
    client answering ``PJRT_Client_PlatformName`` with ``platform``: a stand-in for a vendor's
    plugin that JAX's own DLPack does not know, for tests (the XLA CPU plugin, package
    ``xla-cpu-pjrt``, as "xpu"). Its memory is host memory: install it with
    ``device_type=1``. ``stubs`` names functions the stand-in leaves NULL, as plugins that lack
    them do (``PJRT_Buffer_OpaqueDeviceMemoryDataPointer``, the external-reference pair,
    ``PJRT_Client_CreateViewOfDeviceBuffer``)."""
    with _lock:
        s = _Surfaces()
        s.discover()
        if platform in s.factories:
            raise ValueError(f"dlport.jax.stand_in: {platform!r} is registered already")
        vendor = s.load_pjrt_plugin(f"{platform}_stand_in", library_path, None)
        table = _native._jax_interpose(
            vendor,
            origin=f"{platform} (stand-in: {library_path})",
            rename=platform,
            hooks=False,
            stubs=list(stubs),
        )
        s.register_plugin(platform, c_api=table)


def client(platform: str) -> Any:
    """JAX's own PJRT client of an installed platform, as a ``dlport.pjrt.PjrtClient``: compile,
    execute and transfer on the client JAX uses, without a second client of the device. The
    client is borrowed: neither JAX's end of it (``jax.clear_caches``, backends cleared) nor
    this value's destroys it while the other holds it. Makes JAX's backend if it was not made
    yet."""
    with _lock:
        if platform not in _installed:
            raise LookupError(
                f"dlport.jax.client({platform!r}): the platform is not installed "
                f"(installed: {sorted(_installed)}); call dlport.jax.install({platform!r}) first"
            )
        table, code = _installed[platform]
    _surfaces().jax.devices(platform)
    return _native._jax_borrow_client(table, origin=platform, device_type=code)


def installed() -> dict[str, int]:
    """The installed platforms and the DLPack device type of each one's memory."""
    with _lock:
        return {p: t for p, (_, t) in _installed.items()}


#: The clients of installed platforms' backends, learnt as JAX makes them: id -> client (held,
#: so an id is not reused while it is a key).
_clients: dict[int, Any] = {}


def _learner(x: Any) -> Any:
    """``x.unsafe_buffer_pointer`` (the call through which dlport's table learns the buffer)
    when ``x`` is a single-device jax.Array on an installed platform; else an error."""
    try:
        devices = x.sharding.device_set
        learn = x.unsafe_buffer_pointer
    except AttributeError:
        raise TypeError(f"dlport.jax: expected a jax.Array, got {type(x).__name__}") from None
    if len(devices) != 1:
        raise ValueError(
            f"dlport.jax: the array spans {len(devices)} devices; export each addressable "
            f"shard: [dlport.jax.export(s.data) for s in x.addressable_shards]"
        )
    (device,) = devices
    client = device.client
    # The platform by its backend: a plugin's client may report another platform name ("cpu").
    if id(client) not in _clients:
        s = _surfaces()
        with _lock:
            names = sorted(_installed)
            for n in names:
                if n in s.backends:
                    _clients[id(s.backends[n])] = s.backends[n]
        if id(client) not in _clients:
            raise BufferError(
                f"dlport.jax: the array is on {device} of platform {device.platform!r}, whose "
                f"backend dlport.jax.install did not interpose (installed: {names}); use JAX's "
                f"own DLPack for cpu, cuda and rocm"
            )
    return learn


def to_dlpack(x: Any, *, versioned: bool = True, copy: bool | None = None) -> Any:
    """A DLPack capsule of a single-device ``jax.Array`` on an installed platform: a view of
    JAX's own buffer, READ_ONLY (versioned, the default) and kept alive until the consumer
    releases it. Where the plugin lacks a function a view needs (the external-reference pair,
    the device pointer), or with ``copy=True``, it is one host copy (IS_COPIED) where ``copy``
    allows; ``copy=False`` refuses, naming the missing PJRT function."""
    return _native._jax_export(_learner(x), versioned=versioned, copy=copy)[0]


class Export:
    """A DLPack producer of a single-device ``jax.Array`` on an installed platform (what
    :func:`export` returns): ``__dlpack_device__`` and ``__dlpack__`` as the array API asks.
    The first versioned ``__dlpack__`` hands out the export made when this object was (so it
    holds the memory from then on, whatever happens to the array); later calls export the
    array again."""

    __slots__ = ("_learn", "_copy", "_capsule", "_device")

    def __init__(self, x: Any, copy: bool | None = None) -> None:
        self._learn = _learner(x)
        self._copy = copy
        self._capsule, self._device = _native._jax_export(self._learn, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        # `stream` needs nothing: the export awaited the buffer's ready event.
        if dl_device is not None and tuple(dl_device) != self._device:
            raise BufferError(
                f"dlport.jax: dl_device={tuple(dl_device)}: the array is on {self._device}, and "
                f"it is exported from its own device only"
            )
        versioned = max_version is not None and max_version[0] >= 1
        want = self._copy if copy is None else copy
        capsule, self._capsule = self._capsule, None
        if capsule is not None and versioned and want == self._copy:
            return capsule
        return _native._jax_export(self._learn, versioned=versioned, copy=want)[0]


def export(x: Any, *, copy: bool | None = None) -> Export:
    """A DLPack producer (:class:`Export`) of a single-device ``jax.Array`` on an installed
    platform, exported now (a view, or a copy as :func:`to_dlpack` says): any DLPack consumer
    takes it (``numpy.from_dlpack``, ``torch.from_dlpack``, ``dlport.from_dlpack``); its
    device is the platform's DLPack device type and the device's place among its devices."""
    return Export(x, copy)


def from_dlpack(t: Any, device: Any = None, *, copy: bool | None = None) -> Any:
    """A ``jax.Array`` viewing any DLPack producer's tensor on an installed platform's device
    (host memory for a platform installed with ``device_type=1``), without a copy. dlport
    checks what JAX's entry point does not: the device, alignment (64 bytes), a layout PJRT
    takes (compact row-major), and READ_ONLY memory, which is copied (host memory, ``copy=None``
    or ``True``) or refused (``copy=False``, or device memory): never handed to a program that
    may write it."""
    s = _surfaces()
    advertised = getattr(t, "__dlpack_device__", None)
    kind = advertised()[0] if advertised is not None else _KDLCPU
    with _lock:
        device_memory = kind != _KDLCPU and any(c == kind for _, c in _installed.values())
    if device_memory:
        # Memory dlport has no backend for (the platform's own): the capsule is checked here.
        capsule = t.__dlpack__(max_version=(1, 3))
        dev_type, dev_id, flags, address, row_major = _native._jax_capsule_facts(capsule)
        why = None
        if flags & 1:
            why = "READ_ONLY (device memory cannot be copied here)"
        elif not row_major:
            why = "not compact row-major (PJRT views take only that layout)"
        elif address % 64:
            why = f"at {address:#x}, not 64-byte aligned"
        if why is not None:
            raise BufferError(f"dlport.jax.from_dlpack: the tensor on device {dev_type} is {why}")
    else:
        tensor = _dlport_from_dlpack(t, copy=copy, layout="compact", align=64)
        if tensor.readonly:
            if copy is False:
                raise BufferError(
                    "dlport.jax.from_dlpack: the tensor is READ_ONLY and copy=False; a JAX view "
                    "may be donated and written: pass copy=None or copy=True"
                )
            tensor = _dlport_from_dlpack(tensor, copy=True, layout="compact", align=64)
        dev_type, dev_id = tensor.__dlpack_device__()
        capsule = None
    with _lock:
        candidates = [p for p, (_, code) in _installed.items() if code == dev_type]
    if device is not None:
        if not any(s.backends.get(name) is device.client for name in candidates):
            raise BufferError(
                f"dlport.jax.from_dlpack: device {device} is on platform {device.platform!r}, "
                f"whose memory is not the tensor's (device type {dev_type}); installed for it: "
                f"{candidates}"
            )
        target = device
    else:
        if not candidates:
            raise BufferError(
                f"dlport.jax.from_dlpack: no installed platform has memory of device type "
                f"{dev_type} (installed: {installed()})"
            )
        devices = s.jax.devices(candidates[0])
        index = 0 if dev_type == _KDLCPU else dev_id
        if not 0 <= index < len(devices):
            raise BufferError(
                f"dlport.jax.from_dlpack: device id {dev_id} is not one of {candidates[0]!r}'s "
                f"{len(devices)} devices"
            )
        target = devices[index]
    if capsule is None:
        capsule = tensor.__dlpack__(max_version=(1, 3))
    elif device is not None and device != s.jax.devices(candidates[0])[dev_id]:
        raise BufferError(
            f"dlport.jax.from_dlpack: the tensor is on device {dev_id} of {candidates[0]!r}, "
            f"not {device}: device memory is viewed where it is"
        )
    return s.to_buffer(capsule, target, None, False, dev_type)
