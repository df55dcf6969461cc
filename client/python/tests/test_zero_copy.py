"""Acceptance: zero-copy is proven, not claimed. Returned frames share
memory with the client's output region (no copy on the hot path); a latent
written into an alloc_latent() array is read by the daemon in place."""

from __future__ import annotations

import numpy as np
import pytest

import vaed_client


def latent(seed: int, shape=(2, 32, 8, 8)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def region_bytes(region: vaed_client.SharedRegion) -> np.ndarray:
    return region.ndarray((region.nbytes,), np.uint8)


def test_frames_view_the_output_region(client):
    result = client.decode(latent(1), model="demo")
    region = client.output_region
    assert region is not None
    # Same memory: the array's data pointer lies in the region's mapping.
    start = result.frames.__array_interface__["data"][0]
    assert region.address <= start < region.address + region.nbytes
    assert np.shares_memory(result.frames, region_bytes(region))
    assert not result.frames.flags.owndata

    # The view shows what the next decode writes there (documented lifetime);
    # a copy=True result does not change.
    kept = client.decode(latent(1), model="demo", copy=True)
    assert not np.shares_memory(kept.frames, region_bytes(region))
    assert np.array_equal(kept.frames, result.frames)
    other = client.decode(latent(2), model="demo")
    assert client.output_region is region, "same-size decodes must reuse the output region"
    assert np.shares_memory(other.frames, result.frames)
    assert np.array_equal(result.frames, other.frames)
    assert not np.array_equal(kept.frames, other.frames)


def test_output_view_outlives_the_region_registration(daemon):
    # A view keeps the mapping alive after close(): reading it is safe.
    with vaed_client.Client(daemon.socket) as c:
        frames = c.decode(latent(3), model="demo").frames
        expected = frames.copy()
    assert np.array_equal(frames, expected)


def test_latent_in_an_allocated_region_is_read_in_place(client):
    buf = client.alloc_latent((2, 32, 8, 8))
    assert isinstance(buf, np.ndarray) and buf.dtype == np.float32 and not buf.flags.owndata
    buf[...] = latent(4)
    first = client.decode(buf, model="demo", copy=True)
    assert first.inputs_in_place == {"video_latent": True}
    assert first.info["timings"] and first.frames.shape == (2, 64, 64, 3)
    # Writing the region changes what the daemon decodes: it reads this memory.
    buf[...] = latent(5)
    second = client.decode(buf, model="demo", copy=True)
    assert second.inputs_in_place == {"video_latent": True}
    assert not np.array_equal(first.frames, second.frames)
    # The same latent through the copy path decodes to the same bytes.
    copied = client.decode(latent(5), model="demo")
    assert copied.inputs_in_place == {"video_latent": False}
    assert np.array_equal(copied.frames, second.frames)


def test_a_slice_of_a_registered_region_is_used_in_place(client):
    region = client.register_region(2 * 32 * 8 * 8 * 4 + 4096)
    view = region.ndarray((2, 32, 8, 8), np.float32, offset=4096)
    view[...] = latent(6)
    result = client.decode(view, model="demo")
    assert result.inputs_in_place == {"video_latent": True}
    assert np.array_equal(result.frames, client.decode(latent(6), model="demo").frames)


def test_non_contiguous_and_buffer_inputs_are_copied_once(client):
    base = latent(7, (2, 32, 8, 16))
    strided = base[:, :, :, ::2]
    assert not strided.flags.c_contiguous
    a = client.decode(strided, model="demo", copy=True)
    b = client.decode(np.ascontiguousarray(strided), model="demo", copy=True)
    assert a.inputs_in_place == {"video_latent": False}
    assert np.array_equal(a.frames, b.frames)
    # Any buffer-protocol object: a memoryview of float32 data.
    c = client.decode(memoryview(np.ascontiguousarray(strided)), model="demo")
    assert np.array_equal(c.frames, b.frames)


def test_staging_region_is_reused_and_grown(client):
    client.decode(latent(8, (1, 32, 8, 8)), model="demo")
    first = client._regions.staging["video_latent"]
    client.decode(latent(9, (1, 32, 8, 8)), model="demo")
    assert client._regions.staging["video_latent"] is first
    client.decode(latent(10, (3, 32, 16, 16)), model="demo")
    grown = client._regions.staging["video_latent"]
    assert grown is not first and grown.nbytes >= 3 * 32 * 16 * 16 * 4
    assert not first.registered


def test_alloc_latent_regions_are_freed(client):
    before = set(client._regions.by_id)
    buf = client.alloc_latent((1, 32, 8, 8))
    region_id = next(iter(set(client._regions.by_id) - before))
    view = buf[0]        # a view keeps the region
    del buf
    client.decode(latent(12, (1, 32, 8, 8)), model="demo")
    assert region_id in client._regions.by_id
    del view             # the last reference: freed at the next call
    client.decode(latent(12, (1, 32, 8, 8)), model="demo")
    assert region_id not in client._regions.by_id

    explicit = client.alloc_latent((1, 32, 8, 8))
    ids = set(client._regions.by_id)
    client.free_latent(explicit)
    assert len(set(client._regions.by_id)) == len(ids) - 1
    with pytest.raises(vaed_client.ValidationError, match="not in a region of this client"):
        client.free_latent(np.zeros(4, np.float32))


def test_a_previous_output_fed_back_as_input_is_copied(client):
    # float32 output of the right shape for... itself: the raw decode of a
    # 64x64 latent is [N, 3, 64, 64]; use a slice shaped like a latent.
    first = client.decode(latent(13, (1, 32, 8, 8)), model="demo", format="float32")
    fake_latent = first.frames.reshape(-1)[:32 * 8 * 8].reshape(1, 32, 8, 8)
    expected = client.decode(fake_latent.copy(), model="demo", format="float32", copy=True)
    again = client.decode(latent(13, (1, 32, 8, 8)), model="demo", format="float32")
    fake_latent = again.frames.reshape(-1)[:32 * 8 * 8].reshape(1, 32, 8, 8)
    result = client.decode(fake_latent, model="demo", format="float32")
    assert result.inputs_in_place == {"video_latent": False}
    assert np.array_equal(result.frames, expected.frames)
