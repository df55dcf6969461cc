"""Integration: the example DiT worker (ops/examples/dit_worker.py) decodes
the golden H3 video + audio and the TAEF2 bikes latents through a running
daemon and writes playable MP4 and WAV files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import wave

import pytest

from conftest import H3, PYTHON_DIR, REPO, SHARED_DIR, TAEF2, need


def ffprobe(path) -> dict:
    run = subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-count_frames", "-of", "json",
                          str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return {s["codec_type"]: s for s in json.loads(run.stdout)["streams"]}


def test_example_worker_writes_mp4_and_wav(daemon, tmp_path):
    need(H3 / "video_case_grid_2x2.safetensors")
    need(TAEF2 / "video_bikes.safetensors")
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    run = subprocess.run([sys.executable, str(REPO / "ops" / "examples" / "dit_worker.py"),
                          "--socket", daemon.socket, "--shared", str(SHARED_DIR),
                          "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    print(run.stdout)
    assert "video_vae.decode_latent" in run.stdout and "audio_vae.decode_latent" in run.stdout

    with wave.open(str(tmp_path / "h3_grid_2x2.wav")) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (2, 2, 32000)
        assert w.getnframes() == 32000  # audio_case_stereo: 40 latent frames = 1 s

    if shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None:
        pytest.skip("ffmpeg/ffprobe absent: MP4 files not checked")
    h3 = ffprobe(tmp_path / "h3_grid_2x2.mp4")
    assert (h3["video"]["width"], h3["video"]["height"]) == (320, 320)
    assert int(h3["video"]["nb_read_frames"]) == 22
    assert h3["audio"]["codec_name"] == "aac" and int(h3["audio"]["channels"]) == 2
    bikes = ffprobe(tmp_path / "bikes.mp4")
    assert (bikes["video"]["width"], bikes["video"]["height"]) == (640, 272)
    assert int(bikes["video"]["nb_read_frames"]) == 16


def test_example_worker_without_a_daemon_exits_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    run = subprocess.run([sys.executable, str(REPO / "ops" / "examples" / "dit_worker.py"),
                          "--socket", str(tmp_path / "none.sock"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no control socket" in run.stdout + run.stderr
