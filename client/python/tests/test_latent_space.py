"""Decode.latent_space through the Python client and vaectl: a de-normalised
latent sent as "denormalized" decodes to the bytes of its normalised latent
sent as "normalized" (the default), video and audio in one request; a model
without latent normalisation refuses "denormalized" naming the field, and
the daemon keeps serving.

The de-normalised latents are the golden `latent_denorm` tensors of
../shared/golden/h3: the official pipeline's ``latent * std + mean`` of each
case's `latent` (README of the golden pack).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import vaed_client
from conftest import H3, VAECTL, need


def golden_pair(case: str) -> tuple:
    """(latent, latent_denorm) of a golden case file."""
    tensors = vaed_client.read_safetensors(str(need(H3 / f"{case}.safetensors")))
    return tensors["latent"], tensors["latent_denorm"]


def test_denormalized_latents_decode_to_the_bytes_of_their_normalized_ones(client):
    video, video_denorm = golden_pair("video_case_grid_2x2")
    audio, audio_denorm = golden_pair("audio_case_stereo")
    for fmt in ("float32", "uint8"):
        normal = client.decode(video, audio, model="h3", format=fmt, independent_lengths=True,
                               copy=True)
        denorm = client.decode(video_denorm, audio_denorm, model="h3", format=fmt,
                               independent_lengths=True, latent_space="denormalized", copy=True)
        assert normal.frames.tobytes() == denorm.frames.tobytes(), f"{fmt} frames differ"
        assert normal.audio.tobytes() == denorm.audio.tobytes(), "audio samples differ"
    # Not ignored: the de-normalised latent sent as normalized is
    # de-normalised twice.
    twice = client.decode(video_denorm, model="h3", copy=True).frames
    once = client.decode(video, model="h3", copy=True).frames
    assert not np.array_equal(twice, once), "latent_space had no effect"
    assert once.tobytes() == normal.frames.tobytes()


def test_streamed_denormalized_decode_equals_the_normalized_one(client):
    video, video_denorm = golden_pair("video_case_two_windows_two_tiles")
    expected = client.decode(video, model="h3", copy=True).frames
    parts = list(client.decode_stream(video_denorm, model="h3", latent_space="denormalized",
                                      copy=True))
    assert isinstance(parts[-1], vaed_client.DecodeResult)
    assert parts[-1].frames.tobytes() == expected.tobytes()
    assert len(parts) > 2, "two temporal windows should stream in two parts"


def test_a_model_without_normalization_refuses_denormalized_and_keeps_serving(client):
    latent = np.random.default_rng(0).standard_normal((1, 32, 8, 8)).astype(np.float32)
    with pytest.raises(vaed_client.ValidationError, match="latent_space"):
        client.decode(latent, model="demo", latent_space="denormalized")
    with pytest.raises(vaed_client.ValidationError, match="latent_space"):
        client.plan(latent, model="demo", latent_space="denormalized")
    assert client.decode(latent, model="demo").frames.shape == (1, 64, 64, 3)


@pytest.mark.parametrize("bad", ["raw", "Normalized", 2, None])
def test_an_unknown_latent_space_is_refused_naming_the_argument(client, bad):
    with pytest.raises(vaed_client.ValidationError, match="latent_space"):
        client.plan((1, 32, 8, 8), model="demo", latent_space=bad)


def test_vaectl_latent_space_flag_gives_the_same_frames(daemon, tmp_path):
    video = need(H3 / "video_case_one_tile.safetensors")

    def decode(key: str, space: str) -> bytes:
        out = tmp_path / f"{key}-{space}.u8"
        cmd = [str(VAECTL), "--socket", daemon.socket, "decode", str(video), "--key", key,
               "--latent-space", space, "--model", "h3", "--format", "raw", "--out", str(out),
               "--reference-key", "", "--original-key", "none"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stdout}\n{run.stderr}"
        return out.read_bytes()

    assert decode("latent_denorm", "denormalized") == decode("latent", "normalized")
    for value in ("raw", "1", "Denormalized"):  # names only, as written in --help
        bad = subprocess.run([str(VAECTL), "--socket", daemon.socket, "decode", str(video),
                              "--latent-space", value], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode != 0
        assert f"--latent-space: {value} not in {{denormalized,normalized}}" in bad.stderr
