"""vaed_client.Client: decode through a running vaed daemon, zero-copy.

Memory model (DESIGN.md §2): latents and decoded outputs never travel on
the control socket. They live in POSIX shared-memory regions that this
process creates and registers with the daemon once; the daemon maps them
and reads and writes in place.

* Inputs: a latent that already lies in one of this client's regions (see
  :meth:`Client.alloc_latent`) is used in place. Any other CPU array (numpy,
  an object with the buffer protocol, or one with ``__dlpack__`` such as a
  CPU ``torch.Tensor``) is copied once into a staging region that the client
  keeps and reuses.
* Outputs: ``DecodeResult.frames`` and ``DecodeResult.audio`` are numpy
  arrays that view the client's output region: no copy. They stay valid
  (the memory stays mapped while any view exists), but their *contents* are
  overwritten by the next :meth:`Client.decode` on the same client. Pass
  ``copy=True`` (or call ``result.copy()``) to keep them.

This module never imports torch; DLPack objects are read through
``numpy.from_dlpack``.
"""

from __future__ import annotations

import collections
import math
import numbers
import os
import re
import stat
import threading
import weakref
from dataclasses import dataclass, field
from typing import (Any, Callable, Deque, Dict, Iterable, List, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from . import _core
from .errors import NotFound, ValidationError, VaedError

__all__ = ["Client", "SharedRegion", "DecodeResult", "DEFAULT_SOCKET"]

#: The daemon's default control socket (``VAED_SOCKET`` overrides it for
#: :class:`Client` when no socket is given).
DEFAULT_SOCKET: str = _core.DEFAULT_SOCKET

# numpy dtype -> the protocol's dtype names (vaed::DTypeName).
_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
                np.dtype(np.uint8): "uint8"}
_NUMPY_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                 "uint8": np.dtype(np.uint8)}
_PROTO_DTYPES = {"DTYPE_FLOAT32": "float32", "DTYPE_FLOAT16": "float16", "DTYPE_UINT8": "uint8",
                 "DTYPE_BFLOAT16": "bfloat16"}

# Output formats (vaed.v1.OutputFormat): name -> wire value.
_FORMATS = {"uint8": 1, "float32": 2, "float32_unit": 3}
# stack_tiling / compile knobs (vaed.v1.StackTiling / Compile): value -> wire value.
_TRISTATE = {None: 0, "default": 0, "off": 1, False: 1, "on": 2, True: 2, "auto": 3}

# Byte alignment of every tensor the client places in a region (a cache
# line; also enough for every dtype).
_ALIGN = 64

# DLPack device types (dlpack.h DLDeviceType).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13

TensorLike = Any  # numpy array, buffer-protocol object, or object with __dlpack__ (CPU)


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


# Every Client, so that a forked child gets fresh locks: one a thread of the
# parent held at fork() would never be released there (the C++ client then
# tells the child to connect its own Client).
_CLIENTS: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._lock = threading.RLock()
        client._tls = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_SEGMENT_NAME = re.compile(r"^vaed-(\d+)-\d+-[0-9a-f]+$")


def sweep_stale_segments(directory: str = "/dev/shm") -> List[str]:
    """Unlinks this user's client segments (``vaed-<pid>-<n>-<hex>``, the
    names the client library gives them) whose creating process is gone:
    what a worker killed by SIGKILL or an unhandled SIGTERM leaves behind.
    Segments of live processes, of other users and other names are never
    touched. Returns the names removed. :class:`Client` runs it when it
    connects unless ``sweep_stale=False`` (use that when processes of this
    uid in another PID namespace share this /dev/shm)."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    uid = os.getuid()
    for name in names:
        m = _SEGMENT_NAME.match(name)
        if m is None:
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if st.st_uid != uid or not stat.S_ISREG(st.st_mode):
                continue
            os.kill(int(m.group(1)), 0)  # alive (or not ours to signal): keep
        except ProcessLookupError:
            try:
                os.unlink(path)
                removed.append(name)
            except OSError:
                pass
        except (OSError, OverflowError, ValueError):
            continue
    return removed


class SharedRegion:
    """A POSIX shared-memory segment this process owns, registered with the
    daemon (host memory, zero-filled at creation).

    ``nbytes`` is the size in bytes, ``name`` the shm name (no leading
    ``/``), ``region_id`` the id the daemon gave it (stable across
    reconnects: the client re-registers the segment with a restarted
    daemon). The segment is unlinked when the last reference to it goes:
    numpy views made by :meth:`ndarray` keep it mapped.
    """

    def __init__(self, core_region: "_core.Region", region_id: int) -> None:
        self._core = core_region
        self.region_id = region_id
        self.registered = True

    @property
    def nbytes(self) -> int:
        return self._core.nbytes

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def address(self) -> int:
        """Virtual address of the first byte in this process."""
        return self._core.address

    def ndarray(self, shape: Sequence[int], dtype: Any = np.float32, offset: int = 0) -> np.ndarray:
        """A C-contiguous numpy view of ``shape`` elements of ``dtype`` starting
        ``offset`` bytes into the region (no copy; writes go to the region).
        Raises ValidationError when it does not fit."""
        dt = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize if shape else dt.itemsize
        if offset < 0 or offset + nbytes > self.nbytes:
            raise ValidationError(
                f"region '{self.name}': {nbytes} bytes at offset {offset} do not fit in its "
                f"{self.nbytes} bytes", code=4, code_name="out_of_range")
        return np.ndarray(shape, dtype=dt, buffer=self._core, offset=offset)

    def offset_of(self, array: np.ndarray) -> Optional[int]:
        """Byte offset of ``array``'s data in this region when the whole
        array lies inside it and is C-contiguous; else None."""
        if not array.flags.c_contiguous:
            return None
        start = array.__array_interface__["data"][0]
        if start < self.address or start + array.nbytes > self.address + self.nbytes:
            return None
        return start - self.address

    def __repr__(self) -> str:
        return f"SharedRegion(id={self.region_id}, name='{self.name}', nbytes={self.nbytes})"


@dataclass
class DecodeResult:
    """What :meth:`Client.decode` returns.

    frames
        Video output, or None for an audio-only request. ``format="uint8"``:
        uint8 ``[frames, height_px, width_px, 3]`` RGB (round half to even of
        clamp(x, 0, 1) * 255). ``"float32"``: float32 ``[frames, 3,
        height_px, width_px]``, the decoder's raw output (H3: ImageNet-
        normalised RGB, not clamped). ``"float32_unit"``: float32 ``[frames,
        3, height_px, width_px]`` RGB in [0, 1] after the model's official
        post-processing (H3: inverse ImageNet normalisation and clamp;
        TAEF2: its raw output, unclamped).
    audio
        float32 ``[channels, samples]`` planar waveform (H3: 32000 Hz,
        channels 1 mono or 2 = left, right), or None without an audio latent.
    timings
        Seconds per component, e.g. ``decode``, ``video_vae.decode_latent``,
        ``audio_vae.decode_latent``, ``video_vae.tile_decode``,
        ``video_vae.tile_merge`` (wall clock, measured by the daemon).
    info
        The daemon's whole reply (``vaed.v1.DecodeReply`` as a dict keyed by
        proto field names): shapes, model, ``warm`` (False for the first
        decode of a shape bucket), ``profile``, ``tiling`` (windows, tiles,
        stack and plan decisions), ``compile_decision``, ``audio`` (sample
        rate, seconds), ``group``, ``peak_rss_bytes``, ...
    inputs_in_place
        For each latent sent: True when the daemon read it in place from one
        of this client's regions, False when it was copied into a staging
        region first.
    """

    frames: Optional[np.ndarray]
    audio: Optional[np.ndarray]
    timings: Dict[str, float]
    info: Dict[str, Any]
    inputs_in_place: Dict[str, bool] = field(default_factory=dict)

    @property
    def warm(self) -> bool:
        """False for the first decode of this shape bucket on the daemon."""
        return bool(self.info.get("warm", False))

    @property
    def sample_rate(self) -> Optional[int]:
        """Audio sample rate in Hz, or None without audio."""
        audio = self.info.get("audio")
        return int(audio["sample_rate_hz"]) if audio else None

    @property
    def fps(self) -> float:
        """Video frames per second the daemon used (the request's or the model's)."""
        return float(self.info.get("fps", 0.0))

    def copy(self) -> "DecodeResult":
        """A result whose arrays own their memory (safe past the next decode)."""
        return DecodeResult(
            frames=None if self.frames is None else self.frames.copy(),
            audio=None if self.audio is None else self.audio.copy(),
            timings=dict(self.timings), info=self.info,
            inputs_in_place=dict(self.inputs_in_place))


def _invalid(message: str) -> ValidationError:
    return ValidationError(message, code=1, code_name="invalid_argument")


def _real(value: Any, name: str, low: float, high: float, *, low_open: bool = True) -> float:
    """``value`` as a float in (low, high] (or [low, high] with low_open
    False); numpy scalars count, bools do not."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _invalid(f"{name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x > high or x < low or (low_open and x == low):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise _invalid(f"{name} must be in {interval}, got {value!r}")
    return x


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise _invalid(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _text(value: Any, name: str) -> str:
    """A str option; None = "" (the daemon's default)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a str or None, got {value!r}")
    return value


def _count(value: Any, name: str, high: int) -> int:
    """An int in [0, high] (numpy integers count, bools do not)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise _invalid(f"{name} must be an int, got {value!r}")
    if not 0 <= int(value) <= high:
        raise _invalid(f"{name} must be in [0, {high}], got {value!r}")
    return int(value)


def _shape(value: Any, name: str) -> List[int]:
    """A latent shape: a sequence of positive ints whose element count fits int64."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise _invalid(f"{name} must be a non-empty sequence of ints, got {value!r}")
    dims = [_count(d, f"{name}[{i}]", 2**63 - 1) for i, d in enumerate(value)]
    if any(d == 0 for d in dims):
        raise _invalid(f"{name} {dims} has a zero dim; every dim must be positive")
    if math.prod(dims) >= 2**63:
        raise _invalid(f"{name} {dims} has more than 2^63 elements")
    return dims


# A managed (staging / output) region larger than this and 4x what a
# request needs is replaced by a smaller one.
_KEEP_BYTES = 64 << 20

# Longest timeout the C++ client takes (milliseconds in an int).
_MAX_TIMEOUT_S = (2**31 - 1) / 1000.0


def _as_host_array(obj: TensorLike, field_name: str) -> np.ndarray:
    """A numpy array viewing ``obj``'s CPU memory (no copy for numpy arrays,
    buffer-protocol objects and CPU DLPack producers). Raises
    ValidationError for CUDA tensors and unsupported objects."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        raise ValidationError(
            f"{field_name}: a CUDA array (__cuda_array_interface__); this vaed daemon decodes "
            "from host shared memory: pass a CPU array (e.g. tensor.cpu())",
            code=5, code_name="failed_precondition")
    if hasattr(obj, "__dlpack__"):
        try:
            device = int(obj.__dlpack_device__()[0]) if hasattr(obj, "__dlpack_device__") \
                else _DL_CPU
        except Exception as e:  # e.g. a torch tensor on the meta device
            raise _invalid(f"{field_name}: cannot tell where its memory is (__dlpack_device__: "
                           f"{e})") from e
        if device in (_DL_CUDA, _DL_CUDA_MANAGED):
            raise ValidationError(
                f"{field_name}: a CUDA tensor (DLPack device {device}); this vaed daemon decodes "
                "from host shared memory: pass a CPU tensor (e.g. tensor.cpu())",
                code=5, code_name="failed_precondition")
        if device not in (_DL_CPU, _DL_CUDA_HOST):
            raise _invalid(f"{field_name}: DLPack device type {device} is not host memory")
        # torch keeps negation as a bit (e.g. z.conj().imag) that its DLPack
        # export (1.13) drops: materialise it, or the daemon would see -x.
        is_neg = getattr(obj, "is_neg", None)
        try:
            if callable(is_neg) and is_neg():
                obj = obj.resolve_neg()
            return np.from_dlpack(obj)
        except (TypeError, RuntimeError, BufferError, ValueError) as e:
            hint = ""
            if "dtype" in str(e).lower():
                hint = ("; vaed takes float32, float16 and uint8 latents: convert it first "
                        "(e.g. tensor.float())")
            raise ValidationError(f"{field_name}: cannot read it through DLPack ({e}){hint}",
                                  code=1, code_name="invalid_argument") from e
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        pass
    raise ValidationError(
        f"{field_name}: {type(obj).__name__} is not an array (need a numpy array, a buffer, or "
        "an object with __dlpack__ on the CPU)", code=1, code_name="invalid_argument")


def _dtype_name(array: np.ndarray, field_name: str) -> str:
    name = _DTYPE_NAMES.get(array.dtype)
    if name is None:
        raise ValidationError(
            f"{field_name}.dtype {array.dtype} is not one vaed takes (float32, float16, uint8); "
            "convert it, e.g. .astype(numpy.float32)", code=1, code_name="invalid_argument")
    return name


def _to_ms(seconds: Optional[float], field_name: str) -> int:
    """A deadline in whole milliseconds (rounded up); None = 0 (none)."""
    if seconds is None:
        return 0
    return math.ceil(_real(seconds, field_name, 0.0, (2**32 - 1) / 1000.0) * 1000.0)


def _tristate(value: Union[None, bool, str], field_name: str) -> int:
    try:
        return _TRISTATE[value.lower() if isinstance(value, str) else
                         bool(value) if isinstance(value, np.bool_) else value]
    except (KeyError, TypeError):
        raise ValidationError(f"{field_name} {value!r} is not one of None, 'default', 'off', "
                              "'on', 'auto' (or a bool)", code=1, code_name="invalid_argument")


class Client:
    """A connection to the vaed daemon (one Hello; reconnects by itself).

    ``socket``: path of the daemon's Unix socket; default ``$VAED_SOCKET``,
    else ``/run/vaed/vaed.sock``. Timeouts are in seconds:
    ``connect_timeout`` (connection + Hello), ``request_timeout`` (any reply;
    0 = wait forever), ``reconnect_timeout`` (how long a call may spend
    getting back to a daemon that restarted or went away, re-registering
    this client's regions; 0 = never reconnect), ``heartbeat_interval``
    (while waiting for a reply; a dead daemon is noticed after about 4 of
    them).

    Use as a context manager, or call :meth:`close`. Thread-safe: calls from
    several threads are serialized (one decode at a time per Client; use one
    Client per thread for concurrent requests).

    Raises DaemonUnavailable (no daemon, no answer), VersionMismatch,
    PermissionDenied, Quarantined, ValidationError (bad options).
    """

    def __init__(self, socket: Optional[str] = None, *, client_name: Optional[str] = None,
                 connect_timeout: float = 3.0, request_timeout: float = 600.0,
                 reconnect_timeout: float = 30.0, heartbeat_interval: float = 1.0,
                 heartbeats: bool = True, sweep_stale: bool = True) -> None:
        if socket is None:
            socket = os.environ.get("VAED_SOCKET") or DEFAULT_SOCKET
        if isinstance(socket, os.PathLike):
            socket = os.fspath(socket)
        if not isinstance(socket, str) or not socket:
            raise _invalid(f"socket must be a path (str), got {socket!r}")
        if client_name is None:
            client_name = f"python-{os.getpid()}"
        client_name = _text(client_name, "client_name")
        timeouts = {name: _real(value, name, 0.0, _MAX_TIMEOUT_S, low_open=False)
                    for name, value in (("connect_timeout", connect_timeout),
                                        ("request_timeout", request_timeout),
                                        ("reconnect_timeout", reconnect_timeout))}
        heartbeat_s = _real(heartbeat_interval, "heartbeat_interval", 0.0, _MAX_TIMEOUT_S)
        heartbeats = _bool(heartbeats, "heartbeats")
        if _bool(sweep_stale, "sweep_stale"):
            sweep_stale_segments()
        self.socket = socket
        self._lock = threading.RLock()
        # Per thread: set while this thread runs a progress callback.
        self._tls = threading.local()
        self._core = _core.Client(
            socket=socket, client_name=client_name,
            connect_timeout_ms=math.ceil(timeouts["connect_timeout"] * 1000),
            request_timeout_ms=math.ceil(timeouts["request_timeout"] * 1000),
            reconnect_timeout_ms=math.ceil(timeouts["reconnect_timeout"] * 1000),
            wait_heartbeat_interval_ms=max(1, round(heartbeat_s * 1000)),
            heartbeats=heartbeats)
        self._regions: Dict[int, SharedRegion] = {}
        # Regions the client manages: staging for copied latents (by field)
        # and the output region.
        self._staging: Dict[str, SharedRegion] = {}
        self._output: Optional[SharedRegion] = None
        # Plans by request shape: (video out shape, dtype, audio out shape).
        self._plans: Dict[Tuple, Dict[str, Any]] = {}
        self._plans_reconnects = 0
        # Region ids to unregister at the next call: alloc_latent arrays that
        # were collected (appended by finalizers) and retired managed regions.
        self._pending_free: Deque[int] = collections.deque()
        # Ids of the regions the client manages (staging, output, retired):
        # never read in place, whatever array lies in them.
        self._managed: set = set()
        _CLIENTS.add(self)

    def _check_not_in_callback(self) -> None:
        """A progress callback runs while this Client's call holds its
        connection: a call from it would wait for itself forever."""
        if getattr(self._tls, "in_progress", False):
            raise ValidationError(
                "this Client was called from its own progress callback; the callback runs "
                "while the decode holds the connection (use another Client there)",
                code=5, code_name="failed_precondition")

    # -- lifetime -----------------------------------------------------------

    def close(self) -> None:
        """Says Goodbye; the daemon unmaps this client's regions. Arrays that
        view them stay valid in this process. Idempotent."""
        self._check_not_in_callback()
        with self._lock:
            self._core.close()
            for region in self._regions.values():
                region.registered = False
            self._regions.clear()
            self._staging.clear()
            self._output = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- identity -----------------------------------------------------------

    @property
    def client_id(self) -> int:
        """The id the daemon gave this client (changes when it reconnects)."""
        return self._core.client_id

    @property
    def reconnects(self) -> int:
        """How many times the client got back to the daemon after losing it."""
        return self._core.reconnects

    def hello(self) -> Dict[str, Any]:
        """The daemon's latest HelloReply as a dict (version, limits, heartbeat settings)."""
        return self._core.hello()

    # -- regions ------------------------------------------------------------

    def register_region(self, nbytes: int) -> SharedRegion:
        """Creates a shared-memory region of ``nbytes`` bytes and registers it
        with the daemon (once; the id survives reconnects). Raises
        ValidationError (0 bytes), ResourceExhausted (daemon's region quota),
        DaemonUnavailable."""
        self._check_not_in_callback()
        nbytes = _count(nbytes, "nbytes", 2**63 - 1)
        if nbytes == 0:
            raise _invalid("nbytes must be positive, got 0")
        with self._lock:
            core_region = _core.Region(int(nbytes))
            region_id = self._core.register_region(core_region)
            region = SharedRegion(core_region, region_id)
            self._regions[region_id] = region
            return region

    def unregister_region(self, region: SharedRegion) -> None:
        """Unregisters ``region``; the daemon unmaps it. Views of it stay valid
        in this process until they are gone."""
        self._check_not_in_callback()
        with self._lock:
            if self._regions.pop(region.region_id, None) is None:
                return
            region.registered = False
            for key, staged in list(self._staging.items()):
                if staged is region:
                    del self._staging[key]
            if self._output is region:
                self._output = None
            self._managed.discard(region.region_id)
            self._core.unregister_region(region.region_id)

    def alloc_latent(self, shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
        """A zero-filled numpy array of ``shape`` and ``dtype`` in a region of
        its own, registered with the daemon. Write the latent into it (e.g.
        ``np.copyto(buf, x)`` or ``torch.from_numpy(buf).copy_(t)``) and pass
        it to :meth:`decode`: the daemon reads it in place, no copy.
        Layout: C-contiguous, e.g. H3 video float32 [1, 24, T, h, w]
        (T latent frames, h x w latent cells), H3 audio float32
        [channels, 32, T], TAEF2 float32 [N, 32, h, w]."""
        try:
            dt = np.dtype(dtype)
        except TypeError as e:
            raise _invalid(f"alloc_latent: dtype {dtype!r} is not a numpy dtype") from e
        _dtype_name(np.empty(0, dt), "alloc_latent")
        shape = _shape(shape, "alloc_latent shape")
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes >= 2**63:
            raise _invalid(f"alloc_latent shape {shape} of {dt} needs {nbytes} bytes, over 2^63")
        with self._lock:
            self._free_pending()
            region = self.register_region(nbytes)
        array = region.ndarray(shape, dt)
        # When the array and every view of it are gone, the region is
        # unregistered at this client's next call (not from the garbage
        # collector's thread, which may interrupt a call of this client).
        weakref.finalize(array, self._pending_free.append, region.region_id)
        return array

    def free_latent(self, array: np.ndarray) -> None:
        """Unregisters the region of an :meth:`alloc_latent` array now
        (otherwise that happens once the array and its views are gone).
        The array must not be used for decodes afterwards. Raises
        ValidationError for an array that is not in one of this client's
        regions."""
        self._check_not_in_callback()
        with self._lock:
            found = self._find_region(array) if isinstance(array, np.ndarray) else None
            if found is None:
                raise ValidationError("free_latent: the array is not in a region of this client",
                                      code=1, code_name="invalid_argument")
            self.unregister_region(found[0])

    def _free_pending(self) -> None:
        """Unregisters the regions of collected alloc_latent arrays and of
        retired managed regions (lock held). The client forgets them even
        when the daemon cannot be told (it then drops them with the client)."""
        while self._pending_free:
            region = self._regions.get(self._pending_free.popleft())
            if region is not None:
                try:
                    self.unregister_region(region)
                except VaedError:
                    pass

    @property
    def output_region(self) -> Optional[SharedRegion]:
        """The region the latest decode wrote its output into (None before
        the first decode)."""
        return self._output

    def _find_region(self, array: np.ndarray) -> Optional[Tuple[SharedRegion, int]]:
        for region in self._regions.values():
            offset = region.offset_of(array)
            if offset is not None:
                return region, offset
        return None

    def _place_input(self, obj: TensorLike, field_name: str) -> Tuple[Tuple, bool]:
        """(region_id, offset, dtype, shape) of a latent, and whether it is
        used in place. Copies it into the field's staging region otherwise."""
        array = _as_host_array(obj, field_name)
        dtype = _dtype_name(array, field_name)
        shape = [int(d) for d in array.shape]
        found = self._find_region(array)
        # The output region is rewritten by this very decode, a staging
        # region by the other latent's copy, and a retired one may still be
        # written by an abandoned decode: an input there (say, a previous
        # result) is copied, never read in place.
        if found is not None and found[0].region_id not in self._managed:
            region, offset = found
            return (region.region_id, offset, dtype, shape), True
        region = self._managed_region(self._staging.get(field_name), array.nbytes)
        self._staging[field_name] = region
        np.copyto(region.ndarray(array.shape, array.dtype), array, casting="no")
        return (region.region_id, 0, dtype, shape), False

    def _managed_region(self, region: Optional[SharedRegion], need: int) -> SharedRegion:
        """`region` when it holds `need` bytes and is not oversized (more
        than 64 MiB and 4x the need: one huge request must not pin its
        memory for the client's life); else a new managed region."""
        need = _align(max(need, 1))
        if region is not None and need <= region.nbytes and \
                (region.nbytes <= _KEEP_BYTES or region.nbytes <= 4 * need):
            return region
        if region is not None:
            self.unregister_region(region)
        region = self.register_region(need)
        self._managed.add(region.region_id)
        return region

    def _retire_managed(self) -> None:
        """After a decode that may still be running on the daemon (its call
        was interrupted or timed out): the next decode gets fresh staging
        and output regions, so the abandoned one cannot overwrite its result.
        The old ones are unregistered at the next call."""
        for region in [self._output, *self._staging.values()]:
            if region is not None:
                self._pending_free.append(region.region_id)
        self._output = None
        self._staging.clear()

    def _drop_managed(self) -> None:
        """Forgets the managed regions (a restarted daemon could not register
        them again, e.g. /dev/shm was cleaned): the next placement makes new
        ones."""
        for region in [self._output, *self._staging.values()]:
            if region is not None:
                try:
                    self.unregister_region(region)
                except VaedError:
                    pass
        self._output = None
        self._staging.clear()

    # -- requests -----------------------------------------------------------

    @staticmethod
    def _options(model: Any, format: Any, fps: Any, profile: Any, stack_tiling: Any,
                 compile: Any, deadline: Any, group_size: Any, independent_lengths: Any,
                 inject_faults: Any, tiling: Any, progress: Any) -> Dict[str, Any]:
        """The request's options, checked here (each error names its
        argument), as _core.DecodeArgs keywords."""
        if not isinstance(format, str) or format not in _FORMATS:
            raise _invalid(f"format {format!r} is not one of {', '.join(_FORMATS)}")
        if isinstance(inject_faults, (str, bytes)) or not isinstance(inject_faults, Iterable):
            raise _invalid(f"inject_faults must be a list of fault names, got {inject_faults!r}")
        faults = list(inject_faults)
        if not all(isinstance(f, str) for f in faults):
            raise _invalid(f"inject_faults must hold str names, got {faults!r}")
        if tiling is not None:
            if isinstance(tiling, (str, bytes)) or not isinstance(tiling, Sequence) or \
                    len(tiling) != 2:
                raise _invalid(f"tiling must be (tile_latent, overlap_latent), got {tiling!r}")
            tiling = (_count(tiling[0], "tiling[0] (tile_latent)", 2**32 - 1),
                      _count(tiling[1], "tiling[1] (overlap_latent)", 2**32 - 1))
        if progress is not None and not callable(progress):
            raise _invalid(f"progress must be callable or None, got {progress!r}")
        return dict(
            model=_text(model, "model"), format=_FORMATS[format],
            stack_tiling=_tristate(stack_tiling, "stack_tiling"),
            compile=_tristate(compile, "compile"),
            fps=0.0 if fps is None else _real(fps, "fps (frames per second)", 0.0, 1000.0),
            independent_lengths=_bool(independent_lengths, "independent_lengths"),
            profile=_text(profile, "profile"), deadline_ms=_to_ms(deadline, "deadline"),
            group_size=_count(group_size, "group_size", 2**32 - 1), inject_faults=faults,
            tiling=tiling, progress=progress)

    @staticmethod
    def _plan_key(options: Dict[str, Any], shapes: Dict[str, Tuple[str, List[int]]]) -> Tuple:
        return (options["model"], options["format"], options["fps"],
                options["independent_lengths"],
                tuple((k, d, tuple(s)) for k, (d, s) in sorted(shapes.items())))

    def _plan_args(self, options: Dict[str, Any],
                   shapes: Dict[str, Tuple[str, List[int]]]) -> "_core.DecodeArgs":
        def ref(name: str) -> Optional[Tuple]:
            return (0, 0, *shapes[name]) if name in shapes else None
        return _core.DecodeArgs(
            model=options["model"], latent=ref("video_latent"), audio_latent=ref("audio_latent"),
            format=options["format"], fps=options["fps"],
            independent_lengths=options["independent_lengths"])

    def plan(self, video_latent: Optional[TensorLike] = None,
             audio_latent: Optional[TensorLike] = None, *, model: Optional[str] = "",
             format: str = "uint8", fps: Optional[float] = None,
             independent_lengths: bool = False) -> Dict[str, Any]:
        """What decoding these latents would produce, without decoding or
        reading their memory: the DecodeReply dict with ``output_shape``,
        ``output_bytes``, ``frames``, ``height_px``, ``width_px`` and
        ``audio.output_shape``. Latents may be arrays or shape tuples
        (float32 assumed). Raises as :meth:`decode`."""
        self._check_not_in_callback()
        options = self._options(model, format, fps, None, None, None, None, 0,
                                independent_lengths, (), None, None)
        shapes: Dict[str, Tuple[str, List[int]]] = {}
        for name, obj in (("video_latent", video_latent), ("audio_latent", audio_latent)):
            if obj is None:
                continue
            if isinstance(obj, (tuple, list)):
                shapes[name] = ("float32", _shape(obj, f"{name} shape"))
            else:
                array = _as_host_array(obj, name)
                shapes[name] = (_dtype_name(array, name), [int(d) for d in array.shape])
        if not shapes:
            raise _invalid("plan needs video_latent, audio_latent or both")
        with self._lock:
            return self._core.plan(self._plan_args(options, shapes))

    def _cached_plan(self, options: Dict[str, Any],
                     shapes: Dict[str, Tuple[str, List[int]]]) -> Dict[str, Any]:
        """The daemon's plan for these shapes (its validation of them, and
        the output sizes), cached until the client reconnects."""
        if self._core.reconnects != self._plans_reconnects:  # the daemon may have changed
            self._plans.clear()
            self._plans_reconnects = self._core.reconnects
        key = self._plan_key(options, shapes)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._core.plan(self._plan_args(options, shapes))
            if len(self._plans) >= 64:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _prepare(self, arrays: Dict[str, np.ndarray], plan: Dict[str, Any],
                 options: Dict[str, Any]) -> Tuple["_core.DecodeArgs", Dict[str, Any]]:
        """Places the latents (in place or into staging) and the outputs;
        returns the request and where its outputs lie."""
        in_place: Dict[str, bool] = {}
        placed: Dict[str, Tuple] = {}
        for name, array in arrays.items():
            placed[name], in_place[name] = self._place_input(array, name)
        has_video, has_audio = "video_latent" in arrays, "audio_latent" in arrays
        video_shape = [int(d) for d in plan.get("output_shape", [])] if has_video else None
        video_dtype = _PROTO_DTYPES.get(plan.get("output_dtype", ""), "uint8")
        video_bytes = int(plan.get("output_bytes", 0)) if has_video else 0
        audio_shape = ([int(d) for d in plan["audio"]["output_shape"]]
                       if has_audio and "audio" in plan else None)
        audio_bytes = int(plan["audio"]["output_bytes"]) if audio_shape else 0
        audio_offset = _align(video_bytes)
        self._output = self._managed_region(self._output, audio_offset + audio_bytes)
        out = self._output
        args = _core.DecodeArgs(
            latent=placed.get("video_latent"), audio_latent=placed.get("audio_latent"),
            output=(out.region_id, 0, video_dtype, video_shape) if has_video else None,
            audio_output=(out.region_id, audio_offset, "float32", audio_shape)
            if has_audio else None, **options)
        where = dict(region=out, video_shape=video_shape, video_dtype=video_dtype,
                     audio_shape=audio_shape, audio_offset=audio_offset, in_place=in_place)
        return args, where

    def decode(self, video_latent: Optional[TensorLike] = None,
               audio_latent: Optional[TensorLike] = None, *, model: Optional[str] = "",
               format: str = "uint8", fps: Optional[float] = None,
               profile: Optional[str] = None, stack_tiling: Union[None, bool, str] = None,
               compile: Union[None, bool, str] = None, deadline: Optional[float] = None,
               group_size: int = 0, independent_lengths: bool = False, copy: bool = False,
               progress: Optional[Callable[[Dict[str, Any]], None]] = None,
               inject_faults: Iterable[str] = (),
               tiling: Optional[Tuple[int, int]] = None) -> DecodeResult:
        """Decodes a video/image latent and/or an audio latent through the daemon.

        Latents: numpy arrays, buffer-protocol objects or CPU DLPack objects
        (torch tensors), C-contiguous or not (non-contiguous ones are copied).
        H3 video: float32 ``[1, 24, T, h, w]`` (T latent frames; h, w latent
        cells, 16 px each); H3 audio: float32 ``[channels, 32, T]`` at 40
        latent frames per second; TAEF2: float32 ``[N, 32, h, w]`` (8 px per
        cell). A latent inside one of this client's regions (``alloc_latent``)
        is read in place; others are copied once into a staging region.

        ``model``: "" = the daemon's default. ``format``: "uint8" (frames
        uint8 [F, H, W, 3]), "float32" (raw decoder output [F, 3, H, W]) or
        "float32_unit" ([F, 3, H, W] in [0, 1]). ``fps``: video frames per
        second for durations and the A/V length rule (audio latent frames
        must equal round(frames / fps * 40) for H3 unless
        ``independent_lengths``); None = the model's. ``profile``: "safe",
        "optimized", "diagnostic" or "student" within what the daemon allows;
        None = its default. ``stack_tiling`` / ``compile``: None, "off",
        "on", "auto" (same bytes either way). ``deadline``: seconds from when
        the daemon receives the request, queue time included. ``group_size``:
        VAE ranks that decode the video tile-parallel (0 = the daemon's
        default). ``copy``: return arrays that own their memory.
        ``progress``: called on this thread while the daemon decodes, once per
        temporal window (H3 video; TAEF2: per frame batch) and once for the
        audio, with a dict: ``stage`` ("video" / "audio"), ``done`` and
        ``total`` units of the stage, ``unit`` ("window", "frames", "audio"),
        ``fraction`` of the whole request in [0, 1] (the last call has 1.0),
        ``elapsed_seconds``, ``eta_seconds``, ``tiles_done``,
        ``tiles_total``. It must not call this Client; an exception in it is
        reported (sys.unraisablehook) and the decode goes on.
        ``inject_faults`` (testing; daemon must allow it) and ``tiling``
        ((tile_latent, overlap_latent) cells; profile "diagnostic") are
        passed through.

        Returns a :class:`DecodeResult` whose arrays view the output region
        unless ``copy``. Raises ValidationError (a field broke a rule; the
        message names it), NotFound (model), Busy / Quarantined (with
        ``retry_after``), DeadlineExceeded, ResourceExhausted,
        DaemonUnavailable (after reconnecting failed).
        """
        self._check_not_in_callback()
        options = self._options(model, format, fps, profile, stack_tiling, compile, deadline,
                                group_size, independent_lengths, inject_faults, tiling, progress)
        copy = _bool(copy, "copy")
        # Ctrl-C (or another BaseException) inside the callback cannot stop
        # the C++ wait: it is kept and raised once the decode returns.
        interrupted: List[BaseException] = []
        if progress is not None:
            user_progress = progress

            def progress_on_this_client(event: Dict[str, Any]) -> None:
                if interrupted:
                    return
                self._tls.in_progress = True
                try:
                    user_progress(event)
                except Exception:
                    raise  # reported through sys.unraisablehook; the decode goes on
                except BaseException as e:
                    interrupted.append(e)
                finally:
                    self._tls.in_progress = False

            options["progress"] = progress_on_this_client
        arrays: Dict[str, np.ndarray] = {}
        for name, obj in (("video_latent", video_latent), ("audio_latent", audio_latent)):
            if obj is not None:
                arrays[name] = _as_host_array(obj, name)
        if not arrays:
            raise _invalid("decode needs video_latent, audio_latent or both")
        shapes = {name: (_dtype_name(a, name), [int(d) for d in a.shape])
                  for name, a in arrays.items()}
        with self._lock:
            self._free_pending()
            # The daemon checks the shapes first (a cached plan): a latent it
            # would refuse is never copied into shared memory.
            plan = self._cached_plan(options, shapes)
            for attempt in (1, 2):
                args, where = self._prepare(arrays, plan, options)
                try:
                    reply = self._core.decode(args)
                    break
                except NotFound as e:
                    # A restarted daemon could not map a region the client
                    # manages (its segment was removed): new ones, once.
                    if attempt == 1 and "registered again" in e.message and \
                            any(f"region_id {r} (" in e.message for r in self._managed):
                        self._drop_managed()
                        continue
                    raise
                except BaseException as e:
                    # Interrupted, timed out or cut off: the daemon may still
                    # be decoding it and would write into these regions later.
                    if not isinstance(e, VaedError) or \
                            e.code_name in ("unavailable", "io_error", "protocol_error"):
                        self._retire_managed()
                    raise

            if interrupted:
                raise interrupted[0]
            out = where["region"]
            frames = (out.ndarray(where["video_shape"], _NUMPY_DTYPES[where["video_dtype"]], 0)
                      if where["video_shape"] is not None else None)
            waveform = (out.ndarray(where["audio_shape"], np.float32, where["audio_offset"])
                        if where["audio_shape"] is not None else None)
            result = DecodeResult(
                frames=frames, audio=waveform,
                timings={t["component"]: float(t["seconds"]) for t in reply.get("timings", [])},
                info=reply, inputs_in_place=where["in_place"])
            return result.copy() if copy else result

    def _time_cpp_decodes(self, video_latent: TensorLike, iterations: int,
                          model: str = "") -> List[Tuple[float, float]]:
        """Benchmark helper: decodes ``video_latent`` (placed as in
        :meth:`decode`) ``iterations`` times from a C++ loop on the same
        connection and regions. Returns, per call of the C++ client's Decode
        (no Python in between), (wall seconds, the daemon's "decode" seconds)."""
        options = self._options(model, "uint8", None, None, None, None, None, 0, False, (),
                                None, None)
        array = _as_host_array(video_latent, "video_latent")
        shapes = {"video_latent": (_dtype_name(array, "video_latent"),
                                   [int(d) for d in array.shape])}
        with self._lock:
            plan = self._cached_plan(options, shapes)
            args, _ = self._prepare({"video_latent": array}, plan, options)
            return self._core.time_decodes(args, int(iterations))

    # -- daemon -------------------------------------------------------------

    def status(self) -> Dict[str, Any]:
        """The daemon's StatusReply as a dict: models, queue, clients,
        quarantine, counters, groups (as ``vaectl status --json`` shows)."""
        self._check_not_in_callback()
        with self._lock:
            return self._core.status()

    def release_quarantine(self, client: str) -> Dict[str, Any]:
        """Admin: lifts the quarantine of every entry matching ``client`` (a
        client id, "pid:N", "uid:N", a client name or "all"). Raises
        PermissionDenied unless this process is root, the daemon's uid or an
        admin uid; NotFound when nothing matches."""
        self._check_not_in_callback()
        with self._lock:
            return self._core.release_quarantine(str(client))
