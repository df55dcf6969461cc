"""Acceptance: a multi-window decode emits one progress event per
temporal window, in order, the last one at 100 %; the Python client takes a
progress callback; vaectl decode shows progress."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import vaed_client
from conftest import H3, VAECTL, assert_golden_u8, have_h3, need


def test_one_event_per_window_in_order_last_at_100(client):
    if not have_h3():
        pytest.skip("H3 golden decoders absent (../shared/golden/h3)")
    video = vaed_client.read_safetensors(str(need(H3 / "video_case_two_windows_two_tiles.safetensors")))
    audio = vaed_client.read_safetensors(str(need(H3 / "audio_case_one_second.safetensors")))
    plain = client.decode(video["latent"], audio["latent"], model="h3", independent_lengths=True,
                          copy=True)
    events = []
    result = client.decode(video["latent"], audio["latent"], model="h3", independent_lengths=True,
                           progress=events.append)
    windows = result.info["tiling"]["windows"]
    assert windows >= 2
    video_events = [e for e in events if e["stage"] == "video"]
    assert [e["done"] for e in video_events] == list(range(1, windows + 1))
    assert all(e["total"] == windows and e["unit"] == "window" for e in video_events)
    tiles = result.info["tiling"]["tile_rows"] * result.info["tiling"]["tile_cols"]
    assert [e["tiles_done"] for e in video_events] == [tiles * k for k in range(1, windows + 1)]
    assert events[-1]["stage"] == "audio" and events[-1]["fraction"] == 1.0
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and len(set(fractions)) == len(fractions)
    assert all(e["eta_seconds"] >= 0 for e in events) and events[-1]["eta_seconds"] == 0
    # Progress changes nothing: the bytes of the decode without a callback
    # (vaed's own paths: byte-exact), and the golden within its tolerance.
    assert result.frames.tobytes() == plain.frames.tobytes()
    assert result.audio.tobytes() == plain.audio.tobytes()
    assert_golden_u8("two_windows_two_tiles frames_u8 with progress", result.frames,
                     video["frames_u8"])


def test_video_only_last_event_is_100(client):
    if not have_h3():
        pytest.skip("H3 golden decoders absent (../shared/golden/h3)")
    latent = vaed_client.read_safetensors(str(need(H3 / "video_case_padded_windows.safetensors")))["latent"]
    events = []
    result = client.decode(latent, model="h3", progress=events.append)
    assert len(events) == result.info["tiling"]["windows"]
    assert events[-1]["fraction"] == 1.0 and events[-1]["done"] == events[-1]["total"]


def test_untiled_model_reports_frame_batches(client):
    events = []
    client.decode(np.zeros((3, 32, 8, 8), np.float32), model="demo", progress=events.append)
    assert events and events[-1]["unit"] == "frames" and events[-1]["fraction"] == 1.0
    assert events[-1]["done"] == events[-1]["total"] == 3


def test_no_events_without_a_callback_and_bad_callbacks(client):
    with pytest.raises(vaed_client.ValidationError, match="progress must be callable"):
        client.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo", progress=42)

    def broken(event):
        raise RuntimeError("callback bug")

    # The decode goes on; the exception is reported through sys.unraisablehook.
    import sys
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_value)
    try:
        r = client.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo", progress=broken)
    finally:
        sys.unraisablehook = old
    assert r.frames.shape == (1, 64, 64, 3)
    assert seen and isinstance(seen[0], RuntimeError)


def test_vaectl_decode_prints_progress_lines(daemon):
    if not have_h3():
        pytest.skip("H3 golden decoders absent (../shared/golden/h3)")
    video = need(H3 / "video_case_two_windows_two_tiles.safetensors")
    run = subprocess.run([str(VAECTL), "--socket", daemon.socket, "decode", str(video),
                          "--model", "h3", "--format", "none", "--progress", "lines"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [l for l in run.stderr.splitlines() if l.startswith("progress")]
    assert len(lines) == 2, run.stderr
    assert "video window 1/2" in lines[0] and "ETA" in lines[0]
    assert "100%" in lines[-1] and "video window 2/2" in lines[-1]


def test_a_callback_that_calls_its_own_client_gets_an_error_not_a_hang(client):
    import sys
    seen, calls = [], []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_value)

    def nested(event):
        calls.append(event)
        client.status()  # would wait for the decode that is running it

    try:
        r = client.decode(np.zeros((2, 32, 8, 8), np.float32), model="demo", progress=nested)
    finally:
        sys.unraisablehook = old
    assert r.frames.shape == (2, 64, 64, 3) and calls
    assert seen and isinstance(seen[0], vaed_client.ValidationError)
    assert "own progress callback" in str(seen[0])
    assert client.status()["healthy"]  # usable again afterwards


def test_ctrl_c_in_a_callback_is_raised_when_the_decode_returns(client):
    def interrupt(event):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        client.decode(np.zeros((3, 32, 8, 8), np.float32), model="demo", progress=interrupt)
    assert client.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo").frames is not None
