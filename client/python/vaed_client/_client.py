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
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from .errors import ValidationError

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
        device = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else _DL_CPU
        if device in (_DL_CUDA, _DL_CUDA_MANAGED):
            raise ValidationError(
                f"{field_name}: a CUDA tensor (DLPack device {device}); this vaed daemon decodes "
                "from host shared memory: pass a CPU tensor (e.g. tensor.cpu())",
                code=5, code_name="failed_precondition")
        try:
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
    if seconds is None:
        return 0
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValidationError(f"{field_name} must be a positive number of seconds, got {seconds!r}",
                              code=1, code_name="invalid_argument")
    ms = math.ceil(seconds * 1000.0)
    if ms > 0xFFFFFFFF:
        raise ValidationError(f"{field_name} {seconds} s is longer than 2^32 - 1 ms",
                              code=1, code_name="invalid_argument")
    return ms


def _tristate(value: Union[None, bool, str], field_name: str) -> int:
    try:
        return _TRISTATE[value.lower() if isinstance(value, str) else value]
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
                 heartbeats: bool = True) -> None:
        if socket is None:
            socket = os.environ.get("VAED_SOCKET") or DEFAULT_SOCKET
        if client_name is None:
            client_name = f"python-{os.getpid()}"
        for name, value in (("connect_timeout", connect_timeout),
                            ("request_timeout", request_timeout),
                            ("reconnect_timeout", reconnect_timeout)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValidationError(f"{name} must be >= 0 seconds, got {value!r}",
                                      code=1, code_name="invalid_argument")
        if not (isinstance(heartbeat_interval, (int, float)) and heartbeat_interval > 0):
            raise ValidationError(f"heartbeat_interval must be > 0 seconds, got "
                                  f"{heartbeat_interval!r}", code=1, code_name="invalid_argument")
        self.socket = socket
        self._lock = threading.RLock()
        self._core = _core.Client(
            socket=socket, client_name=client_name,
            connect_timeout_ms=int(math.ceil(connect_timeout * 1000)),
            request_timeout_ms=int(math.ceil(request_timeout * 1000)),
            reconnect_timeout_ms=int(math.ceil(reconnect_timeout * 1000)),
            wait_heartbeat_interval_ms=max(1, int(round(heartbeat_interval * 1000))),
            heartbeats=heartbeats)
        self._regions: Dict[int, SharedRegion] = {}
        # Regions the client manages: staging for copied latents (by field)
        # and the output region.
        self._staging: Dict[str, SharedRegion] = {}
        self._output: Optional[SharedRegion] = None
        # Plans by request shape: (video out shape, dtype, audio out shape).
        self._plans: Dict[Tuple, Dict[str, Any]] = {}
        self._plans_reconnects = 0
        # Region ids of collected alloc_latent arrays (appended by finalizers).
        self._pending_free: Deque[int] = collections.deque()

    # -- lifetime -----------------------------------------------------------

    def close(self) -> None:
        """Says Goodbye; the daemon unmaps this client's regions. Arrays that
        view them stay valid in this process. Idempotent."""
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
        if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise ValidationError(f"nbytes must be a positive int, got {nbytes!r}",
                                  code=1, code_name="invalid_argument")
        with self._lock:
            core_region = _core.Region(int(nbytes))
            region_id = self._core.register_region(core_region)
            region = SharedRegion(core_region, region_id)
            self._regions[region_id] = region
            return region

    def unregister_region(self, region: SharedRegion) -> None:
        """Unregisters ``region``; the daemon unmaps it. Views of it stay valid
        in this process until they are gone."""
        with self._lock:
            if self._regions.pop(region.region_id, None) is None:
                return
            region.registered = False
            for key, staged in list(self._staging.items()):
                if staged is region:
                    del self._staging[key]
            if self._output is region:
                self._output = None
            self._core.unregister_region(region.region_id)

    def alloc_latent(self, shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
        """A zero-filled numpy array of ``shape`` and ``dtype`` in a region of
        its own, registered with the daemon. Write the latent into it (e.g.
        ``np.copyto(buf, x)`` or ``torch.from_numpy(buf).copy_(t)``) and pass
        it to :meth:`decode`: the daemon reads it in place, no copy.
        Layout: C-contiguous, e.g. H3 video float32 [1, 24, T, h, w]
        (T latent frames, h x w latent cells), H3 audio float32
        [channels, 32, T], TAEF2 float32 [N, 32, h, w]."""
        dt = np.dtype(dtype)
        _dtype_name(np.empty(0, dt), "alloc_latent")
        shape = tuple(int(d) for d in shape)
        if not shape or any(d <= 0 for d in shape):
            raise ValidationError(f"alloc_latent: shape {list(shape)} must have positive dims",
                                  code=1, code_name="invalid_argument")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
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
        with self._lock:
            found = self._find_region(array) if isinstance(array, np.ndarray) else None
            if found is None:
                raise ValidationError("free_latent: the array is not in a region of this client",
                                      code=1, code_name="invalid_argument")
            self.unregister_region(found[0])

    def _free_pending(self) -> None:
        """Unregisters the regions of alloc_latent arrays that were collected."""
        while self._pending_free:
            region = self._regions.get(self._pending_free.popleft())
            if region is not None:
                self.unregister_region(region)

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
        # The output region is rewritten by this very decode, and a staging
        # region by the other latent's copy: an input there (say, a previous
        # result) is copied, never read in place.
        if found is not None and found[0] is not self._output and \
                found[0] not in self._staging.values():
            region, offset = found
            return (region.region_id, offset, dtype, shape), True
        nbytes = _align(max(array.nbytes, 1))
        region = self._staging.get(field_name)
        if region is None or region.nbytes < nbytes:
            if region is not None:
                self.unregister_region(region)
            region = self.register_region(nbytes)
            self._staging[field_name] = region
        np.copyto(region.ndarray(array.shape, array.dtype), array, casting="no")
        return (region.region_id, 0, dtype, shape), False

    # -- requests -----------------------------------------------------------

    def _args(self, model: str, latent: Optional[Tuple], audio_latent: Optional[Tuple],
              output: Optional[Tuple], audio_output: Optional[Tuple], format: str,
              fps: Optional[float], profile: Optional[str], stack_tiling: Any, compile: Any,
              deadline: Optional[float], group_size: int, independent_lengths: bool,
              inject_faults: Iterable[str], tiling: Optional[Tuple[int, int]]) -> "_core.DecodeArgs":
        if format not in _FORMATS:
            raise ValidationError(f"format {format!r} is not one of {', '.join(_FORMATS)}",
                                  code=1, code_name="invalid_argument")
        if fps is not None and not (isinstance(fps, (int, float)) and math.isfinite(fps)
                                    and fps > 0):
            raise ValidationError(f"fps must be a positive number of frames per second, got "
                                  f"{fps!r}", code=1, code_name="invalid_argument")
        if not isinstance(group_size, (int, np.integer)) or not 0 <= group_size <= 0xFFFFFFFF:
            raise ValidationError(f"group_size must be an int in [0, 2^32), got {group_size!r}",
                                  code=1, code_name="invalid_argument")
        return _core.DecodeArgs(
            model=model or "", latent=latent, output=output, audio_latent=audio_latent,
            audio_output=audio_output, format=_FORMATS[format],
            stack_tiling=_tristate(stack_tiling, "stack_tiling"),
            compile=_tristate(compile, "compile"), fps=float(fps or 0.0),
            independent_lengths=bool(independent_lengths), profile=profile or "",
            deadline_ms=_to_ms(deadline, "deadline"), group_size=int(group_size),
            inject_faults=list(inject_faults),
            tiling=None if tiling is None else (int(tiling[0]), int(tiling[1])))

    def plan(self, video_latent: Optional[TensorLike] = None,
             audio_latent: Optional[TensorLike] = None, *, model: str = "",
             format: str = "uint8", fps: Optional[float] = None,
             independent_lengths: bool = False) -> Dict[str, Any]:
        """What decoding these latents would produce, without decoding or
        reading their memory: the DecodeReply dict with ``output_shape``,
        ``output_bytes``, ``frames``, ``height_px``, ``width_px`` and
        ``audio.output_shape``. Latents may be arrays or shape tuples
        (float32 assumed). Raises as :meth:`decode`."""
        def shape_of(obj: Any, name: str) -> Optional[Tuple]:
            if obj is None:
                return None
            if isinstance(obj, (tuple, list)):
                return (0, 0, "float32", [int(d) for d in obj])
            array = _as_host_array(obj, name)
            return (0, 0, _dtype_name(array, name), [int(d) for d in array.shape])

        args = self._args(model, shape_of(video_latent, "video_latent"),
                          shape_of(audio_latent, "audio_latent"), None, None, format, fps, None,
                          None, None, None, 0, independent_lengths, (), None)
        with self._lock:
            return self._core.plan(args)

    def _cached_plan(self, model: str, latent: Optional[Tuple], audio_latent: Optional[Tuple],
                     format: str, fps: Optional[float],
                     independent_lengths: bool) -> Dict[str, Any]:
        if self._core.reconnects != self._plans_reconnects:  # the daemon may have changed
            self._plans.clear()
            self._plans_reconnects = self._core.reconnects
        key = (model, format, fps, independent_lengths,
               None if latent is None else (latent[2], tuple(latent[3])),
               None if audio_latent is None else (audio_latent[2], tuple(audio_latent[3])))
        plan = self._plans.get(key)
        if plan is None:
            args = self._args(model, latent, audio_latent, None, None, format, fps, None, None,
                              None, None, 0, independent_lengths, (), None)
            plan = self._core.plan(args)
            if len(self._plans) >= 64:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def decode(self, video_latent: Optional[TensorLike] = None,
               audio_latent: Optional[TensorLike] = None, *, model: str = "",
               format: str = "uint8", fps: Optional[float] = None,
               profile: Optional[str] = None, stack_tiling: Union[None, bool, str] = None,
               compile: Union[None, bool, str] = None, deadline: Optional[float] = None,
               group_size: int = 0, independent_lengths: bool = False, copy: bool = False,
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
        ``inject_faults`` (testing; daemon must allow it) and ``tiling``
        ((tile_latent, overlap_latent) cells; profile "diagnostic") are
        passed through.

        Returns a :class:`DecodeResult` whose arrays view the output region
        unless ``copy``. Raises ValidationError (a field broke a rule; the
        message names it), NotFound (model), Busy / Quarantined (with
        ``retry_after``), DeadlineExceeded, ResourceExhausted,
        DaemonUnavailable (after reconnecting failed).
        """
        if video_latent is None and audio_latent is None:
            raise ValidationError("decode needs video_latent, audio_latent or both",
                                  code=1, code_name="invalid_argument")
        with self._lock:
            self._free_pending()
            in_place: Dict[str, bool] = {}
            latent = audio = None
            if video_latent is not None:
                latent, in_place["video_latent"] = self._place_input(video_latent, "video_latent")
            if audio_latent is not None:
                audio, in_place["audio_latent"] = self._place_input(audio_latent, "audio_latent")
            plan = self._cached_plan(model, latent, audio, format, fps, independent_lengths)

            video_shape = [int(d) for d in plan.get("output_shape", [])] if latent else None
            video_dtype = _PROTO_DTYPES.get(plan.get("output_dtype", ""), "uint8")
            video_bytes = int(plan.get("output_bytes", 0)) if latent else 0
            audio_shape = ([int(d) for d in plan["audio"]["output_shape"]]
                           if audio and "audio" in plan else None)
            audio_bytes = int(plan["audio"]["output_bytes"]) if audio_shape else 0
            audio_offset = _align(video_bytes)
            need = max(audio_offset + audio_bytes, 1)
            if self._output is None or self._output.nbytes < need:
                if self._output is not None:
                    self.unregister_region(self._output)
                self._output = self.register_region(_align(need))
            out = self._output
            output = (out.region_id, 0, video_dtype, video_shape) if latent else None
            audio_output = (out.region_id, audio_offset, "float32", audio_shape) if audio else None

            args = self._args(model, latent, audio, output, audio_output, format, fps, profile,
                              stack_tiling, compile, deadline, group_size, independent_lengths,
                              inject_faults, tiling)
            reply = self._core.decode(args)

            frames = (out.ndarray(video_shape, _NUMPY_DTYPES[video_dtype], 0)
                      if latent else None)
            waveform = (out.ndarray(audio_shape, np.float32, audio_offset)
                        if audio_shape else None)
            result = DecodeResult(
                frames=frames, audio=waveform,
                timings={t["component"]: float(t["seconds"]) for t in reply.get("timings", [])},
                info=reply, inputs_in_place=in_place)
            return result.copy() if copy else result

    def _time_cpp_decodes(self, video_latent: TensorLike, iterations: int,
                          model: str = "") -> List[Tuple[float, float]]:
        """Benchmark helper: decodes ``video_latent`` (placed as in
        :meth:`decode`) ``iterations`` times from a C++ loop on the same
        connection and regions. Returns, per call of the C++ client's Decode
        (no Python in between), (wall seconds, the daemon's "decode" seconds)."""
        with self._lock:
            latent, _ = self._place_input(video_latent, "video_latent")
            plan = self._cached_plan(model, latent, None, "uint8", None, False)
            shape = [int(d) for d in plan["output_shape"]]
            need = _align(int(plan["output_bytes"]))
            if self._output is None or self._output.nbytes < need:
                if self._output is not None:
                    self.unregister_region(self._output)
                self._output = self.register_region(need)
            args = self._args(model, latent, None, (self._output.region_id, 0, "uint8", shape),
                              None, "uint8", None, None, None, None, None, 0, False, (), None)
            return self._core.time_decodes(args, int(iterations))

    # -- daemon -------------------------------------------------------------

    def status(self) -> Dict[str, Any]:
        """The daemon's StatusReply as a dict: models, queue, clients,
        quarantine, counters, groups (as ``vaectl status --json`` shows)."""
        with self._lock:
            return self._core.status()

    def release_quarantine(self, client: str) -> Dict[str, Any]:
        """Admin: lifts the quarantine of every entry matching ``client`` (a
        client id, "pid:N", "uid:N", a client name or "all"). Raises
        PermissionDenied unless this process is root, the daemon's uid or an
        admin uid; NotFound when nothing matches."""
        with self._lock:
            return self._core.release_quarantine(str(client))
