"""Acceptance: every exception type is raised by a test that provokes it,
with the daemon's message; the daemon keeps serving afterwards; the client
reconnects to a restarted daemon as the C++ library does."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import vaed_client
from conftest import PYTHON_DIR, have_h3, h3_model_arg


def demo_latent(seed: int = 0, shape=(1, 32, 8, 8)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def test_validation_error_names_the_field_and_the_daemon_keeps_serving(client):
    bad = demo_latent(shape=(1, 31, 8, 8))  # the demo model wants 32 channels
    with pytest.raises(vaed_client.ValidationError) as e:
        client.decode(bad, model="demo")
    assert e.value.code_name == "invalid_argument"
    assert "latent" in e.value.message and "32" in e.value.message
    assert isinstance(e.value, ValueError)
    assert client.decode(demo_latent(), model="demo").frames.shape == (1, 64, 64, 3)


def test_client_side_validation_errors(client):
    for kwargs, match in [({"format": "jpeg"}, "format 'jpeg'"),
                          ({"fps": -1}, "fps"),
                          ({"deadline": 0}, "deadline"),
                          ({"stack_tiling": "sideways"}, "stack_tiling"),
                          ({"group_size": -1}, "group_size")]:
        with pytest.raises(vaed_client.ValidationError, match=match):
            client.decode(demo_latent(), model="demo", **kwargs)
    with pytest.raises(vaed_client.ValidationError, match="video_latent.dtype float64"):
        client.decode(demo_latent().astype(np.float64), model="demo")
    with pytest.raises(vaed_client.ValidationError, match="needs video_latent, audio_latent"):
        client.decode()
    with pytest.raises(vaed_client.ValidationError, match="not an array"):
        client.decode(object(), model="demo")


def test_not_found_for_an_unknown_model(client):
    with pytest.raises(vaed_client.NotFound, match="unknown model 'nope'") as e:
        client.decode(demo_latent(), model="nope")
    assert isinstance(e.value, vaed_client.ValidationError) and isinstance(e.value, LookupError)


def test_daemon_unavailable_without_a_daemon(tmp_path):
    with pytest.raises(vaed_client.DaemonUnavailable, match="no control socket") as e:
        vaed_client.Client(str(tmp_path / "none.sock"), connect_timeout=0.5)
    assert e.value.code_name == "unavailable" and isinstance(e.value, ConnectionError)


def test_reconnects_to_a_restarted_daemon_then_unavailable_when_gone(make_daemon):
    d = make_daemon(["--intra-op-threads", "1"])
    c = vaed_client.Client(d.socket, reconnect_timeout=5.0)
    buf = c.alloc_latent((1, 32, 8, 8))
    buf[...] = demo_latent(1)
    before = c.decode(buf, model="demo", copy=True)

    assert d.stop() == 0
    d.start()
    after = c.decode(buf, model="demo")  # reconnects and re-registers regions
    assert c.reconnects == 1  # client ids restart with the daemon
    assert after.inputs_in_place == {"video_latent": True}
    assert np.array_equal(after.frames, before.frames)

    assert d.stop() == 0
    t0 = time.monotonic()
    with pytest.raises(vaed_client.DaemonUnavailable):
        c.decode(buf, model="demo")
    assert time.monotonic() - t0 < 30
    c.close()


QUARANTINE_CONFIG = """
[quarantine]
fault_threshold = 3
window_ms = 60000
duration_ms = 60000
"""


def test_quarantined_with_retry_after_and_released_by_an_admin(make_daemon):
    d = make_daemon(["--intra-op-threads", "1"], config=QUARANTINE_CONFIG)
    with vaed_client.Client(d.socket, client_name="faulty") as c:
        for _ in range(3):  # three invalid requests: three faults
            with pytest.raises(vaed_client.ValidationError):
                c.decode(demo_latent(shape=(1, 31, 8, 8)), model="demo")
        with pytest.raises(vaed_client.Quarantined) as e:
            c.decode(demo_latent(), model="demo")
        assert e.value.code_name == "quarantined"
        assert e.value.retry_after is not None and 0 < e.value.retry_after <= 60
        assert "quarantine" in e.value.message

        # A quarantined process cannot even say Hello.
        with pytest.raises(vaed_client.Quarantined):
            vaed_client.Client(d.socket, client_name="faulty-2")

    # The operator (vaectl quarantine release in real life) is another
    # process: root or the daemon's uid, so an admin.
    release = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r}); "
         f"import vaed_client; c = vaed_client.Client({d.socket!r}); "
         "print(c.release_quarantine('all'))"], capture_output=True, text=True, timeout=60)
    assert release.returncode == 0, release.stdout + release.stderr
    assert "faulty" in release.stdout
    with vaed_client.Client(d.socket, client_name="faulty-again") as c:
        assert c.decode(demo_latent(), model="demo").frames.shape == (1, 64, 64, 3)


FAULTS_CONFIG = """
[executor]
queue_capacity = 1
allow_fault_injection = true
"""


def h3_daemon(make_daemon):
    if not have_h3():
        pytest.skip("H3 golden decoders absent (../shared/golden/h3)")
    return make_daemon(["--intra-op-threads", "1", "--model", h3_model_arg()],
                       config=FAULTS_CONFIG)


def slow_h3_latent() -> np.ndarray:
    # 3 temporal windows x 3x3 tiles of the tiny H3 decoder; with the
    # "slow_tiles" fault every tile call waits 50 ms.
    return np.random.default_rng(3).standard_normal((1, 24, 21, 40, 40), dtype=np.float32)


def test_busy_when_the_queue_is_full(make_daemon):
    d = h3_daemon(make_daemon)
    outcomes = {}

    def decode(name: str) -> None:
        with vaed_client.Client(d.socket, client_name=name) as c:
            try:
                c.decode(slow_h3_latent(), model="h3", inject_faults=["slow_tiles"],
                         stack_tiling="off")
                outcomes[name] = "ok"
            except vaed_client.VaedError as e:
                outcomes[name] = e

    running = threading.Thread(target=decode, args=("running",))
    running.start()
    time.sleep(0.5)
    queued = threading.Thread(target=decode, args=("queued",))
    queued.start()
    time.sleep(0.5)
    with vaed_client.Client(d.socket, client_name="third") as c:
        with pytest.raises(vaed_client.Busy) as e:
            c.decode(slow_h3_latent(), model="h3", inject_faults=["slow_tiles"])
    running.join()
    queued.join()
    assert e.value.code_name == "busy"
    assert e.value.retry_after is not None and e.value.retry_after > 0
    assert outcomes == {"running": "ok", "queued": "ok"}, outcomes


def test_deadline_exceeded(make_daemon):
    d = h3_daemon(make_daemon)
    with vaed_client.Client(d.socket) as c:
        with pytest.raises(vaed_client.DeadlineExceeded) as e:
            c.decode(slow_h3_latent(), model="h3", inject_faults=["slow_tiles"], deadline=0.2)
        assert isinstance(e.value, TimeoutError) and e.value.code_name == "deadline_exceeded"
        # The next request is served.
        ok = c.decode(slow_h3_latent()[:, :, :7, :20, :20], model="h3")
        assert ok.frames.shape[0] > 0


def test_resource_exhausted_over_the_memory_budget(make_daemon):
    d = make_daemon(["--intra-op-threads", "1", "--memory-budget-mib", "64"])
    with vaed_client.Client(d.socket) as c:
        with pytest.raises(vaed_client.ResourceExhausted, match="memory") as e:
            c.decode(demo_latent(shape=(1, 32, 128, 128)), model="demo")
        assert isinstance(e.value, MemoryError)
        assert c.decode(demo_latent(), model="demo").frames.shape == (1, 64, 64, 3)
