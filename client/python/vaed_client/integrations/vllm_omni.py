"""vLLM-Omni's MiniMax-H3 pipelines with their VAE decode on vaed.

The one line (an argument of vLLM-Omni's engine / ``Omni(...)``)::

    custom_pipeline_args={"pipeline_class":
        "vaed_client.integrations.vllm_omni.MiniMaxH3VaedPipeline",
        "vaed_socket": "/run/vaed/vaed.sock", "vaed_model": "h3"}   # both optional

* ``MiniMaxH3VaedPipeline``: vLLM-Omni's ``MiniMaxH3Pipeline`` whose
  ``decode`` / ``decode_to_mp4`` go to vaed (``VaedH3Decoding``) and which
  loads no VAE decoder weights in the worker: with the VAE encoder enabled
  (keyframes, references) the video and audio VAEs are built encode-only
  (vLLM-Omni's own ``encode_only=True``); with it disabled
  (``model_loaded={"vae_encoder": False}``) no VAE weights at all.
* ``MiniMaxH3VaedDecoderPipeline``: the same for the decoder stage of the
  three-stage topology, vLLM-Omni's ``MiniMaxH3DecoderPipeline`` (reads its
  latents from the ``minimax_h3_decode`` payload); it loads no VAE weights
  and downloads none. That class is not in vllm-omni 0.30.0 (it is in
  vLLM-Omni's repository after it); using this name with 0.30.0 raises
  ImportError.

Both classes are made on first access, so importing this module needs no
vLLM-Omni; the access raises ImportError naming what to install.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any, Iterator

from ._requires import require
from .vllm_omni_decoding import VLLM_OMNI_INSTALL, VaedH3Decoding, vaed_settings

PIPELINE_MODULE = "vllm_omni.diffusion.models.minimax_h3.pipeline_minimax_h3"
DECODER_MODULE = "vllm_omni.diffusion.models.minimax_h3.pipeline_minimax_h3_decoder"

# MiniMaxH3VaedPipeline and MiniMaxH3VaedDecoderPipeline are made on first
# access (module __getattr__), so star-imports do not need vLLM-Omni.
__all__ = ["VaedH3Decoding"]

_patch_lock = threading.Lock()


@contextlib.contextmanager
def _patched(module: Any, **names: Any) -> Iterator[None]:
    """Replaces module-level names for the duration (a base class's
    constructor resolves them there), restoring them after."""
    with _patch_lock:
        saved = {name: getattr(module, name) for name in names}
        try:
            for name, value in names.items():
                setattr(module, name, value)
            yield
        finally:
            for name, value in saved.items():
                setattr(module, name, value)


def _placeholder_vae_class(nn: Any) -> type:
    class VaedDecodesThisVAE(nn.Module):
        """Stands where a decode-only VAE would be: no weights, nothing to
        move; decoding goes to vaed (the pipeline's decode methods)."""

        chunk_value_range = (0.0, 1.0)

        def __init__(self) -> None:
            super().__init__()
            self.encoder_component = self
            self.decoder_component = self
            self.parallel_size = 1

        def load_to_device(self) -> None:
            pass

        def offload_to_cpu(self) -> None:
            pass

        def set_omni_component_cache(self, cache: Any) -> None:
            pass

        def is_distributed_enabled(self) -> bool:
            return False

        def decode_latent(self, latent: Any) -> Any:
            """Named by the pipeline's profiler targets; never called by
            the vaed pipelines. Raises RuntimeError."""
            raise RuntimeError("this VAE has no weights: the pipeline decodes through vaed")

    return VaedDecodesThisVAE


def _vae_factory(real_class: type, placeholder: type) -> Any:
    """What the pipeline constructs in place of `real_class`: the
    placeholder when it asks for a decode-only VAE, else `real_class`
    encode-only (the encoder's weights alone)."""
    def make(component_path: str, *, device: Any, load_device: Any = None,
             encode_only: bool = False, decode_only: bool = False,
             trust_remote_code: bool = False) -> Any:
        if decode_only:
            return placeholder()
        return real_class(component_path, device=device, load_device=load_device,
                          encode_only=True, trust_remote_code=trust_remote_code)
    return make


def _without_vae_decoders(module: Any, **extra: Any) -> Any:
    placeholder = _placeholder_vae_class(require("torch.nn", VLLM_OMNI_INSTALL, __name__))
    return _patched(module,
                    MiniMaxH3VideoVAE=_vae_factory(module.MiniMaxH3VideoVAE, placeholder),
                    MiniMaxH3AudioVAE=_vae_factory(module.MiniMaxH3AudioVAE, placeholder),
                    **extra)


def _pipeline_class() -> type:
    module = require(PIPELINE_MODULE, VLLM_OMNI_INSTALL, f"{__name__}.MiniMaxH3VaedPipeline")

    class MiniMaxH3VaedPipeline(VaedH3Decoding, module.MiniMaxH3Pipeline):
        """vLLM-Omni's MiniMaxH3Pipeline with decode and decode_to_mp4 on
        vaed and no VAE decoder weights in the worker (module docstring)."""

        def __init__(self, *, od_config: Any, prefix: str = "") -> None:
            with _without_vae_decoders(module):
                super().__init__(od_config=od_config, prefix=prefix)
            settings = vaed_settings(od_config)
            self.vaed_socket, self.vaed_model = settings["socket"], settings["model"]

    return MiniMaxH3VaedPipeline


# The decoder stage finds (and may download) the VAE checkpoint through a
# module function whose name and signature changed between vLLM-Omni
# revisions: (od_config) at aac71378, (model, revision, task_type) later.
# vaed needs no checkpoint there, so each is replaced while the stage is built.
DECODER_PATH_RESOLVERS = ("_resolve_decoder_model_path", "resolve_minimax_h3_decoder_model_path")


def _model_path_as_given(first: Any, *rest: Any, **named: Any) -> Path:
    """Stands for a decoder-stage resolver: the model path it was given
    (``od_config.model``, or the model string), nothing resolved or
    downloaded."""
    del rest, named
    return Path(str(getattr(first, "model", first)))


def _decoder_resolvers(module: Any) -> dict:
    """{name: _model_path_as_given} for the resolvers `module` has;
    ImportError naming them when it has none (a vLLM-Omni whose decoder
    stage this integration does not know)."""
    found = {name: _model_path_as_given for name in DECODER_PATH_RESOLVERS
             if hasattr(module, name)}
    if not found:
        raise ImportError(
            f"{module.__name__} has none of {', '.join(DECODER_PATH_RESOLVERS)}: this vLLM-Omni's "
            "decoder stage resolves its VAE checkpoint in a way vaed_client.integrations.vllm_omni "
            "does not know; use MiniMaxH3VaedPipeline, or a vaed_client made for this vLLM-Omni")
    return found


def _decoder_pipeline_class() -> type:
    module = require(DECODER_MODULE, "a vllm-omni newer than 0.30.0 (it has no decoder stage)",
                     f"{__name__}.MiniMaxH3VaedDecoderPipeline")

    class MiniMaxH3VaedDecoderPipeline(VaedH3Decoding, module.MiniMaxH3DecoderPipeline):
        """vLLM-Omni's decoder-stage MiniMaxH3DecoderPipeline on vaed: no
        VAE weights loaded or downloaded (module docstring)."""

        def __init__(self, *, od_config: Any, prefix: str = "") -> None:
            with _without_vae_decoders(module, **_decoder_resolvers(module)):
                super().__init__(od_config=od_config, prefix=prefix)
            settings = vaed_settings(od_config)
            self.vaed_socket, self.vaed_model = settings["socket"], settings["model"]

    return MiniMaxH3VaedDecoderPipeline


_builders = {"MiniMaxH3VaedPipeline": _pipeline_class,
             "MiniMaxH3VaedDecoderPipeline": _decoder_pipeline_class}
_built: dict = {}


def __getattr__(name: str) -> Any:
    if name not in _builders:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        cls = _builders[name]()
        cls.__module__, cls.__qualname__ = __name__, name
        _built[name] = cls
    return _built[name]
