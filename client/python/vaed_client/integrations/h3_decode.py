"""MiniMax-H3 decodes through vaed for the pipeline integrations, over torch
tensors: what the diffusers block and the vLLM-Omni pipelines call. Needs
torch (imported on first use), never diffusers or vLLM-Omni.

Latent contracts (the daemon checks them; docs/h3.md):
  video  float32 [1, 24, T, h, w] (any float dtype is cast), 16 px per cell
  audio  float32 [channels, 32, T_a], channels 1 or 2 (stereo as batch)
``latent_space``: "normalized" (the DiT's latents; vaed de-normalises them
with the checkpoint's latents mean/std) or "denormalized" (already
``latent * std + mean``), for both latents of a request.

Outputs are vaed's ``float32_unit`` frames: the decoder output with the
inverse ImageNet normalisation (x * (0.229, 0.224, 0.225) + (0.485, 0.456,
0.406)) and a clamp to [0, 1], what both pipelines compute themselves; and
the waveform, float32 in [-1, 1] at 32000 Hz.

Tensors on a CUDA device go to the daemon by IPC when it has CUDA ranks
(unrun on a GPU), else through host memory; outputs come back through the
client's host output region and are moved to the latent's device.

The Client is shared by the threads of a process (_client_cache.py): every
decode asks for outputs that own their memory (``copy=True``), so another
thread's decode on the same Client can never overwrite frames between the
reply and their copy into torch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from .._client import Client
from .._result import StreamPart
from ._requires import require

UNIT_FORMAT = "float32_unit"


def _torch() -> Any:
    return require("torch", "torch", "vaed_client.integrations")


def request_options(latent_space: str, model: str) -> dict:
    """Keyword arguments of Client.decode/decode_stream/plan shared by the
    integrations: float32_unit output, the model, no A/V length rule (the
    pipelines decode whatever lengths their DiT made) and ``latent_space``
    (the Client checks it: ValidationError, a ValueError, naming it)."""
    return {"model": model, "format": UNIT_FORMAT, "independent_lengths": True,
            "latent_space": latent_space}


def to_daemon(client: Client, tensor: Any, name: str) -> Any:
    """What the daemon reads for the torch latent `tensor` (argument `name`):
    a CUDA float32 tensor as it is when the daemon has CUDA ranks (read in
    place over IPC), otherwise a contiguous float32 CPU tensor (a copy
    unless it already is one). TypeError naming `name` for anything but a
    torch tensor of a real floating dtype (an integer, bool or complex
    latent is a caller's mistake, not something to cast)."""
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype (float32, float16, bfloat16), "
                        f"got {tensor.dtype}")
    tensor = tensor.detach()
    if tensor.is_cuda and client.cuda_devices():
        return tensor.to(torch.float32).contiguous()
    return tensor.to("cpu", torch.float32).contiguous()


def frames_to_video(frames: Any, device: Any) -> Any:
    """vaed's float32 frames [F, 3, H, W] (numpy, owning its memory: the
    decodes here ask for copies) -> a torch float32 tensor [1, 3, F, H, W]
    on `device`, contiguous."""
    torch = _torch()
    video = torch.from_numpy(frames).permute(1, 0, 2, 3).unsqueeze(0)
    return video.to(device).contiguous()


def waveform_to_audio(audio: Any, device: Any) -> Any:
    """vaed's waveform float32 [channels, S] (numpy, owning its memory) -> a
    torch float32 tensor [1, channels, S] on `device`."""
    torch = _torch()
    return torch.from_numpy(audio).unsqueeze(0).to(device)


def decode_av(client: Client, video_latent: Any, audio_latent: Any, *, model: str = "h3",
              latent_space: str = "normalized") -> Tuple[Any, Any, int]:
    """Decodes a video latent and its audio latent in ONE vaed request.

    Returns (video, audio, sample_rate): video float32 [1, 3, F, H, W] in
    [0, 1] on the video latent's device; audio float32 [1, channels, S] in
    [-1, 1] on the audio latent's device; sample_rate in Hz (32000). Raises
    vaed_client errors (ValidationError for a refused shape or
    latent_space, DaemonUnavailable, ...)."""
    result = client.decode(to_daemon(client, video_latent, "video_latent"),
                           to_daemon(client, audio_latent, "audio_latent"), copy=True,
                           **request_options(latent_space, model))
    return (frames_to_video(result.frames, video_latent.device),
            waveform_to_audio(result.audio, audio_latent.device), int(result.sample_rate))


def decode_audio(client: Client, audio_latent: Any, *, model: str = "h3",
                 latent_space: str = "normalized") -> Tuple[Any, int]:
    """Decodes an audio latent alone: (audio float32 [1, channels, S] on the
    latent's device, sample_rate in Hz). Raises as :func:`decode_av`."""
    result = client.decode(None, to_daemon(client, audio_latent, "audio_latent"), copy=True,
                           **request_options(latent_space, model))
    return waveform_to_audio(result.audio, audio_latent.device), int(result.sample_rate)


def stream_video(client: Client, video_latent: Any, on_chunk: Callable[[Any], None], *,
                 model: str = "h3", latent_space: str = "normalized") -> int:
    """Decodes a video latent with vaed's streamed output and calls
    `on_chunk` with each part as soon as the daemon has made it final:
    float32 [1, 3, n, H, W] in [0, 1] on the latent's device (H3: 17 frames
    per temporal window, the last part the rest, up to 22), in order, covering
    every frame once. An exception from `on_chunk` stops the calls; the
    decode is drained (its remaining parts discarded) and the first such
    exception is raised after it. Returns the number of frames."""
    device = video_latent.device
    error: Optional[BaseException] = None
    frames = 0
    for part in client.decode_stream(to_daemon(client, video_latent, "video_latent"), copy=True,
                                     **request_options(latent_space, model)):
        if not isinstance(part, StreamPart):
            frames = int(part.frames.shape[0])
            continue
        if part.stage != "video" or error is not None:
            continue
        try:
            on_chunk(frames_to_video(part.data, device))
        except BaseException as e:  # noqa: BLE001  re-raised once the decode is drained
            error = e
    if error is not None:
        raise error
    return frames
