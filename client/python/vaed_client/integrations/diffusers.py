"""diffusers' MiniMax-H3 Modular pipeline with its decode on vaed.

The one line (``blocks`` being ``diffusers.modular_pipelines.MiniMaxH3Blocks()``)::

    from vaed_client.integrations.diffusers import VaedH3DecodeStep
    blocks.sub_blocks["decode"] = VaedH3DecodeStep()   # socket=..., model="h3"

``VaedH3DecodeStep`` takes the place of diffusers' ``MiniMaxH3DecodeStep``
(its video and audio sub-steps): the same inputs (``latents``, the DiT's
normalised video latent [1, C, T, h, w]; ``audio_latents``, normalised
[2, 32, T_a], stereo as batch; ``output_type`` "pil", "np" or "pt") and
outputs (``videos`` as ``VideoProcessor.postprocess_video`` gives them for
``output_type``, "pt": float32 [1, F, 3, H, W] in [0, 1]; ``audio`` float32
[1, 2, S] in [-1, 1]; ``sampling_rate`` int, 32000), with both latents
decoded in ONE vaed request. The pipeline then needs neither ``vae`` nor
``audio_vae`` for decoding (``vae`` stays a component where the keyframe
encoder uses it).

``decode_latents`` decodes latents kept without the decode step.

Importing this module needs nothing beyond vaed_client; using
``VaedH3DecodeStep`` needs torch and diffusers, ``decode_latents`` torch
and diffusers (its VideoProcessor): ImportError names what to install.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ._client_cache import shared_client
from ._requires import require
from .h3_decode import decode_av

DIFFUSERS_INSTALL = "diffusers==0.42.1 transformers==5.25.0 torch"
OUTPUT_TYPES = ("pil", "np", "pt")
VAE_SCALE_FACTOR = 16  # pixels per latent cell, the VideoProcessor config of diffusers' step

__all__ = ["decode_latents"]  # and VaedH3DecodeStep, made on first access (module __getattr__)


def _diffusers(module: str = "diffusers") -> Any:
    require("torch", DIFFUSERS_INSTALL, "vaed_client.integrations.diffusers")
    return require(module, DIFFUSERS_INSTALL, "vaed_client.integrations.diffusers")


def _check_output_type(output_type: str) -> None:
    if output_type not in OUTPUT_TYPES:
        raise ValueError(f"`output_type` must be one of 'pil', 'np' or 'pt', got {output_type!r}")


def _video_processor() -> Any:
    processing = _diffusers("diffusers.video_processor")
    return processing.VideoProcessor(vae_scale_factor=VAE_SCALE_FACTOR, do_normalize=False)


def decode_latents(videos: Any, audio: Any, *, latent_space: str, output_type: str = "pt",
                   socket: Optional[str] = None, model: str = "h3",
                   video_processor: Any = None) -> Tuple[Any, Any, int]:
    """Decodes MiniMax-H3 latents held outside the pipeline in one vaed
    request, with the decode step's post-processing.

    videos: the video latent, torch [1, C, T, h, w] (C = 24 for the
    released model). audio: the audio latent, torch [2, 32, T_a] (stereo
    as batch). latent_space (required): "normalized" for the latents the
    denoise step leaves in the pipeline state (diffusers 0.42.1's
    ``latents`` / ``audio_latents``: its decode step de-normalises them),
    "denormalized" for latents already ``latent * latents_std +
    latents_mean`` (what ``AutoencoderKLMiniMaxH3.decode`` takes).

    Returns (videos, audio, sampling_rate) as the decode step's outputs:
    videos per `output_type` ("pt": float32 [1, F, 3, H, W] in [0, 1];
    "np": float32 [1, F, H, W, 3]; "pil": PIL images), audio float32
    [1, 2, S] in [-1, 1], sampling_rate 32000. Raises ValueError for a bad
    output_type or latent_space, vaed_client errors from the daemon,
    ImportError without torch/diffusers."""
    _check_output_type(output_type)
    processor = video_processor if video_processor is not None else _video_processor()
    video, waveform, rate = decode_av(shared_client(socket), videos, audio, model=model,
                                      latent_space=latent_space)
    return processor.postprocess_video(video, output_type=output_type), waveform, rate


def _step_class() -> type:
    """Builds VaedH3DecodeStep over the installed diffusers."""
    torch = require("torch", DIFFUSERS_INSTALL, "vaed_client.integrations.diffusers")
    modular = _diffusers("diffusers.modular_pipelines")
    utils = _diffusers("diffusers.modular_pipelines.modular_pipeline_utils")
    frozen_dict = _diffusers("diffusers.configuration_utils").FrozenDict
    video_processor_class = _diffusers("diffusers.video_processor").VideoProcessor

    class VaedH3DecodeStep(modular.ModularPipelineBlocks):
        """Decodes MiniMax-H3 video and audio latents in one vaed request:
        the drop-in for ``MiniMaxH3Blocks().sub_blocks["decode"]``. Inputs,
        outputs and dtypes as diffusers' ``MiniMaxH3DecodeStep`` (module
        docstring). socket: the daemon's control socket (None:
        $VAED_SOCKET, else /run/vaed/vaed.sock); model: the daemon's H3
        model name (kind ``h3``, video and audio)."""

        model_name = "minimax-h3"

        def __init__(self, socket: Optional[str] = None, model: str = "h3") -> None:
            super().__init__()
            self.vaed_socket = socket
            self.vaed_model = model

        @property
        def description(self) -> str:
            return ("Decodes the generated video latents and audio latents through a vaed daemon "
                    "in one request (de-normalisation, tiled decode, inverse ImageNet "
                    "normalisation and clamp happen there), then post-processes the video.")

        @property
        def expected_components(self) -> list:
            return [utils.ComponentSpec(
                "video_processor", video_processor_class,
                config=frozen_dict({"vae_scale_factor": VAE_SCALE_FACTOR, "do_normalize": False}),
                default_creation_method="from_config")]

        @property
        def inputs(self) -> list:
            return [
                utils.InputParam(name="latents", type_hint=torch.Tensor, required=True,
                                 description="The generated video latents (normalised)."),
                utils.InputParam(name="audio_latents", type_hint=torch.Tensor, required=True,
                                 description="The generated audio latents (normalised), one "
                                             "batch item per stereo channel."),
                utils.InputParam.template("output_type",
                                          description="Output format: 'pil', 'np' or 'pt'."),
            ]

        @property
        def intermediate_outputs(self) -> list:
            return [
                utils.OutputParam.template("videos", description="The generated video."),
                utils.OutputParam("audio", type_hint=torch.Tensor,
                                  description="The generated soundtrack, (1, 2, num_samples)."),
                utils.OutputParam("sampling_rate", type_hint=int,
                                  description="Sample rate of the soundtrack in Hz."),
            ]

        @torch.no_grad()
        def __call__(self, components: Any, state: Any) -> Tuple[Any, Any]:
            block_state = self.get_block_state(state)
            block_state.videos, block_state.audio, block_state.sampling_rate = decode_latents(
                block_state.latents, block_state.audio_latents, latent_space="normalized",
                output_type=block_state.output_type, socket=self.vaed_socket,
                model=self.vaed_model, video_processor=components.video_processor)
            self.set_block_state(state, block_state)
            return components, state

    VaedH3DecodeStep.__module__, VaedH3DecodeStep.__qualname__ = __name__, "VaedH3DecodeStep"
    return VaedH3DecodeStep


_built: dict = {}


def __getattr__(name: str) -> Any:
    if name != "VaedH3DecodeStep":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built[name] = _step_class()
    return _built[name]
