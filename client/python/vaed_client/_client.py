"""vaed_client.Client: decode through a running vaed daemon, zero-copy.

Memory model (DESIGN.md §2): latents and decoded outputs never travel on
the control socket. They live in POSIX shared-memory regions that this
process creates and registers with the daemon once; the daemon maps them
and reads and writes in place (vaed_client._regions keeps the book).

* Inputs: a latent that already lies in one of this client's regions (see
  :meth:`Client.alloc_latent`) is used in place. Any other CPU array (numpy,
  an object with the buffer protocol, or one with ``__dlpack__`` such as a
  CPU ``torch.Tensor``; vaed_client._convert reads them) is copied once into
  a staging region that the client keeps and reuses.
* Outputs: ``DecodeResult.frames`` and ``DecodeResult.audio`` are numpy
  arrays that view the client's output region: no copy. They stay valid
  (the memory stays mapped while any view exists), but their *contents* are
  overwritten by the next :meth:`Client.decode` on the same client. Pass
  ``copy=True`` (or call ``result.copy()``) to keep them.
* CUDA (daemons with CUDA ranks, :attr:`Client.cuda_devices`): a latent
  or an ``output=`` that is a CUDA array (``__cuda_array_interface__`` v2/3,
  or DLPack on kDLCUDA) stays in place. Its allocation is registered once
  by CUDA IPC handle and the client keeps a reference to the array while
  it is registered (:meth:`Client.release_cuda` ends that). The work is
  ordered on a CUDA stream (``stream=``), not on the host. A daemon without
  CUDA ranks refuses CUDA arrays at once (``failed_precondition``, "this
  daemon has no CUDA ranks"). Unrun on a GPU.

This module never imports torch; DLPack objects are read through
``numpy.from_dlpack``.
"""

from __future__ import annotations

import copy as copy_module
import inspect
import math
import os
import queue
import threading
import weakref
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from . import _convert as convert
from . import _core
from ._convert import TensorLike, invalid
from ._cuda_buffer import CudaArray
from ._regions import ClientRegions, SharedRegion, align, sweep_stale_segments
from ._result import DecodeResult, StreamPart
from .errors import NotFound, ValidationError, VaedError

__all__ = ["Client", "SharedRegion", "DecodeResult", "StreamPart", "DEFAULT_SOCKET",
           "sweep_stale_segments"]

#: The daemon's default control socket, ``/run/vaed/vaed.sock``: what
#: :class:`Client` connects to when given no socket and ``$VAED_SOCKET`` is
#: unset or empty (the rule is in the Client docstring).
DEFAULT_SOCKET: str = _core.DEFAULT_SOCKET

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


def _cuda_ordinal(device: Any) -> Optional[int]:
    """None for "cpu"; N for "cuda" (0) or "cuda:N"; ValidationError
    naming ``device`` otherwise."""
    if device == "cpu":
        return None
    if isinstance(device, str) and device == "cuda":
        return 0
    if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    raise invalid(f"alloc_latent: device {device!r} must be \"cpu\", \"cuda\" or \"cuda:N\"")


class Client:
    """A connection to the vaed daemon (one Hello; reconnects by itself).

    ``socket``: path of the daemon's Unix socket, chosen by this rule (the
    C++ library's ``Client::SocketPath`` has the same order; there, with no
    None, an empty ``ClientOptions::socket`` means "not given"):

    1. ``socket`` when given (not None): a ``str`` or ``os.PathLike``, used
       as is; an empty path is refused (ValidationError), it does not fall
       back to the environment;
    2. else ``$VAED_SOCKET`` when it is set and not empty (an empty
       ``VAED_SOCKET=`` counts as unset), read when the Client is made;
    3. else :data:`DEFAULT_SOCKET`, ``/run/vaed/vaed.sock``.

    The path is not expanded (no ``~``, no variables); a relative one is
    taken from the current directory. :attr:`socket` holds the chosen path.
    ``client_name``: shown in the daemon's
    logs and status (default ``python-<pid>``). Timeouts are in seconds:
    ``connect_timeout`` (connection + Hello), ``request_timeout`` (any reply;
    0 = wait forever), ``reconnect_timeout`` (how long a call may spend
    getting back to a daemon that restarted or went away, re-registering
    this client's regions; 0 = never reconnect), ``heartbeat_interval``
    (while waiting for a reply; a dead daemon is noticed after about 4 of
    them). ``heartbeats``: a background thread keeps an idle client known
    to the daemon. ``sweep_stale``: first remove segments that killed
    workers of this user left in /dev/shm (:func:`sweep_stale_segments`).

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
            raise invalid(f"socket must be a path (str), got {socket!r}")
        if client_name is None:
            client_name = f"python-{os.getpid()}"
        client_name = convert.text(client_name, "client_name")
        timeouts = {name: convert.real(value, name, 0.0, convert.MAX_TIMEOUT_S, low_open=False)
                    for name, value in (("connect_timeout", connect_timeout),
                                        ("request_timeout", request_timeout),
                                        ("reconnect_timeout", reconnect_timeout))}
        heartbeat_s = convert.real(heartbeat_interval, "heartbeat_interval", 0.0,
                                   convert.MAX_TIMEOUT_S)
        heartbeats = convert.boolean(heartbeats, "heartbeats")
        if convert.boolean(sweep_stale, "sweep_stale"):
            sweep_stale_segments()
        #: The socket path this client connects to (see the class docstring).
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
        self._regions = ClientRegions()
        # Plans by request shape (convert.plan_key), valid until a reconnect.
        self._plans: Dict[Tuple, Dict[str, Any]] = {}
        self._plans_reconnects = 0
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
        view them stay valid in this process; the client's references to
        CUDA arrays it registered are dropped. Idempotent."""
        self._check_not_in_callback()
        with self._lock:
            self._core.close()
            self._regions.forget_all()

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

    @property
    def cuda_devices(self) -> List[str]:
        """UUIDs ("GPU-...") of the devices the daemon's ranks decode on, in
        rank order; empty when it has no CUDA ranks (then CUDA arrays are
        refused). From the latest Hello (it may change on a reconnect)."""
        return [str(u) for u in self._core.hello().get("cuda_devices", [])]

    # -- regions ------------------------------------------------------------

    def register_region(self, nbytes: int) -> SharedRegion:
        """Creates a shared-memory region of ``nbytes`` bytes and registers it
        with the daemon (once; the id survives reconnects). Raises
        ValidationError (0 bytes), ResourceExhausted (daemon's region quota),
        DaemonUnavailable."""
        self._check_not_in_callback()
        nbytes = convert.count(nbytes, "nbytes", 2**63 - 1)
        if nbytes == 0:
            raise invalid("nbytes must be positive, got 0")
        with self._lock:
            return self._regions.register(self._core, nbytes)

    def unregister_region(self, region: SharedRegion) -> None:
        """Unregisters ``region``; the daemon unmaps it. Views of it stay valid
        in this process until they are gone. Nothing happens for a region
        this client no longer holds.

        On return the daemon will never read or write the region again, so
        its memory may be reused. When a decode the daemon still runs uses
        it (one that timed out here), this waits until that decode has
        ended (up to ``request_timeout``). Raises DaemonUnavailable when no
        acknowledgement came in time: the region is forgotten all the same,
        but the daemon may still write into it until that decode ends."""
        self._check_not_in_callback()
        with self._lock:
            self._regions.unregister(self._core, region)

    def alloc_latent(self, shape: Sequence[int], dtype: Any = np.float32,
                     device: str = "cpu") -> Union[np.ndarray, CudaArray]:
        """A zero-filled array of ``shape`` and ``dtype`` that the daemon reads
        in place, no copy. Write the latent into it and pass it to
        :meth:`decode`. Layout: C-contiguous, e.g. H3 video float32
        [1, 24, T, h, w] (T latent frames, h x w latent cells), H3 audio
        float32 [channels, 32, T], TAEF2 float32 [N, 32, h, w]. dtype:
        float32, float16 or uint8.

        ``device="cpu"`` (default): a numpy array in a shared-memory region of
        its own, registered now (write with ``np.copyto(buf, x)`` or
        ``torch.from_numpy(buf).copy_(t)``).

        ``device="cuda:N"`` (``"cuda"`` = ``"cuda:0"``; N is this process's
        ordinal): a :class:`CudaArray` in device memory the client library
        allocates itself (``torch.as_tensor(buf, device="cuda").copy_(t)``
        writes it; order that write before the decode with ``stream=``). It
        is registered at its first decode and stays alive while registered
        (:meth:`release_cuda` ends that). The same call makes a managed
        output buffer: ``alloc_latent(plan["output_shape"], np.uint8,
        device="cuda:0")`` passed as ``output=``. Raises ValidationError
        (``failed_precondition``) when the daemon has no CUDA ranks or this
        machine no NVIDIA driver, and (``invalid_argument``) for a bad
        ``device`` or a device the daemon does not decode on. Unrun on a
        GPU."""
        try:
            dt = np.dtype(dtype)
        except TypeError as e:
            raise invalid(f"alloc_latent: dtype {dtype!r} is not a numpy dtype") from e
        convert.dtype_name(np.empty(0, dt), "alloc_latent")
        shape = convert.shape(shape, "alloc_latent shape")
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes >= 2**63:
            raise invalid(f"alloc_latent shape {shape} of {dt} needs {nbytes} bytes, over 2^63")
        ordinal = _cuda_ordinal(device)
        if ordinal is not None:
            return self._alloc_cuda(shape, dt, ordinal, nbytes)
        with self._lock:
            self._regions.free_pending(self._core)
            region = self.register_region(nbytes)
        array = region.ndarray(shape, dt)
        # When the array and every view of it are gone, the region is
        # unregistered at this client's next call (not from the garbage
        # collector's thread, which may interrupt a call of this client).
        weakref.finalize(array, self._regions.pending_free.append, region.region_id)
        return array

    def _alloc_cuda(self, shape: Tuple[int, ...], dt: np.dtype, ordinal: int,
                    nbytes: int) -> CudaArray:
        """alloc_latent on a device: the daemon must decode on it."""
        self._check_not_in_callback()
        devices = self.cuda_devices
        if not devices:
            raise convert.failed_precondition(
                f"alloc_latent: device cuda:{ordinal}; this daemon has no CUDA ranks (its Hello "
                "lists no cuda_devices): allocate the latent on the CPU")
        buffer = _core.CudaBuffer.allocate(ordinal, max(nbytes, 1))
        if buffer.device_uuid not in devices:
            raise invalid(f"alloc_latent: device cuda:{ordinal} is {buffer.device_uuid}, which "
                          f"the daemon does not decode on (its devices: {', '.join(devices)})")
        return CudaArray(buffer, shape, dt, ordinal)

    def free_latent(self, array: np.ndarray) -> None:
        """Unregisters the region of an :meth:`alloc_latent` array now
        (otherwise that happens once the array and its views are gone).
        The array must not be used for decodes afterwards; on return the
        daemon no longer reads it, so it may be reused otherwise (this waits
        for a decode still running on it, as :meth:`unregister_region`
        does). Raises ValidationError for an array that is not in one of
        this client's regions, DaemonUnavailable as unregister_region."""
        self._check_not_in_callback()
        with self._lock:
            found = self._regions.find(array) if isinstance(array, np.ndarray) else None
            if found is None:
                raise invalid("free_latent: the array is not in a region of this client")
            self._regions.unregister(self._core, found[0])

    def release_cuda(self, array: Optional[TensorLike] = None) -> int:
        """Unregisters the CUDA allocation holding ``array`` (every CUDA
        allocation this client registered when None) and drops the client's
        references to the arrays in it. On return the daemon no longer
        reads or writes that memory (it waits for decodes still using it,
        as :meth:`unregister_region` does), so the arrays may be freed or
        reused. Returns how many allocations were released (0 for an array
        in none). Raises ValidationError for an array that is not a CUDA
        array, DaemonUnavailable as unregister_region."""
        self._check_not_in_callback()
        ptr = None
        if array is not None:
            if not convert.is_cuda(array):
                raise invalid("release_cuda: the array is not a CUDA array")
            ptr = convert.cuda_array(array, "release_cuda").ptr
        with self._lock:
            return self._regions.release_cuda(self._core, ptr)

    @property
    def output_region(self) -> Optional[SharedRegion]:
        """The region the latest decode wrote its output into (None before
        the first decode, and after one that was abandoned)."""
        return self._regions.output

    # -- requests -----------------------------------------------------------

    def plan(self, video_latent: Optional[TensorLike] = None,
             audio_latent: Optional[TensorLike] = None, *, model: Optional[str] = "",
             format: str = "uint8", fps: Optional[float] = None,
             independent_lengths: bool = False,
             latent_space: str = "normalized") -> Dict[str, Any]:
        """What decoding these latents would produce, without decoding or
        reading their memory: the DecodeReply dict with ``output_shape``,
        ``output_bytes``, ``frames``, ``height_px``, ``width_px``, for a
        tiled model ``tiling`` (``tile_rows`` x ``tile_cols`` tiles per
        temporal window, ``windows`` temporal windows) and
        ``audio.output_shape``. Latents may be arrays or shape tuples
        (float32 assumed). ``latent_space`` as :meth:`decode` (a model
        without latent normalisation refuses "denormalized" here too).
        Raises as :meth:`decode`."""
        self._check_not_in_callback()
        options = convert.decode_options(model, format, fps,
                                         independent_lengths=independent_lengths,
                                         latent_space_name=latent_space)
        shapes: convert.Shapes = {}
        for name, obj in (("video_latent", video_latent), ("audio_latent", audio_latent)):
            if obj is None:
                continue
            if isinstance(obj, (tuple, list)):
                shapes[name] = ("float32", convert.shape(obj, f"{name} shape"))
            elif hasattr(obj, "__cuda_array_interface__"):  # shape only: nothing registered
                cuda = convert.cuda_array(obj, name)
                shapes[name] = (cuda.dtype, cuda.shape)
            else:
                array = convert.as_host_array(obj, name)
                shapes[name] = (convert.dtype_name(array, name), [int(d) for d in array.shape])
        if not shapes:
            raise invalid("plan needs video_latent, audio_latent or both")
        with self._lock:
            # The plan decode uses too (one round trip for a plan then its
            # decode); a copy, so the caller cannot change the cached one.
            return copy_module.deepcopy(self._cached_plan(options, shapes))

    def _cached_plan(self, options: Dict[str, Any], shapes: convert.Shapes) -> Dict[str, Any]:
        """The daemon's plan for these shapes (its validation of them, and
        the output sizes), cached until the client reconnects."""
        if self._core.reconnects != self._plans_reconnects:  # the daemon may have changed
            self._plans.clear()
            self._plans_reconnects = self._core.reconnects
        key = convert.plan_key(options, shapes)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._core.plan(convert.plan_args(options, shapes))
            if len(self._plans) >= 64:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _prepare(self, arrays: Dict[str, Any], plan: Dict[str, Any],
                 options: Dict[str, Any], cuda_output: Optional[convert.CudaArray] = None
                 ) -> Tuple["_core.DecodeArgs", Dict[str, Any]]:
        """Places the latents (CUDA ones where they are; host ones in place or
        into staging) and the outputs (the CUDA ``cuda_output``, or the
        output region: video at offset 0, audio after it, aligned); returns
        the request and where its outputs lie."""
        in_place: Dict[str, bool] = {}
        placed: Dict[str, Tuple] = {}
        for name, array in arrays.items():
            if isinstance(array, convert.CudaArray):
                placed[name], in_place[name] = self._regions.place_cuda(self._core, array), True
                continue
            placed[name], in_place[name] = self._regions.place_input(
                self._core, array, name, convert.dtype_name(array, name))
        has_video, has_audio = "video_latent" in arrays, "audio_latent" in arrays
        video_shape = [int(d) for d in plan.get("output_shape", [])] if has_video else None
        video_dtype = convert.PROTO_DTYPES.get(plan.get("output_dtype", ""), "uint8")
        video_bytes = int(plan.get("output_bytes", 0)) if has_video else 0
        audio_shape = ([int(d) for d in plan["audio"]["output_shape"]]
                       if has_audio and "audio" in plan else None)
        audio_bytes = int(plan["audio"]["output_bytes"]) if audio_shape else 0
        if cuda_output is not None:
            # The frames go into the caller's CUDA array; the audio (if any)
            # still goes to the output region.
            video_output = self._regions.place_cuda(self._core, cuda_output)
            video_bytes = 0
        audio_offset = align(video_bytes)
        out = self._regions.place_output(self._core, audio_offset + audio_bytes)
        if cuda_output is None:
            video_output = (out.region_id, 0, video_dtype, video_shape)
        args = _core.DecodeArgs(
            latent=placed.get("video_latent"), audio_latent=placed.get("audio_latent"),
            output=video_output if has_video else None,
            audio_output=(out.region_id, audio_offset, "float32", audio_shape)
            if has_audio else None, **options)
        where = dict(region=out, video_shape=video_shape, video_dtype=video_dtype,
                     audio_shape=audio_shape, audio_offset=audio_offset, in_place=in_place)
        return args, where

    def _progress_on_this_client(self, progress: Callable[[Dict[str, Any]], None],
                                 interrupted: List[BaseException]) -> Callable:
        """``progress`` as the extension calls it: marks this thread as in a
        callback (so calls of this Client from it are refused); an Exception
        goes to sys.unraisablehook (through the extension) and the decode goes
        on; Ctrl-C (or another BaseException) cannot stop the C++ wait, so it
        is kept in ``interrupted`` for decode() to raise once the decode
        returns, and later events are dropped."""
        def on_event(event: Dict[str, Any]) -> None:
            if interrupted:
                return
            self._tls.in_progress = True
            try:
                progress(event)
            except Exception:
                raise  # reported through sys.unraisablehook; the decode goes on
            except BaseException as e:
                interrupted.append(e)
            finally:
                self._tls.in_progress = False
        return on_event

    def _send_decode(self, arrays: Dict[str, Any], plan: Dict[str, Any],
                     options: Dict[str, Any], cuda_output: Optional[convert.CudaArray] = None,
                     placement: Optional[Dict[str, Any]] = None
                     ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """Places the request and decodes it (lock held): the reply and where
        the outputs lie. A request the daemon cannot map because a managed
        region was removed is placed again in new ones, once; a call cut off
        while the daemon may still be decoding retires the managed regions.
        ``placement["where"]``, when given, is where the outputs of the
        attempt being decoded lie, set before it is sent (streamed parts
        are views of them)."""
        for attempt in (1, 2):
            args, where = self._prepare(arrays, plan, options, cuda_output)
            if placement is not None:
                placement["where"] = where
            try:
                return self._core.decode(args), where
            except NotFound as e:
                # A restarted daemon could not map a region the client
                # manages (its segment was removed): new ones, once.
                if attempt == 1 and "registered again" in e.message and \
                        any(f"region_id {r} (" in e.message for r in self._regions.managed):
                    self._regions.drop_managed(self._core)
                    continue
                raise
            except BaseException as e:
                # Interrupted, timed out or cut off: the daemon may still
                # be decoding it and would write into these regions later.
                if not isinstance(e, VaedError) or \
                        e.code_name in ("unavailable", "io_error", "protocol_error"):
                    self._regions.retire_managed()
                raise
        raise AssertionError("unreachable")

    def decode(self, video_latent: Optional[TensorLike] = None,
               audio_latent: Optional[TensorLike] = None, *, model: Optional[str] = "",
               format: str = "uint8", fps: Optional[float] = None,
               profile: Optional[str] = None, stack_tiling: Union[None, bool, str] = None,
               compile: Union[None, bool, str] = None, deadline: Optional[float] = None,
               group_size: int = 0, independent_lengths: bool = False, copy: bool = False,
               progress: Optional[Callable[[Dict[str, Any]], None]] = None,
               inject_faults: Iterable[str] = (),
               tiling: Optional[Tuple[int, int]] = None, output: Optional[TensorLike] = None,
               stream: Any = None, latent_space: str = "normalized") -> DecodeResult:
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
        ``tiles_total``. It must not call this Client (that raises
        ValidationError there); an Exception in it is reported
        (sys.unraisablehook) and the decode goes on; a KeyboardInterrupt (or
        other BaseException) stops the callbacks and is raised once the
        decode is over. ``inject_faults`` (testing; daemon must allow it)
        and ``tiling`` ((tile_latent, overlap_latent) cells; profile
        "diagnostic") are passed through. ``latent_space``: "normalized"
        (the DiT's normalised latents; the daemon de-normalises them with
        the model config's latents mean and std) or "denormalized" (already
        ``latent * std + mean``, what diffusers' ``AutoencoderKLMiniMaxH3``
        ``.decode`` takes: decoded as they are), for the video and the audio
        latent alike; the same bytes either way for one latent. A model
        without latent normalisation (no "latent_space" capability, e.g.
        TAEF2) refuses "denormalized" with ValidationError naming
        ``latent_space``.

        CUDA (unrun on a GPU): a latent may be a CUDA array
        (``__cuda_array_interface__`` v2/3 or a DLPack producer on kDLCUDA;
        float32, float16 or uint8, C-contiguous), read in place by the
        daemon's GPU ranks. ``output``: a CUDA array (C-contiguous, of the
        plan's shape and dtype) the frames are written into, in place;
        ``result.frames`` is then that object. The client registers each
        CUDA allocation once and keeps a reference to the array until
        :meth:`release_cuda` or :meth:`close`. ``stream``: the CUDA stream
        the decode is ordered on (an int CUstream value, 1 = legacy default,
        2 = per-thread default, or a torch / cupy stream object); default:
        the stream the output's, else a latent's,
        ``__cuda_array_interface__`` names, else the legacy default stream.
        Whenever a latent or the output is a CUDA array, the daemon waits
        on the device for the work already enqueued on it before reading
        the latents or writing the output (a kernel still reading the
        previous frames from ``output``, say), and the stream waits for the
        frames before this returns: read them on that stream (or
        synchronise it) without a host copy. A daemon without CUDA ranks
        (:attr:`cuda_devices` empty) refuses CUDA arrays with
        ValidationError ``failed_precondition`` "this daemon has no CUDA
        ranks", naming the argument.

        Returns a :class:`DecodeResult` whose arrays view the output region
        unless ``copy``. Raises ValidationError (a field broke a rule; the
        message names it), NotFound (model), Busy / Quarantined (with
        ``retry_after``), DeadlineExceeded, ResourceExhausted,
        DaemonUnavailable (after reconnecting failed). :meth:`decode_stream`
        is the same decode handing out each part of the output as soon as
        it is final.
        """
        # Every keyword argument above, by name: the one list of decode's
        # options (decode_stream takes the same, _decode_keywords).
        keywords = {name: value for name, value in locals().items()
                    if name not in ("self", "video_latent", "audio_latent")}
        return self._decode(video_latent, audio_latent, keywords)

    def _decode(self, video_latent: Optional[TensorLike], audio_latent: Optional[TensorLike],
                keywords: Dict[str, Any],
                final_range: Optional[Callable[[Dict[str, Any], Dict[str, Any]], None]] = None
                ) -> DecodeResult:
        """The body of :meth:`decode`; ``keywords``: its keyword arguments,
        every one present (:func:`_decode_keywords`). ``final_range``: streamed output
        (:meth:`decode_stream`), called on this thread during the decode with
        each FinalRange dict {stage, unit, begin, end, total} and where the
        outputs of the attempt being decoded lie (``_prepare``'s ``where``)."""
        self._check_not_in_callback()
        k = keywords
        progress, output = k["progress"], k["output"]
        options = convert.decode_options(k["model"], k["format"], k["fps"], k["profile"],
                                         k["stack_tiling"], k["compile"], k["deadline"],
                                         k["group_size"], k["independent_lengths"],
                                         k["inject_faults"], k["tiling"], progress,
                                         k["latent_space"])
        copy = convert.boolean(k["copy"], "copy")
        interrupted: List[BaseException] = []
        if progress is not None:
            options["progress"] = self._progress_on_this_client(progress, interrupted)
        placement: Dict[str, Any] = {}
        if final_range is not None:
            options["final_range"] = lambda event: final_range(event, placement["where"])
        if video_latent is None and audio_latent is None:
            raise invalid("decode needs video_latent, audio_latent or both")
        cuda, stream_value = self._cuda_arguments(
            {"video_latent": video_latent, "audio_latent": audio_latent, "output": output},
            k["stream"])
        options["cuda_stream"] = stream_value
        arrays: Dict[str, Any] = {}
        for name, obj in (("video_latent", video_latent), ("audio_latent", audio_latent)):
            if obj is not None:
                arrays[name] = cuda[name] if name in cuda else convert.as_host_array(obj, name)
        shapes = {name: ((a.dtype, a.shape) if isinstance(a, convert.CudaArray) else
                         (convert.dtype_name(a, name), [int(d) for d in a.shape]))
                  for name, a in arrays.items()}
        cuda_output = cuda.get("output")
        if cuda_output is not None and video_latent is None:
            raise invalid("output: an audio-only request has no frames to write into it")
        with self._lock:
            self._regions.free_pending(self._core)
            # The daemon checks the shapes first (a cached plan): a latent it
            # would refuse is never copied into shared memory.
            plan = self._cached_plan(options, shapes)
            reply, where = self._send_decode(arrays, plan, options, cuda_output, placement)
            if interrupted:
                raise interrupted[0]
            frames, waveform = self._output_arrays(
                where, output if cuda_output is not None else None)
            result = DecodeResult(
                frames=frames, audio=waveform,
                timings={t["component"]: float(t["seconds"]) for t in reply.get("timings", [])},
                info=reply, inputs_in_place=where["in_place"])
            return result.copy() if copy else result

    @staticmethod
    def _output_arrays(where: Dict[str, Any], cuda_output: Any
                       ) -> Tuple[Any, Optional[np.ndarray]]:
        """The frames and the waveform of a placed decode (``where`` from
        :meth:`_prepare`): numpy views of the output region, or for the
        frames the caller's CUDA ``cuda_output`` object itself (written in
        place, ordered on the stream) when it gave one; None for a modality
        the request did not carry."""
        out = where["region"]
        if cuda_output is not None:
            frames = cuda_output
        elif where["video_shape"] is not None:
            frames = out.ndarray(where["video_shape"],
                                 convert.NUMPY_DTYPES[where["video_dtype"]], 0)
        else:
            frames = None
        waveform = (out.ndarray(where["audio_shape"], np.float32, where["audio_offset"])
                    if where["audio_shape"] is not None else None)
        return frames, waveform

    def decode_stream(self, video_latent: Optional[TensorLike] = None,
                      audio_latent: Optional[TensorLike] = None, **keywords: Any
                      ) -> Iterator[Union[StreamPart, DecodeResult]]:
        """:meth:`decode` with streamed output: yields each part of the output
        as soon as the daemon has made it final, then the
        :class:`DecodeResult`, so that a worker can encode the first frames
        while the rest are still being decoded::

            for part in vae.decode_stream(latent, audio_latent, fps=24):
                if isinstance(part, vaed_client.StreamPart):
                    encoder.write(part.data)   # frames [part.begin, part.end)
                else:
                    result = part              # the DecodeResult, last

        Arguments (the same keyword arguments, defaults and rules; an
        unknown keyword is a TypeError at the call), latents, outputs and
        errors as :meth:`decode`; the bytes written are the same as without
        streaming. Yields, in order:

        * a :class:`StreamPart` per final range: ``stage`` "video" with
          ``unit`` "frames" (pixel frames of the output; H3: after temporal
          window k the frames ``[0, 17 (k + 1))`` are final, after the last
          window all of them; TAEF2 and demo: after each frame batch) and
          ``data`` = ``frames[begin:end]``, or ``stage`` "audio" with
          ``unit`` "samples" (samples per channel, once, when the audio is
          written) and ``data`` = ``audio[:, begin:end]``. Per stage the
          parts are contiguous from 0 and the last ends at ``total``.
          Audio and video parts may interleave in any order.
        * the :class:`DecodeResult` that :meth:`decode` would return, last.

        Ownership: ``data`` views the same memory as the result's arrays
        (the client's output region, or the caller's CUDA ``output``) with no
        copy unless ``copy=True`` (then each part's ``data`` and the result
        own their memory). The daemon never writes a part's elements again
        once it is yielded, so they may be read at once; as with
        :meth:`decode`, their contents are overwritten by the next decode on
        this client, which may start as soon as this decode has finished,
        possibly before every part was consumed (a decode from another
        thread or from the loop's body): use ``copy=True`` or one Client per
        thread when that can happen. CUDA ``output`` (unrun on a GPU): the
        decode's stream waits on the device for each part before it is
        yielded; read it on that stream or synchronise the stream first.

        Threads: nothing happens until the iteration starts (errors,
        argument errors included, are raised from it). The decode then runs
        on a background thread of this Client, holding the Client for its
        duration as :meth:`decode` does (calls of this Client from other
        threads, and from the loop's body, wait for it to finish), while
        this generator yields the parts from a queue. ``progress`` is called
        on that background thread (not the consuming one), with the same
        rules as in :meth:`decode`. Consume the generator from one thread
        at a time.

        Errors: a failed or cancelled decode (``deadline``, daemon shutting
        down) raises its exception after yielding every part that was final
        before it; those parts stay valid and the rest of the outputs holds
        unspecified bytes. The exception's ``final_frames`` /
        ``final_samples`` say how far the video (pixel frames) and audio
        (samples per channel) were final (0 = nothing). A streamed decode
        that delivered a part is not retried when the daemon goes away: it
        raises DaemonUnavailable at once (the next call reconnects).

        Stopping early (``break``, ``close()``, the generator being
        collected, or an exception such as KeyboardInterrupt while waiting
        for a part): the daemon keeps decoding into the outputs until the
        request ends, so the generator still waits for the decode (up to
        ``request_timeout``) before it returns; a further KeyboardInterrupt
        meanwhile is raised once the decode is over. The decode's own error,
        if any, is then dropped.
        """
        return self._stream(video_latent, audio_latent, _decode_keywords(keywords))

    def _stream(self, video_latent: Optional[TensorLike], audio_latent: Optional[TensorLike],
                keywords: Dict[str, Any]) -> Iterator[Union[StreamPart, DecodeResult]]:
        """The generator of :meth:`decode_stream` (``keywords`` complete)."""
        self._check_not_in_callback()
        output, copy = keywords["output"], keywords["copy"]
        # ("part", FinalRange dict, where), then ("done", DecodeResult, None)
        # or ("error", exception, None); unbounded, so the decode thread
        # never waits for the consumer.
        events: "queue.Queue[Tuple[str, Any, Any]]" = queue.Queue()

        def run() -> None:
            try:
                result = self._decode(
                    video_latent, audio_latent, keywords,
                    final_range=lambda event, where: events.put(("part", event, where)))
            except BaseException as e:  # raised on the consumer's thread; nothing is lost
                events.put(("error", e, None))
            else:
                events.put(("done", result, None))

        worker = threading.Thread(target=run, name="vaed-decode-stream")
        worker.start()
        try:
            final = {"video": 0, "audio": 0}  # how far each stage was yielded
            while True:
                kind, value, where = events.get()
                if kind == "part":
                    part = self._stream_part(value, where, output, copy)
                    final[part.stage] = part.end
                    yield part
                elif kind == "done":
                    yield value
                    return
                else:
                    if isinstance(value, VaedError):
                        # What was yielded is final whatever the status says
                        # (e.g. a reconnect that cut the stream off).
                        value.final_frames = max(value.final_frames, final["video"])
                        value.final_samples = max(value.final_samples, final["audio"])
                    raise value
        finally:
            # The daemon may still write the outputs until the decode
            # returns: never leave before it; and this generator owns the
            # thread, so it joins it.
            interrupts: List[BaseException] = []
            while worker.is_alive():
                try:
                    worker.join()
                except BaseException as e:  # Ctrl-C while waiting: raised after the wait
                    interrupts.append(e)
            if interrupts:
                raise interrupts[0]

    @classmethod
    def _stream_part(cls, event: Dict[str, Any], where: Dict[str, Any], output: Any,
                     copy: bool) -> StreamPart:
        """The StreamPart for a FinalRange dict of the decode whose outputs
        lie at ``where`` (``output``: the caller's CUDA output, or None)."""
        begin, end = int(event["begin"]), int(event["end"])
        frames, waveform = cls._output_arrays(where, output)
        data: Any = None
        if event["stage"] == "video" and frames is not None:
            try:
                data = frames[begin:end]
            except TypeError:  # a CUDA array that cannot be sliced: given whole
                data = frames
        elif event["stage"] == "audio" and waveform is not None:
            data = waveform[:, begin:end]
        if convert.boolean(copy, "copy") and isinstance(data, np.ndarray):
            data = data.copy()
        return StreamPart(stage=str(event["stage"]), unit=str(event["unit"]), begin=begin,
                          end=end, total=int(event["total"]), data=data)

    def _cuda_arguments(self, objects: Dict[str, Any], stream: Any
                        ) -> Tuple[Dict[str, convert.CudaArray], int]:
        """The CUDA arrays among ``objects`` (by argument name), checked, and
        the stream value the decode is ordered on (0 when none is CUDA).
        ``__cuda_array_interface__`` arrays are checked before the daemon's
        CUDA ranks are (no CUDA call is needed for either); DLPack producers
        are exported only once the daemon could take them. Raises
        ValidationError: a bad interface or stream (``invalid_argument``),
        a host ``output``, a read-only ``output``, a daemon without CUDA
        ranks (``failed_precondition``)."""
        output = objects.get("output")
        if output is not None and not convert.is_cuda(output):
            raise invalid("output: takes a CUDA array (the daemon writes the frames into it); "
                          "host frames come back in DecodeResult.frames")
        on_cuda = {n: o for n, o in objects.items() if o is not None and convert.is_cuda(o)}
        stream_value = convert.stream_handle(stream)
        if not on_cuda:
            return {}, 0
        cuda = {n: convert.cuda_array(o, n) for n, o in on_cuda.items()
                if hasattr(o, "__cuda_array_interface__")}
        if not self.cuda_devices:
            name = next(iter(on_cuda))
            raise convert.no_cuda_ranks(on_cuda[name], name)
        if stream_value is None:  # the stream the tensor protocol names
            named = [cuda[n].stream for n in ("output", "video_latent", "audio_latent")
                     if n in cuda and cuda[n].stream is not None]
            stream_value = named[0] if named else 1
        for name, obj in on_cuda.items():
            if name not in cuda:
                cuda[name] = convert.cuda_array(obj, name, dlpack_stream=stream_value)
        if "output" in cuda and cuda["output"].readonly:
            raise invalid("output: the CUDA array is read-only (__cuda_array_interface__ data[1] "
                          "is True); the daemon writes the frames into it")
        return cuda, stream_value

    def _time_cpp_decodes(self, video_latent: TensorLike, iterations: int,
                          model: str = "") -> List[Tuple[float, float]]:
        """Benchmark helper: decodes ``video_latent`` (placed as in
        :meth:`decode`) ``iterations`` times from a C++ loop on the same
        connection and regions. Returns, per call of the C++ client's Decode
        (no Python in between), (wall seconds, the daemon's "decode" seconds)."""
        options = convert.decode_options(model, "uint8")
        array = convert.as_host_array(video_latent, "video_latent")
        shapes = {"video_latent": (convert.dtype_name(array, "video_latent"),
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


def _decode_keywords(keywords: Dict[str, Any]) -> Dict[str, Any]:
    """``keywords`` as :meth:`Client.decode` would take them, with its
    defaults filled in: the one signature of decode's options. TypeError
    for a name decode does not take (as a call of decode would raise)."""
    bound = _DECODE_SIGNATURE.bind(None, **keywords)
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items()
            if name not in ("self", "video_latent", "audio_latent")}


_DECODE_SIGNATURE = inspect.signature(Client.decode)
# help() and IDEs show decode_stream with decode's arguments.
Client.decode_stream.__signature__ = _DECODE_SIGNATURE.replace(  # type: ignore[attr-defined]
    return_annotation="Iterator[Union[StreamPart, DecodeResult]]")
