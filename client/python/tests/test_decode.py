"""Acceptance: decodes through the Python client give the same bytes as
through the C++ client (vaectl decode) and match the golden H3 output within
its tolerance (conftest.assert_golden_u8), and TAEF2 bikes matches its
reference decode within the acceptance tolerance (uint8 +-1, mean PSNR within
0.1 dB of the reference's)."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import vaed_client
from conftest import (GOLDEN_AUDIO_MAX_ABS, H3, TAEF2, VAECTL, assert_golden_f32,
                      assert_golden_u8, have_h3, need)


def read_float_wav(path: Path) -> np.ndarray:
    """float32 [channels, samples] from an IEEE-float WAV (format 3), as
    `vaectl decode --wav-format float32` writes it (interleaved samples)."""
    data = path.read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", f"{path} is not a RIFF WAVE file"
    pos, channels, samples = 12, None, None
    while pos + 8 <= len(data):
        tag, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if tag == b"fmt ":
            fmt, channels, _rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", body[:16])
            assert bits == 32 and fmt in (3, 0xFFFE), f"{path}: format {fmt}, {bits} bits"
        elif tag == b"data":
            samples = np.frombuffer(body, dtype="<f4")
        pos += 8 + size + (size & 1)
    assert channels and samples is not None, f"{path}: no fmt or data chunk"
    return samples.reshape(-1, channels).T


def vaectl_decode(socket: str, tmp_path: Path, video: Path, audio: Path) -> tuple:
    """The C++ client's decode of the same request: raw uint8 frames and the
    float32 waveform."""
    out, wav = tmp_path / "cpp.u8", tmp_path / "cpp.wav"
    cmd = [str(VAECTL), "--socket", socket, "decode", str(video), "--audio-latent", str(audio),
           "--model", "h3", "--format", "raw", "--out", str(out), "--audio-out", str(wav),
           "--wav-format", "float32", "--independent-lengths", "--fps", "24",
           "--reference-key", "", "--original-key", "none"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stdout}\n{run.stderr}"
    return out.read_bytes(), read_float_wav(wav)


@pytest.mark.parametrize("video_case,audio_case", [
    ("grid_2x2", "stereo"),
    ("two_windows_two_tiles", "odd_length"),
    ("padded_windows", "one_second"),
])
def test_h3_video_and_audio_bytes_equal_the_cpp_client(daemon, client, tmp_path, video_case,
                                                       audio_case):
    video = need(H3 / f"video_case_{video_case}.safetensors")
    audio = need(H3 / f"audio_case_{audio_case}.safetensors")
    video_latent = vaed_client.read_safetensors(str(video))["latent"]
    audio_latent = vaed_client.read_safetensors(str(audio))["latent"]

    result = client.decode(video_latent, audio_latent, model="h3", fps=24,
                           independent_lengths=True)
    cpp_frames, cpp_audio = vaectl_decode(daemon.socket, tmp_path, video, audio)

    assert result.frames.dtype == np.uint8 and result.frames.ndim == 4
    assert result.frames.shape[-1] == 3
    assert result.frames.tobytes() == cpp_frames, "video bytes differ from the C++ client's"
    assert result.audio.dtype == np.float32
    assert result.audio.shape == cpp_audio.shape
    assert result.audio.tobytes() == cpp_audio.astype(np.float32).tobytes(), \
        "audio samples differ from the C++ client's"
    # The reply's components, and the golden frames within their tolerance.
    for component in ("decode", "video_vae.decode_latent", "audio_vae.decode_latent",
                      "video_vae.tile_decode", "video_vae.tile_merge"):
        assert component in result.timings, f"{component} missing from {result.timings}"
    golden = vaed_client.read_safetensors(str(video))["frames_u8"]
    assert_golden_u8(f"{video_case} frames_u8 via Python", result.frames, golden)
    assert result.sample_rate == 32000
    assert result.info["audio"]["channels"] == audio_latent.shape[0]


def test_audio_only_request(client):
    audio = need(H3 / "audio_case_one_second.safetensors")
    file = vaed_client.read_safetensors(str(audio))
    result = client.decode(audio_latent=file["latent"], model="h3")
    assert result.frames is None
    assert result.audio.shape == (1, 800 * file["latent"].shape[-1])
    reference = file["waveform"].reshape(result.audio.shape)
    assert_golden_f32("one_second waveform via Python", result.audio, reference,
                      GOLDEN_AUDIO_MAX_ABS)
    assert "audio_vae.decode_latent" in result.timings


def mean_psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over frames of 10*log10(255^2 / MSE) (as ops/common/psnr.h)."""
    diff = a.astype(np.float64) - b.astype(np.float64)
    mse = (diff.reshape(diff.shape[0], -1) ** 2).mean(axis=1)
    return float(np.mean(10 * np.log10(255.0 ** 2 / mse)))


def test_taef2_bikes_matches_the_reference_decode(client):
    file = vaed_client.read_safetensors(str(need(TAEF2 / "video_bikes.safetensors")))
    if not (TAEF2 / "taef2_decoder.safetensors").exists():
        pytest.skip("TAEF2 weights absent")
    result = client.decode(file["latent"], model="taef2")
    assert result.frames.shape == (16, 272, 640, 3)
    assert not result.info["demo_weights"]
    max_diff = int(np.max(np.abs(result.frames.astype(np.int16) - file["decoded_u8"])))
    psnr = mean_psnr(result.frames, file["frames_u8"])
    reference_psnr = mean_psnr(file["decoded_u8"], file["frames_u8"])
    print(f"bikes via Python: max |diff| {max_diff}, PSNR {psnr:.4f} dB "
          f"(reference {reference_psnr:.4f} dB)")
    assert max_diff <= 1
    assert abs(psnr - reference_psnr) <= 0.1
    assert "taef2.decode_latent" in result.timings and "decode" in result.timings


def test_float_formats_have_nchw_layout(client):
    latent = np.random.default_rng(1).standard_normal((2, 32, 8, 8), dtype=np.float32)
    u8 = client.decode(latent, model="demo", copy=True)
    unit = client.decode(latent, model="demo", format="float32_unit", copy=True)
    raw = client.decode(latent, model="demo", format="float32")
    assert u8.frames.shape == (2, 64, 64, 3)
    assert unit.frames.shape == (2, 3, 64, 64) and unit.frames.dtype == np.float32
    assert raw.frames.shape == (2, 3, 64, 64)
    # TAEF2 (the demo model's architecture): its official output is already
    # RGB in [0, 1] space, unclamped, so the two float formats agree.
    assert np.array_equal(unit.frames, raw.frames)
    # uint8 = round half to even of clamp(x, 0, 1) * 255, from the same decode.
    expected = np.rint(np.clip(raw.frames, 0, 1) * 255).astype(np.uint8).transpose(0, 2, 3, 1)
    assert int(np.max(np.abs(expected.astype(np.int16) - u8.frames))) <= 1


def test_plan_reports_output_shapes_without_decoding(client):
    if not have_h3():
        pytest.skip("H3 golden decoders absent")
    plan = client.plan((1, 24, 7, 20, 20), (2, 32, 80), model="h3", independent_lengths=True)
    assert plan["planned_only"]
    assert plan["output_shape"] == [22, 320, 320, 3]
    assert plan["audio"]["output_shape"] == [2, 64000]
    # The tile grid and temporal windows, without decoding.
    assert plan["tiling"]["tile_rows"] * plan["tiling"]["tile_cols"] >= 1
    assert plan["tiling"]["windows"] == 1
    rfc = client.plan((1, 24, 33, 96, 168), model="h3")
    tiling = rfc["tiling"]
    assert rfc["frames"] == 111
    # The RFC's shape: 112 tiles per temporal window, 7 windows.
    assert tiling["windows"] == 7
    assert tiling["tile_rows"] * tiling["tile_cols"] == 112
    # Plans are the decode's cached ones, handed out as copies.
    rfc["frames"] = 0
    assert client.plan((1, 24, 33, 96, 168), model="h3")["frames"] == 111
