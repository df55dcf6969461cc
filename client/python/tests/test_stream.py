"""Acceptance: streamed output. Client.decode_stream yields each
part of the output as soon as it is final (H3: per temporal window; demo /
TAEF2: per frame batch; the audio once), then the DecodeResult: parts are
contiguous from 0 and the last ends at the total, each part holds its final
bytes when it is yielded, the output is byte-identical to a decode without
streaming, and a decode that fails mid-stream raises after the parts it
announced, which stay valid, naming the last final frame."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import vaed_client
from conftest import H3, assert_golden_u8, have_h3, need

FAULTS_CONFIG = """
[executor]
allow_fault_injection = true
"""


def latent(seed: int, shape=(10, 32, 8, 8)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def poison_output_region(client) -> None:
    """Fills the client's output region, which the next decode of the same
    size reuses, with 0xa5 bytes: a part yielded before the daemon wrote it
    then differs from the finished output (after a decode of the same
    latent the region would already hold the right bytes)."""
    region = client.output_region
    region.ndarray((region.nbytes,), np.uint8)[:] = 0xA5


def consume(stream):
    """Runs a decode_stream generator to its end: (parts, a copy of each
    part's data taken when it was yielded, the DecodeResult)."""
    parts, copies, result = [], [], None
    for item in stream:
        assert result is None, "decode_stream yielded something after the DecodeResult"
        if isinstance(item, vaed_client.StreamPart):
            parts.append(item)
            copies.append(np.array(item.data, copy=True))
        else:
            assert isinstance(item, vaed_client.DecodeResult), type(item)
            result = item
    assert result is not None, "decode_stream ended without a DecodeResult"
    return parts, copies, result


def assert_contiguous(parts, stage: str, unit: str, total: int) -> None:
    """The stage's parts: contiguous from 0, each non-empty, the last at `total`."""
    mine = [p for p in parts if p.stage == stage]
    ranges = [(p.begin, p.end) for p in mine]
    assert mine, f"no {stage} parts in {parts}"
    assert all(p.unit == unit and p.total == total for p in mine), mine
    assert ranges[0][0] == 0, ranges
    assert all(b < e for b, e in ranges), ranges
    assert all(prev[1] == cur[0] for prev, cur in zip(ranges, ranges[1:])), ranges
    assert ranges[-1][1] == total, ranges


def assert_parts_final_when_yielded(parts, copies, result) -> None:
    """Each part's data (copied when it was yielded) equals the same frames
    or samples of the finished output: nothing was written after it was
    announced, and it was written before."""
    for part, copy in zip(parts, copies):
        whole = result.frames if part.stage == "video" else result.audio
        final = whole[part.begin:part.end] if part.stage == "video" else \
            whole[:, part.begin:part.end]
        assert copy.shape == final.shape, (part.stage, part.begin, part.end, copy.shape)
        assert copy.tobytes() == np.ascontiguousarray(final).tobytes(), \
            f"{part.stage} [{part.begin}, {part.end}) changed after it was yielded"


def test_demo_frame_batches_stream_in_order_with_the_same_bytes(client):
    x = latent(1)
    plain = client.decode(x, model="demo", copy=True)
    poison_output_region(client)
    parts, copies, result = consume(client.decode_stream(x, model="demo"))
    # 10 latent frames in batches of 4 (frame_batch's default): 3 parts.
    assert [(p.begin, p.end) for p in parts] == [(0, 4), (4, 8), (8, 10)]
    assert_contiguous(parts, "video", "frames", 10)
    for p in parts:
        assert p.data.shape == (p.end - p.begin, 64, 64, 3) and p.data.dtype == np.uint8
        assert np.shares_memory(p.data, result.frames), "a part is not a view of the output"
    assert_parts_final_when_yielded(parts, copies, result)
    assert result.frames.tobytes() == plain.frames.tobytes()
    assert result.info["frames"] == 10


def test_float32_parts_view_the_float_output(client):
    x = latent(2, (5, 32, 8, 8))
    plain = client.decode(x, model="demo", format="float32", copy=True)
    poison_output_region(client)
    parts, copies, result = consume(client.decode_stream(x, model="demo", format="float32"))
    assert_contiguous(parts, "video", "frames", 5)
    assert all(p.data.shape == (p.end - p.begin, 3, 64, 64) and p.data.dtype == np.float32
               for p in parts)
    assert_parts_final_when_yielded(parts, copies, result)
    assert result.frames.tobytes() == plain.frames.tobytes()


def test_copy_gives_parts_that_own_their_memory(client):
    x = latent(3)
    parts, _, result = consume(client.decode_stream(x, model="demo", copy=True))
    assert all(not np.shares_memory(p.data, result.frames) for p in parts)
    assert all(np.array_equal(p.data, result.frames[p.begin:p.end]) for p in parts)
    client.decode(latent(4), model="demo")  # overwrites the output region, not the copies
    assert all(np.array_equal(p.data, result.frames[p.begin:p.end]) for p in parts)


def test_h3_windows_and_audio_stream_with_golden_bytes(client):
    if not have_h3():
        pytest.skip("H3 golden decoders absent (../shared/golden/h3)")
    video = vaed_client.read_safetensors(
        str(need(H3 / "video_case_two_windows_two_tiles.safetensors")))
    audio = vaed_client.read_safetensors(str(need(H3 / "audio_case_one_second.safetensors")))
    plain = client.decode(video["latent"], audio["latent"], model="h3", independent_lengths=True,
                          copy=True)
    poison_output_region(client)
    events = []
    parts, copies, result = consume(client.decode_stream(
        video["latent"], audio["latent"], model="h3", independent_lengths=True,
        progress=events.append))
    windows = result.info["tiling"]["windows"]
    assert windows >= 2
    frames, samples = result.frames.shape[0], result.audio.shape[1]
    assert_contiguous(parts, "video", "frames", frames)
    assert_contiguous(parts, "audio", "samples", samples)
    video_parts = [p for p in parts if p.stage == "video"]
    # One part per temporal window: after window k the frames [0, 17 (k + 1))
    # are final (vaed.proto FinalRange; spec h3_vae.md section 2.2), the
    # last window all of them.
    assert len(video_parts) == windows
    assert [p.end for p in video_parts[:-1]] == [17 * (k + 1) for k in range(windows - 1)]
    audio_parts = [p for p in parts if p.stage == "audio"]
    assert len(audio_parts) == 1
    assert audio_parts[0].data.shape == result.audio.shape
    assert np.shares_memory(audio_parts[0].data, result.audio)
    assert_parts_final_when_yielded(parts, copies, result)
    # Progress keeps working while streaming.
    assert [e["done"] for e in events if e["stage"] == "video"] == list(range(1, windows + 1))
    assert events[-1]["fraction"] == 1.0
    # Streaming changes no byte: the decode without it, and the golden.
    assert result.frames.tobytes() == plain.frames.tobytes()
    assert result.audio.tobytes() == plain.audio.tobytes()
    assert_golden_u8("two_windows_two_tiles frames_u8 streamed", result.frames,
                     video["frames_u8"])


def test_h3_audio_only_streams_one_part(client):
    if not have_h3():
        pytest.skip("H3 golden decoders absent (../shared/golden/h3)")
    audio = vaed_client.read_safetensors(str(need(H3 / "audio_case_stereo.safetensors")))
    plain = client.decode(None, audio["latent"], model="h3", copy=True)
    poison_output_region(client)
    parts, copies, result = consume(client.decode_stream(None, audio["latent"], model="h3"))
    assert result.frames is None
    assert_contiguous(parts, "audio", "samples", result.audio.shape[1])
    assert len(parts) == 1 and parts[0].data.shape == result.audio.shape
    assert_parts_final_when_yielded(parts, copies, result)
    assert result.audio.tobytes() == plain.audio.tobytes()


def test_progress_callback_runs_off_the_consumer_thread_and_keeps_its_guard(client):
    threads, seen = [], []

    def nested(event):
        threads.append(threading.current_thread())
        client.status()  # the decode holds the connection: refused, not a hang

    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_value)
    try:
        parts, _, result = consume(client.decode_stream(latent(5), model="demo",
                                                        progress=nested))
    finally:
        sys.unraisablehook = old
    assert parts and result.frames.shape == (10, 64, 64, 3)
    assert threads and all(t is not threading.current_thread() for t in threads)
    assert seen and isinstance(seen[0], vaed_client.ValidationError)
    assert "own progress callback" in str(seen[0])


def test_calls_from_the_loop_body_wait_for_the_decode(client):
    x = latent(6)
    plain = client.decode(x, model="demo", copy=True)
    statuses = []
    for item in client.decode_stream(x, model="demo"):
        if isinstance(item, vaed_client.StreamPart) and item.begin == 0:
            statuses.append(client.status())  # waits for the streamed decode, no deadlock
        elif isinstance(item, vaed_client.DecodeResult):
            result = item
    assert statuses and statuses[0]["healthy"]
    assert result.frames.tobytes() == plain.frames.tobytes()


def test_bad_arguments_raise_from_the_iteration(client):
    stream = client.decode_stream(latent(7), model="demo", format="bogus")
    with pytest.raises(vaed_client.ValidationError, match="format"):
        next(stream)
    with pytest.raises(vaed_client.ValidationError, match="final_range must be callable"):
        vaed_client._core.DecodeArgs(model="demo", final_range=42)


def streaming_threads():
    return [t for t in threading.enumerate() if t.name == "vaed-decode-stream" and t.is_alive()]


def test_a_deadline_mid_stream_raises_after_the_parts_which_stay_valid(make_daemon):
    d = make_daemon(["--intra-op-threads", "1"], config=FAULTS_CONFIG)
    # 40 frames of the demo model: 10 frame batches x 50 ms (slow_tiles),
    # 0.5 s at least; the deadline ends it after a few batches.
    x = latent(8, (40, 32, 8, 8))
    with vaed_client.Client(d.socket) as c:
        plain = c.decode(x, model="demo", copy=True)  # also warms the shape up
        poison_output_region(c)
        parts, copies = [], []
        with pytest.raises(vaed_client.DeadlineExceeded) as e:
            for item in c.decode_stream(x, model="demo", inject_faults=["slow_tiles"],
                                        deadline=0.25):
                parts.append(item)
                copies.append(np.array(item.data, copy=True))
        assert parts, "no part was final before the deadline (a very loaded machine?)"
        assert all(isinstance(p, vaed_client.StreamPart) for p in parts)
        assert parts[-1].end < 40
        ranges = [(p.begin, p.end) for p in parts]
        assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        # The error names the last final frame; the announced frames stay
        # valid (the daemon did not write them again) and are the plain
        # decode's.
        assert e.value.final_frames == parts[-1].end and e.value.final_samples == 0
        for p, copy in zip(parts, copies):
            assert p.data.tobytes() == copy.tobytes()
            assert copy.tobytes() == plain.frames[p.begin:p.end].tobytes()
        assert not streaming_threads()

        # The daemon's own Error.final_frames (vaed.v1.Error), straight
        # from the extension, without decode_stream's bookkeeping.
        src = c.alloc_latent(x.shape)
        np.copyto(src, x)
        region = c.register_region(plain.frames.nbytes)
        ranges = []
        found = c._regions.find(src)
        assert found is not None
        with pytest.raises(vaed_client.DeadlineExceeded) as raw:
            c._core.decode(vaed_client._core.DecodeArgs(
                model="demo", latent=(found[0].region_id, found[1], "float32", list(x.shape)),
                output=(region.region_id, 0, "uint8", list(plain.frames.shape)),
                inject_faults=["slow_tiles"], deadline_ms=250, final_range=ranges.append))
        assert ranges and all(r["stage"] == "video" and r["unit"] == "frames" for r in ranges)
        assert raw.value.final_frames == ranges[-1]["end"] < 40
        # The next request is served.
        assert c.decode(x[:2], model="demo").frames.shape == (2, 64, 64, 3)


def test_stopping_early_waits_for_the_decode(make_daemon):
    d = make_daemon(["--intra-op-threads", "1"], config=FAULTS_CONFIG)
    x = latent(9, (40, 32, 8, 8))
    with vaed_client.Client(d.socket) as c:
        plain = c.decode(x, model="demo", copy=True)
        poison_output_region(c)
        stream = c.decode_stream(x, model="demo", inject_faults=["slow_tiles"])
        first = next(stream)
        kept = np.array(first.data, copy=True)
        assert isinstance(first, vaed_client.StreamPart) and first.begin == 0
        start = time.monotonic()
        stream.close()  # returns once the decode is over
        waited = time.monotonic() - start
        assert not streaming_threads()
        # The decode ran to its end (about 0.45 s more of slow batches):
        # the whole output is written, and the part taken before stopping
        # was never touched again.
        out = c.output_region.ndarray(plain.frames.shape, np.uint8)
        assert out.tobytes() == plain.frames.tobytes(), f"waited {waited:.3f} s"
        assert first.data.tobytes() == kept.tobytes()
        assert kept.tobytes() == plain.frames[first.begin:first.end].tobytes()
        assert c.status()["healthy"]


def test_from_status_carries_the_final_extent():
    e = vaed_client.errors.from_status(13, "deadline_exceeded", "deadline passed", 0, 34, 1600)
    assert isinstance(e, vaed_client.DeadlineExceeded)
    assert e.final_frames == 34 and e.final_samples == 1600
    plain = vaed_client.errors.from_status(1, "invalid_argument", "bad")
    assert plain.final_frames == 0 and plain.final_samples == 0


def test_decode_stream_takes_exactly_the_keywords_of_decode(client):
    import inspect
    decode = inspect.signature(vaed_client.Client.decode).parameters
    stream = inspect.signature(vaed_client.Client.decode_stream).parameters
    assert list(stream) == list(decode)
    assert [p.default for p in stream.values()] == [p.default for p in decode.values()]
    # An unknown keyword fails at the call, before any iteration, as it does for decode.
    with pytest.raises(TypeError, match="bogus"):
        client.decode_stream(None, bogus=1)
    with pytest.raises(TypeError, match="bogus"):
        client.decode(None, bogus=1)
