"""vaed in the pipelines that serve MiniMax-H3: one line switches their
decode to a running vaed daemon.

* :mod:`vaed_client.integrations.diffusers`: ``VaedH3DecodeStep``, a
  Modular-pipeline block that replaces ``blocks.sub_blocks["decode"]`` of
  diffusers' ``MiniMaxH3Blocks``, and ``decode_latents`` for latents kept
  without the decode step.
* :mod:`vaed_client.integrations.vllm_omni`: ``MiniMaxH3VaedPipeline`` and
  ``MiniMaxH3VaedDecoderPipeline``, vLLM-Omni pipeline classes selected with
  ``custom_pipeline_args={"pipeline_class": ...}``.
* :mod:`vaed_client.integrations.h3_decode`: what both call, plain functions
  over torch tensors (no diffusers or vLLM-Omni needed).

Nothing is imported here: each submodule imports torch, diffusers or
vLLM-Omni when it is used, and raises ImportError naming what to install
when they are absent. ``import vaed_client`` never needs any of them.
"""
