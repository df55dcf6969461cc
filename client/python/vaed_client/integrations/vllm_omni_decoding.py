"""The vaed half of the vLLM-Omni MiniMax-H3 pipelines, importable without
vLLM-Omni: ``VaedH3Decoding`` gives a pipeline class vLLM-Omni's
``decode`` and ``decode_to_mp4`` contracts (vllm-omni 0.30.0,
``vllm_omni/diffusion/models/minimax_h3/pipeline_minimax_h3.py``) with
vaed doing the work, and ``VaedChunkedVideo`` is the
``SupportsChunkedVAEDecode`` producer ``decode_to_mp4`` drives, fed by
vaed's streamed output. Needs torch when called.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from .._client import Client
from ._client_cache import shared_client
from ._requires import require
from .h3_decode import decode_audio, decode_av, stream_video

VLLM_OMNI_INSTALL = "vllm-omni (with its vllm and torch)"
FPS = 24  # MiniMax-H3's frame rate (MINIMAX_H3_FPS)
AUDIO_SAMPLE_RATE = 32000  # MINIMAX_H3_AUDIO_SAMPLE_RATE


class VaedChunkedVideo:
    """A ``SupportsChunkedVAEDecode`` producer on vaed: what vLLM-Omni's
    ``chunked_video.decode_to_mp4(vae, z, ...)`` drives. Chunks are float32
    [1, 3, n, H, W] in ``chunk_value_range`` (0, 1), on the latent's device,
    uncropped (the consumer crops), in order."""

    chunk_value_range: Tuple[float, float] = (0.0, 1.0)

    def __init__(self, client: Client, model: str = "h3") -> None:
        self.client = client
        self.model = model

    def decode_with_chunks(self, z: Any, *, on_chunk: Callable[[Any], None]) -> None:
        """Decodes the normalised video latent `z` [1, 24, T, h, w] with
        vaed's streamed output, calling ``on_chunk`` per final part. An
        exception from ``on_chunk`` is raised after the decode is drained;
        TypeError when ``on_chunk`` is not callable; vaed_client errors
        from the daemon."""
        if not callable(on_chunk):
            raise TypeError("on_chunk must be callable")
        stream_video(self.client, z, on_chunk, model=self.model)


def is_output_owner_rank() -> bool:
    """Whether this process's outputs are the ones vLLM-Omni's executor
    returns: rank 0 of torch.distributed, or any process outside a
    distributed run (vLLM-Omni 0.30.0's own rule for its pipelines)."""
    dist = require("torch.distributed", "torch", __name__)
    return not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0


def check_crop(height: Any, width: Any, frames_shape: Tuple[int, ...]) -> None:
    """ValueError unless 1 <= height <= decoded height and 1 <= width <=
    decoded width (`frames_shape` [..., H, W]); a crop outside the decode
    would silently return fewer pixels than the contract's height x width."""
    for name, value, extent in (("height", height, frames_shape[-2]),
                                ("width", width, frames_shape[-1])):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= extent:
            raise ValueError(f"{name} {value!r} must be an int in [1, {extent}]: the decoded "
                             f"frames are {frames_shape[-2]} x {frames_shape[-1]} px (16 px per "
                             "latent cell)")


def vaed_settings(od_config: Any) -> Dict[str, Optional[str]]:
    """{"socket", "model"} from ``od_config.custom_pipeline_args`` keys
    ``vaed_socket`` (default None: $VAED_SOCKET, else /run/vaed/vaed.sock)
    and ``vaed_model`` (default "h3")."""
    args = getattr(od_config, "custom_pipeline_args", None) or {}
    return {"socket": args.get("vaed_socket"), "model": args.get("vaed_model") or "h3"}


class VaedH3Decoding:
    """Mixin placed before vLLM-Omni's ``MiniMaxH3Pipeline`` (or
    ``MiniMaxH3DecoderPipeline``): its ``decode`` and ``decode_to_mp4`` go
    to vaed. ``vaed_socket`` / ``vaed_model`` pick the daemon and model."""

    vaed_socket: Optional[str] = None
    vaed_model: str = "h3"

    def vaed_client(self) -> Client:
        """This process's Client of ``vaed_socket``."""
        return shared_client(self.vaed_socket)

    def decode(self, video_latent: Any, audio_latent: Any, *, height: int,
               width: int) -> Tuple[Any, Any]:
        """vLLM-Omni's ``MiniMaxH3Pipeline.decode`` contract on vaed, both
        latents in one request. video_latent: the DiT's normalised
        [1, 24, T, h, w]; audio_latent: normalised [2, 32, T_a] (stereo as
        batch). Returns (video float32 [1, 3, F, height, width] in [0, 1]
        on the video latent's device, cropped from the decoded 16 h x 16 w;
        audio float32 [1, 2, 800 T_a] in [-1, 1] at 32 kHz on the audio
        latent's device). Only the output owner rank (is_output_owner_rank)
        asks vaed: the other ranks of a distributed run get uninitialised
        tensors of those shapes and dtypes (the daemon is asked for the
        plan only), as their outputs are never returned. Raises vaed_client
        errors, ValueError for a height or width outside the decoded frames,
        TypeError for a latent that is not a floating torch tensor."""
        client = self.vaed_client()
        planned = planned_outputs(client, video_latent, audio_latent, self.vaed_model)
        check_crop(height, width, planned["video"])
        if not is_output_owner_rank():
            return placeholder_outputs(planned, video_latent, audio_latent, height, width)
        video, audio, _ = decode_av(client, video_latent, audio_latent, model=self.vaed_model)
        return video[..., :height, :width].contiguous(), audio

    def decode_to_mp4(self, video_latent: Any, audio_latent: Any, *, height: int, width: int,
                      max_pending: int = 2, batch_frames: int = 17,
                      video_codec_options: Optional[Dict[str, str]] = None) -> bytes:
        """vLLM-Omni's ``decode_to_mp4`` on vaed: the audio decoded first
        (its own request), then the video streamed chunk by chunk into
        vLLM-Omni's own MP4 session (``chunked_video.decode_to_mp4``: crop
        to height x width, quantise, encode, mux). Returns the MP4 bytes
        (b"" when the session made none). Needs vLLM-Omni (ImportError
        naming it otherwise); raises vaed_client errors, ValueError when
        the session made more than one video. Ranks other than the output
        owner (is_output_owner_rank) return b"" without asking vaed, as
        vLLM-Omni's peer ranks do."""
        if not is_output_owner_rank():
            return b""
        chunked = require("vllm_omni.diffusion.utils.chunked_video", VLLM_OMNI_INSTALL,
                          "decode_to_mp4")
        client = self.vaed_client()
        audio, rate = decode_audio(client, audio_latent, model=self.vaed_model)
        videos = chunked.decode_to_mp4(
            VaedChunkedVideo(client, self.vaed_model), video_latent, fps=FPS,
            audio_waveforms=[audio[0].cpu().numpy()], audio_sample_rate=rate,
            batch_frames=batch_frames, max_pending=max_pending,
            video_codec_options=video_codec_options, crop=(height, width))
        if not videos:
            return b""
        if len(videos) != 1:
            raise ValueError("MiniMax-H3 chunked MP4 encoding expects one output per decoder")
        return videos[0]


def planned_outputs(client: Client, video_latent: Any, audio_latent: Any,
                    model: str) -> Dict[str, Tuple[int, ...]]:
    """The daemon's plan of the latents' shapes (nothing decoded or read):
    {"video": (1, 3, F, H, W), "audio": (1, channels, S)} of the decode.
    Raises vaed_client errors for shapes the daemon refuses, TypeError
    for a latent without a shape."""
    for name, latent in (("video_latent", video_latent), ("audio_latent", audio_latent)):
        if not hasattr(latent, "shape"):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(latent).__name__}")
    plan = client.plan(tuple(video_latent.shape), tuple(audio_latent.shape), model=model,
                       format="float32_unit", independent_lengths=True)
    channels, samples = (int(d) for d in plan["audio"]["output_shape"])
    return {"video": (1, 3, int(plan["frames"]), int(plan["height_px"]), int(plan["width_px"])),
            "audio": (1, channels, samples)}


def placeholder_outputs(planned: Dict[str, Tuple[int, ...]], video_latent: Any,
                        audio_latent: Any, height: int, width: int) -> Tuple[Any, Any]:
    """What a rank that is not the output owner returns from decode: torch
    float32 tensors of the owner's shapes ([1, 3, F, height, width] and
    [1, channels, S], from `planned`) on the latents' devices,
    uninitialised (nothing decoded)."""
    torch = require("torch", "torch", __name__)
    video = torch.empty((*planned["video"][:3], height, width), dtype=torch.float32,
                        device=video_latent.device)
    audio = torch.empty(planned["audio"], dtype=torch.float32, device=audio_latent.device)
    return video, audio
