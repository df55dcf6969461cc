"""vaed_client: decode diffusion VAE latents through the vaed daemon.

A DiT worker hands its latents to the node's vaed daemon and gets frames
and audio back, zero-copy through POSIX shared memory::

    import vaed_client

    with vaed_client.Client("/run/vaed/vaed.sock") as vae:
        latent = vae.alloc_latent((1, 24, 7, 16, 16))   # H3 video latent, in place
        latent[...] = dit_output                         # write it there
        result = vae.decode(latent, audio_latent, fps=24)
        result.frames      # uint8 [frames, height_px, width_px, 3], a view of shm
        result.audio       # float32 [channels, samples]
        result.timings     # {"decode": 1.23, "video_vae.decode_latent": ...}

        for part in vae.decode_stream(latent, audio_latent, fps=24):
            ...  # a StreamPart per final range of frames or samples, last the DecodeResult

No PyTorch import here: torch tensors are read through DLPack. Errors raise
the classes in :mod:`vaed_client.errors`.
"""

from .errors import (Busy, ClientFault, DaemonUnavailable, DeadlineExceeded, NotFound,
                     PermissionDenied, Quarantined, ResourceExhausted, VaedError,
                     ValidationError, VersionMismatch)
from ._client import DEFAULT_SOCKET, Client
from ._cuda_buffer import CudaArray
from ._regions import SharedRegion, sweep_stale_segments
from ._result import DecodeResult, StreamPart
from .safetensors import read_safetensors

__version__ = "0.1.0"

__all__ = [
    "Client", "CudaArray", "DecodeResult", "SharedRegion", "StreamPart", "DEFAULT_SOCKET",
    "read_safetensors", "sweep_stale_segments",
    "VaedError", "ValidationError", "NotFound", "Quarantined", "Busy", "DaemonUnavailable",
    "ResourceExhausted", "DeadlineExceeded", "PermissionDenied", "ClientFault",
    "VersionMismatch",
]
