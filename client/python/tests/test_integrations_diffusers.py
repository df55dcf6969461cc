"""vaed_client.integrations.diffusers against diffusers itself: tiny seeded
MiniMax-H3 VAEs built with diffusers are saved in its layout, served by a
real vaed, and diffusers' own decode step and VaedH3DecodeStep decode the
same latents. Needs torch and diffusers (scripts/integration-env.sh makes
the environment); skips with a message without them."""

from __future__ import annotations


import numpy as np
import pytest

from conftest import (GOLDEN_AUDIO_MAX_ABS, Daemon, assert_golden_f32, assert_golden_u8)

ENV_HINT = "run under scripts/integration-env.sh's python (pinned diffusers)"
torch = pytest.importorskip("torch", reason=f"torch is absent: {ENV_HINT}")
pytest.importorskip("diffusers", reason=f"diffusers is absent: {ENV_HINT}")
pytest.importorskip("transformers", reason=f"transformers is absent: {ENV_HINT}")

import h3_tiny_diffusers as tiny  # noqa: E402
from diffusers.modular_pipelines import MiniMaxH3Blocks  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import (  # noqa: E402
    MiniMaxH3DecodeStep)
from vaed_client.integrations import diffusers as vaed_diffusers  # noqa: E402

# The documented tolerance of raw float32 video against a reference decoder
# (docs/h3.md "Exactness", tests/common/golden_tolerance.h); frames in [0, 1]
# are those values times 0.229 or less, so it holds for them a fortiori.
VIDEO_F32_MAX_ABS = 1e-5
OUTPUTS = ["videos", "audio", "sampling_rate"]
# 12 latent frames: two temporal windows (the cross-fade); 2 x 20 cells:
# 32 x 320 px, two 256-px tiles across with a 192-px blend. diffusers tiles
# by default (the released setting, 256-px tiles, >= 64-px overlaps) and so
# does vaed (always): the comparison keeps both tiled.
VIDEO_SHAPE = (1, tiny.VIDEO_CONFIG["latent_channels"], 12, 2, 20)
AUDIO_SHAPE = (2, tiny.AUDIO_LATENT_CHANNELS, 65)  # round(39 frames / 24 fps * 40)


@pytest.fixture(scope="module")
def models():
    return tiny.build(seed=20261206)


@pytest.fixture(scope="module")
def tiny_daemon(models, tmp_path_factory):
    model_arg = tiny.save(*models, tmp_path_factory.mktemp("h3-tiny-diffusers"))
    d = Daemon(["--intra-op-threads", "2", "--model", model_arg])
    yield d
    code = d.stop()
    log = d.log()
    d.close()
    assert code == 0, f"vaed exited with {code}:\n{log}"


@pytest.fixture(scope="module")
def latents():
    generator = torch.Generator().manual_seed(7)
    return (torch.randn(VIDEO_SHAPE, generator=generator),
            torch.randn(AUDIO_SHAPE, generator=generator))


def run_step(step, latents, output_type="pt", **components):
    pipe = step.init_pipeline()
    if components:
        pipe.update_components(**components)
    video, audio = latents
    return pipe(latents=video.clone(), audio_latents=audio.clone(), output_type=output_type,
                output=OUTPUTS)


def to_u8(frames) -> np.ndarray:
    """[0, 1] floats quantised as VideoProcessor's "np" -> "pil" path does."""
    return (np.asarray(frames) * 255).round().astype(np.uint8)


def compare(what, ours, reference) -> None:
    assert type(ours["sampling_rate"]) is int and ours["sampling_rate"] == reference["sampling_rate"]
    for key in ("videos", "audio"):
        assert ours[key].shape == reference[key].shape, (key, ours[key].shape, reference[key].shape)
        assert ours[key].dtype == reference[key].dtype, (key, ours[key].dtype, reference[key].dtype)
    assert_golden_f32(f"{what} video [0, 1]", ours["videos"].numpy(), reference["videos"].numpy(),
                      VIDEO_F32_MAX_ABS)
    assert_golden_u8(f"{what} video as uint8", to_u8(ours["videos"]), to_u8(reference["videos"]))
    assert_golden_f32(f"{what} audio", ours["audio"].numpy(), reference["audio"].numpy(),
                      GOLDEN_AUDIO_MAX_ABS)


def test_vaed_step_matches_diffusers_decode_step(models, tiny_daemon, latents):
    video_vae, audio_vae = models
    reference = run_step(MiniMaxH3DecodeStep(), latents, vae=video_vae, audio_vae=audio_vae)
    ours = run_step(vaed_diffusers.VaedH3DecodeStep(socket=tiny_daemon.socket), latents)
    assert tuple(reference["videos"].shape) == (1, 39, 3, 32, 320)
    assert tuple(reference["audio"].shape) == (1, 2, 65 * 800)
    compare("VaedH3DecodeStep vs MiniMaxH3DecodeStep", ours, reference)


def test_vaed_step_np_output_matches(models, tiny_daemon, latents):
    video_vae, audio_vae = models
    reference = run_step(MiniMaxH3DecodeStep(), latents, "np", vae=video_vae, audio_vae=audio_vae)
    ours = run_step(vaed_diffusers.VaedH3DecodeStep(socket=tiny_daemon.socket), latents, "np")
    assert type(ours["videos"]) is type(reference["videos"])
    assert ours["videos"].shape == reference["videos"].shape
    assert ours["videos"].dtype == reference["videos"].dtype
    assert_golden_f32("np video", ours["videos"], reference["videos"], VIDEO_F32_MAX_ABS)


def test_vaed_step_replaces_the_decode_sub_block(tiny_daemon):
    blocks = MiniMaxH3Blocks()
    original = blocks.sub_blocks["decode"]
    blocks.sub_blocks["decode"] = vaed_diffusers.VaedH3DecodeStep(socket=tiny_daemon.socket)
    replaced = blocks.sub_blocks["decode"]
    assert {p.name for p in replaced.inputs} == {p.name for p in original.inputs}
    assert {p.name for p in replaced.outputs} == {p.name for p in original.outputs}
    assert [p.name for p in blocks.outputs] == OUTPUTS
    assert "audio_vae" not in {c.name for c in replaced.expected_components}


def test_vaed_step_refuses_latent_output_type_as_diffusers_does(tiny_daemon, latents):
    with pytest.raises(ValueError, match="output_type"):
        run_step(vaed_diffusers.VaedH3DecodeStep(socket=tiny_daemon.socket), latents, "latent")


def denormalize(video, audio, models):
    video_vae, audio_vae = models
    vm = torch.tensor(video_vae.config.latents_mean).view(1, -1, 1, 1, 1)
    vs = torch.tensor(video_vae.config.latents_std).view(1, -1, 1, 1, 1)
    am = torch.tensor(audio_vae.config.latents_mean).view(1, -1, 1)
    as_ = torch.tensor(audio_vae.config.latents_std).view(1, -1, 1)
    return video * vs + vm, audio * as_ + am


def diffusers_decode(models, video, audio):
    """AutoencoderKL decode of de-normalised latents plus the decode step's
    own post-processing (pixel mean/std of MiniMaxH3ModularPipeline)."""
    video_vae, audio_vae = models
    with torch.no_grad():
        frames = video_vae.decode(video, return_dict=False)[0]
        waveform = audio_vae.decode(audio, return_dict=False)[0]
    std = torch.tensor((0.229, 0.224, 0.225)).view(1, -1, 1, 1, 1)
    mean = torch.tensor((0.485, 0.456, 0.406)).view(1, -1, 1, 1, 1)
    frames = (frames.float() * std + mean).clamp(0, 1)
    return {"videos": frames.permute(0, 2, 1, 3, 4), "audio": waveform.float().permute(1, 0, 2),
            "sampling_rate": audio_vae.config.sampling_rate}


def test_decode_latents_normalized_equals_the_step(tiny_daemon, latents):
    video, audio = latents
    step = run_step(vaed_diffusers.VaedH3DecodeStep(socket=tiny_daemon.socket), latents)
    videos, waveform, rate = vaed_diffusers.decode_latents(
        video, audio, latent_space="normalized", socket=tiny_daemon.socket)
    assert rate == step["sampling_rate"] == 32000
    assert torch.equal(videos, step["videos"]) and torch.equal(waveform, step["audio"])


def test_decode_latents_denormalized_matches_diffusers(models, tiny_daemon, latents):
    video, audio = denormalize(*latents, models)
    reference = diffusers_decode(models, video, audio)
    videos, waveform, rate = vaed_diffusers.decode_latents(
        video, audio, latent_space="denormalized", socket=tiny_daemon.socket)
    compare("decode_latents(denormalized) vs AutoencoderKL decode",
            {"videos": videos, "audio": waveform, "sampling_rate": rate}, reference)


def test_decode_latents_checks_its_arguments(tiny_daemon, latents):
    video, audio = latents
    with pytest.raises(ValueError, match="latent_space"):
        vaed_diffusers.decode_latents(video, audio, latent_space="raw", socket=tiny_daemon.socket)
    with pytest.raises(ValueError, match="output_type"):
        vaed_diffusers.decode_latents(video, audio, latent_space="normalized",
                                      output_type="latent", socket=tiny_daemon.socket)
