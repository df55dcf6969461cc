"""Type stubs for the extension module vaed_client._core (client/python/src/module.cc).

Use the vaed_client package instead of this module. Tensors cross as
``(region_id, offset_bytes, dtype_name, shape)`` tuples (``TensorArg``):
dtype names "float32", "float16", "bfloat16", "uint8"; shapes in elements;
C-contiguous. Every failing call raises a vaed_client.errors class.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

TensorArg = Optional[Tuple[int, int, str, Sequence[int]]]

DEFAULT_SOCKET: str

class Region:
    """A POSIX shm segment this process owns; a writable 1-D uint8 buffer
    (buffer protocol) of ``nbytes`` bytes. Unlinked and unmapped when the
    last reference (numpy views included) goes."""

    def __init__(self, nbytes: int, name: str = "") -> None: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def address(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class CudaBuffer:
    """Device memory the client library allocated (vaed/cuda_buffer.h):
    ``nbytes`` zero-filled bytes at device address ``ptr`` on this
    process's CUDA device ``device_ordinal``. Freed when collected."""

    @staticmethod
    def allocate(device_ordinal: int, nbytes: int) -> "CudaBuffer": ...
    @property
    def ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device_ordinal(self) -> int: ...
    @property
    def device_uuid(self) -> str: ...

class DecodeArgs:
    """One decode (or plan) request. ``format``: 1 uint8 NHWC, 2 float32
    NCHW raw, 3 float32 NCHW in [0, 1]. ``stack_tiling`` / ``compile``: 0
    default, 1 off, 2 on, 3 auto. ``fps`` 0 = the model's. ``deadline_ms``
    0 = none. ``group_size`` 0 = the daemon's. ``tiling``: (tile_latent,
    overlap_latent) in latent cells. ``cuda_stream``: the caller's CUstream
    value for requests naming CUDA regions (0 = the legacy default stream).
    ``progress``: called with a Progress dict per event. ``final_range``:
    streamed output; called with {stage ("video" / "audio"), unit
    ("frames" / "samples"), begin, end, total} for each part of the output
    that became final, in order, on the thread that called decode(), before
    it returns (a Python exception it raises goes to sys.unraisablehook and
    the decode goes on; so does one of ``progress``)."""

    def __init__(self, *, model: str = "", latent: TensorArg = None, output: TensorArg = None,
                 audio_latent: TensorArg = None, audio_output: TensorArg = None,
                 format: int = 1, stack_tiling: int = 0, compile: int = 0, fps: float = 0.0,
                 independent_lengths: bool = False, latent_space: int = 1, profile: str = "",
                 deadline_ms: int = 0,
                 group_size: int = 0, inject_faults: List[str] = ...,
                 tiling: Optional[Tuple[int, int]] = None,
                 progress: Optional[Callable[[Dict[str, Any]], None]] = None,
                 cuda_stream: int = 0,
                 final_range: Optional[Callable[[Dict[str, Any]], None]] = None) -> None: ...

class Client:
    """The C++ vaed::client::Client (Hello on construction; reconnects by
    itself). Timeouts in milliseconds."""

    def __init__(self, *, socket: str, client_name: str, connect_timeout_ms: int,
                 request_timeout_ms: int, reconnect_timeout_ms: int,
                 wait_heartbeat_interval_ms: int, heartbeats: bool) -> None: ...
    def close(self) -> None: ...
    @property
    def client_id(self) -> int: ...
    @property
    def reconnects(self) -> int: ...
    def hello(self) -> Dict[str, Any]: ...
    def register_region(self, region: Region) -> int: ...
    def register_cuda_region(self, device_ptr: int, nbytes: int) -> Dict[str, Any]:
        """Registers the CUDA allocation holding ``nbytes`` at ``device_ptr``:
        {region_id, offset_bytes, size_bytes, device_uuid}."""
    def unregister_region(self, region_id: int) -> None: ...
    def plan(self, args: DecodeArgs) -> Dict[str, Any]: ...
    def decode(self, args: DecodeArgs) -> Dict[str, Any]: ...
    def time_decodes(self, args: DecodeArgs, iterations: int) -> List[Tuple[float, float]]: ...
    def status(self) -> Dict[str, Any]: ...
    def release_quarantine(self, client: str) -> Dict[str, Any]: ...

def dlpack_tensor_info(capsule: Any) -> Dict[str, Any]:
    """What an unconsumed "dltensor" capsule describes: data (address),
    device (type, id), dtype (code, bits, lanes), shape, strides (elements
    or None). The capsule keeps owning the tensor."""
