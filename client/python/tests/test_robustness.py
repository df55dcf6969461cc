"""Misuse a DiT worker can run into: fork, interrupted decodes, a cleaned
/dev/shm, killed workers' segments, huge or mistyped arguments (found by a
review of the Python client), and what a new user tripped over
(which socket a Client picks, read_safetensors' arrays and errors). The
tests named test_regression_* guard bugs that review found and that were
fixed (listed, with their fix commits, in tests/regressions/README.md);
they stay here because they share the session daemon of conftest.py."""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import vaed_client
from conftest import H3, PYTHON_DIR, need


def latent(seed=0, shape=(1, 32, 8, 8)):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def shm_names(pid: int):
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"vaed-{pid}-"))


def wait_child(pid: int, seconds: float = 20):
    """The wait status of forked child `pid`, or None (after killing it)
    when it has not exited within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


# Regression (fixed in 68fcd5f "fork safety"): a forked child
# inherited the parent's C++ Client and SharedRegions; using the Client
# misbehaved, and the child's exit hung or unlinked the parent's segments.
def test_regression_fork_child_neither_hangs_nor_unlinks_the_parents_segments(client):
    buf = client.alloc_latent((1, 32, 8, 8))
    buf[...] = latent(1)
    expected = client.decode(buf, model="demo", copy=True)
    before = shm_names(os.getpid())
    assert before
    pid = os.fork()
    if pid == 0:  # the child: using the parent's Client fails clearly, exiting is quick
        code = 0
        try:
            client.decode(buf, model="demo")
            code = 3
        except vaed_client.ValidationError as e:
            code = 0 if "must connect a Client of its own" in str(e) else 4
        except BaseException:
            code = 5
        # Run the destructors of everything inherited (the C++ Client's and
        # the segments'), as an exiting child would, then leave without
        # pytest's machinery.
        import gc
        client._core = None
        client._regions = None  # the book of regions: every SharedRegion it held
        del buf, expected
        gc.collect()
        os._exit(code)
    status = wait_child(pid)
    assert status is not None, "the forked child hung on exit"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert shm_names(os.getpid()) == before, "the child unlinked the parent's segments"
    again = client.decode(buf, model="demo")
    assert np.array_equal(again.frames, expected.frames)


class InterruptedOnce:
    """The extension client, but its next decode fails as one cut off while
    the daemon still decodes it (a timeout, an interrupt)."""

    def __init__(self, core, error):
        self._core, self._error = core, error

    def __getattr__(self, name):
        return getattr(self._core, name)

    def decode(self, args):
        if self._error is None:
            return self._core.decode(args)
        error, self._error = self._error, None
        self._core.decode(args)  # the daemon did decode into the regions...
        raise error              # ...but the caller never saw the reply


@pytest.mark.parametrize("error", [
    vaed_client.DaemonUnavailable("no reply within 500 ms", code=7, code_name="unavailable"),
    KeyboardInterrupt(),
])
# Regression (fixed in 68fcd5f "retired regions after
# abandoned decodes"): after a decode cut off by a timeout or Ctrl-C, whose
# daemon side may still be writing, the next decode reused the same output
# and staging regions.
def test_regression_after_an_abandoned_decode_the_next_result_gets_fresh_regions(client, error):
    first = client.decode(latent(7), model="demo")
    kept = first.frames.copy()
    old_output, old_staging = client.output_region, client._regions.staging["video_latent"]
    client._core = InterruptedOnce(client._core, error)
    with pytest.raises(type(error)):
        client.decode(latent(8), model="demo")
    assert client.output_region is None and client._regions.staging == {}
    second = client.decode(latent(9), model="demo")
    assert client.output_region is not old_output
    assert client._regions.staging["video_latent"] is not old_staging
    # The retired regions were unregistered at this call; views stay readable.
    assert old_output.region_id not in client._regions.by_id and not old_output.registered
    assert old_staging.region_id not in client._regions.by_id
    assert not np.shares_memory(second.frames, first.frames)
    assert first.frames.shape == kept.shape
    client._core = client._core._core


# Regression (region lifetime): after a decode that timed out
# here, free_latent (and unregister_region) returned at once while the
# daemon went on decoding from that memory; a worker reusing the array then
# had it read (or, for an output, overwritten) by the daemon. Now the call
# returns once the daemon acknowledged, which it does only after the
# decode using the region ended. Before: the status read right after still
# showed the decode in flight.
def test_regression_free_latent_returns_once_the_daemon_no_longer_uses_it(make_daemon):
    d = make_daemon(["--intra-op-threads", "1"],
                    config="[executor]\nallow_fault_injection = true\n")
    # 240 frames of 1x1 latent cells of the demo model: 60 batches x 50 ms
    # (slow_tiles), 3 s at least; the decode gives up after 2.5 s, the
    # unregister has 2.5 s more for the rest.
    with vaed_client.Client(d.socket, request_timeout=2.5) as c:
        buf = c.alloc_latent((240, 32, 1, 1))
        buf[...] = latent(11, (240, 32, 1, 1))
        with pytest.raises(vaed_client.DaemonUnavailable):
            c.decode(buf, model="demo", inject_faults=["slow_tiles"])
        try:
            c.free_latent(buf)
            acknowledged = True
        except vaed_client.DaemonUnavailable:
            acknowledged = False  # not within the timeout either (a loaded machine)
        mine = [e for e in c.status()["client_list"] if int(e["client_id"]) == c.client_id]
        assert mine, c.status()
        in_flight = int(mine[0].get("in_flight", 0))
        if not acknowledged:
            assert in_flight == 1, mine
            pytest.skip("the decode outlasted two request timeouts; nothing to check")
        assert in_flight == 0, mine


def test_managed_regions_removed_from_dev_shm_are_recreated(make_daemon):
    d = make_daemon(["--intra-op-threads", "1"])
    with vaed_client.Client(d.socket) as c:
        first = c.decode(latent(5), model="demo", copy=True)
        for name in (c.output_region.name, c._regions.staging["video_latent"].name):
            os.unlink(f"/dev/shm/{name}")  # as a /dev/shm cleaner would
        assert d.stop() == 0
        d.start()
        again = c.decode(latent(5), model="demo")
        assert np.array_equal(again.frames, first.frames)


# Regression (fixed in 68fcd5f "plan before copy"): a latent
# the daemon refuses was first copied into a staging region.
def test_regression_a_latent_the_daemon_refuses_is_never_copied(client):
    big = np.zeros((64, 31, 64, 64), np.float32)  # 31 channels: refused by the plan
    with pytest.raises(vaed_client.ValidationError, match="channels"):
        client.decode(big, model="demo")
    assert "video_latent" not in client._regions.staging


# Regression (fixed in 68fcd5f "shrinking managed regions"):
# one huge decode left its staging and output regions at their peak size for
# the Client's lifetime.
def test_regression_oversized_staging_shrinks_again(client, monkeypatch):
    # Regions above _KEEP_BYTES (64 MiB) shrink; 1 MiB keeps the test small.
    monkeypatch.setattr(vaed_client._regions, "_KEEP_BYTES", 1 << 20)
    client.decode(np.zeros((16, 32, 32, 32), np.float32), model="demo")  # 2 MiB in, 12 MiB out
    big_output, big_staging = client.output_region, client._regions.staging["video_latent"]
    client.decode(latent(), model="demo")
    assert client.output_region.nbytes < big_output.nbytes / 4
    assert client._regions.staging["video_latent"].nbytes < big_staging.nbytes / 4
    assert big_output.region_id not in client._regions.by_id


# Regression (fixed in 68fcd5f "stale segment sweep"): the
# segments of a SIGKILLed worker stayed in /dev/shm for ever.
def test_regression_stale_segments_of_a_killed_worker_are_swept(daemon):
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(PYTHON_DIR)!r})
        import numpy as np, vaed_client
        c = vaed_client.Client({daemon.socket!r})
        c.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo")
        print(os.getpid(), flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(child.stdout.readline())
    assert shm_names(pid), "the worker made no segments"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert shm_names(pid), "SIGKILL leaves the segments behind"
    removed = vaed_client.sweep_stale_segments()
    assert shm_names(pid) == [] and any(n.startswith(f"vaed-{pid}-") for n in removed)
    assert shm_names(os.getpid()) == shm_names(os.getpid())  # ours (alive) are kept


# Regression (fixed in 68fcd5f "negative-bit torch views"):
# torch's DLPack export (1.13, 2.11) drops a view's negative bit (z.conj().imag), so
# the daemon decoded -x; the client now resolves the bit first.
def test_regression_a_negated_torch_view_is_decoded_with_its_sign(client):
    torch = pytest.importorskip("torch")
    x = latent(6)
    z = torch.complex(torch.zeros(1, 32, 8, 8), torch.from_numpy(-x))
    negated = z.conj().imag  # a view with torch's negative bit: values x
    assert negated.is_neg()
    expected = client.decode(x, model="demo", copy=True)
    assert np.array_equal(client.decode(negated, model="demo").frames, expected.frames)


@pytest.mark.parametrize("kwargs,match", [
    ({"model": 123}, "model must be a str"),
    ({"profile": 5}, "profile must be a str"),
    ({"format": ["uint8"]}, "format"),
    ({"tiling": (1,)}, "tiling must be"),
    ({"tiling": (-1, 0)}, "tiling\\[0\\]"),
    ({"fps": float("nan")}, "fps"),
    ({"fps": 1e300}, "fps"),
    ({"fps": True}, "fps"),
    ({"deadline": -1}, "deadline"),
    ({"group_size": 2**40}, "group_size"),
    ({"copy": "no"}, "copy must be True or False"),
    ({"independent_lengths": "no"}, "independent_lengths"),
    ({"inject_faults": "oom"}, "inject_faults"),
])
# Regression (fixed in 68fcd5f "argument validation naming
# the argument"): mistyped or out-of-range arguments failed deeper down with
# errors that did not name the argument.
def test_regression_mistyped_arguments_name_the_argument(client, kwargs, match):
    with pytest.raises(vaed_client.ValidationError, match=match):
        client.decode(latent(), model=kwargs.pop("model", "demo"), **kwargs)


# Regression (same fix, 68fcd5f): numpy scalars such as np.float32 failed
# the isinstance(int, float) checks and were refused as numbers.
def test_regression_numpy_scalars_are_numbers(client):
    r = client.decode(latent(), model="demo", fps=np.float32(24), deadline=np.float64(60),
                      group_size=np.int64(0))
    assert r.frames.shape == (1, 64, 64, 3)


# Regression (same fix, 68fcd5f): Client and allocation arguments.
def test_regression_bad_client_and_allocation_arguments(daemon, client):
    for kwargs, match in [({"request_timeout": 1e12}, "request_timeout"),
                          ({"heartbeat_interval": float("inf")}, "heartbeat_interval"),
                          ({"heartbeats": "yes"}, "heartbeats")]:
        with pytest.raises(vaed_client.ValidationError, match=match):
            vaed_client.Client(daemon.socket, **kwargs)
    with pytest.raises(vaed_client.ValidationError, match="socket must be a path"):
        vaed_client.Client(123)
    with pytest.raises(vaed_client.ValidationError, match="alloc_latent shape"):
        client.alloc_latent("abc")
    with pytest.raises(vaed_client.ValidationError, match="alloc_latent shape"):
        client.alloc_latent(16)
    with pytest.raises(vaed_client.ValidationError, match="more than 2\\^63|over 2\\^63"):
        client.alloc_latent((2**32, 2**32, 4))
    with pytest.raises(vaed_client.ValidationError, match="nbytes"):
        client.register_region(True)
    with pytest.raises(vaed_client.ValidationError, match="video_latent shape"):
        client.plan((1, 32, 2**63, 4))


# Regression (fixed in 68fcd5f, errors.py): a quarantined
# error said "retry after" twice, once from the daemon's message and once
# from retry_after.
def test_regression_quarantined_message_states_the_retry_once():
    e = vaed_client.errors.from_status(15, "quarantined", "client x is quarantined; retry after "
                                       "500 ms", 500)
    assert str(e).count("retry after") == 1


# Regression (fixed in 98bdabe "fresh locks in a forked child"): a fork while
# another thread held the Client's lock left the child's copy locked, so the
# child hung instead of being told to connect a Client of its own.
def test_regression_fork_while_another_thread_decodes(client):
    import threading
    started = threading.Event()

    def busy():
        started.set()
        for _ in range(20):
            client.decode(np.zeros((8, 32, 16, 16), np.float32), model="demo")

    worker = threading.Thread(target=busy)
    worker.start()
    started.wait()
    time.sleep(0.05)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            client.status()
        except vaed_client.ValidationError as e:
            code = 0 if "must connect a Client of its own" in str(e) else 2
        except BaseException:
            code = 3
        os._exit(code)
    status = wait_child(pid)
    worker.join()
    assert status is not None, "the forked child hung"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


# -- One rule for the socket ----------------------------------
# socket argument (not None) > $VAED_SOCKET (set, not empty) > DEFAULT_SOCKET.

def test_the_default_socket_is_the_daemons():
    assert vaed_client.DEFAULT_SOCKET == "/run/vaed/vaed.sock"


def test_vaed_socket_is_used_when_no_socket_is_given(daemon, monkeypatch):
    # Read when the Client is made, not when vaed_client was imported.
    monkeypatch.setenv("VAED_SOCKET", daemon.socket)
    with vaed_client.Client() as c:
        assert c.socket == daemon.socket
        assert c.status()
    with vaed_client.Client(None) as c:
        assert c.socket == daemon.socket


def test_an_explicit_socket_wins_over_vaed_socket(daemon, monkeypatch, tmp_path):
    monkeypatch.setenv("VAED_SOCKET", str(tmp_path / "not-this.sock"))
    with vaed_client.Client(daemon.socket) as c:
        assert c.socket == daemon.socket
    with vaed_client.Client(Path(daemon.socket)) as c:  # os.PathLike
        assert c.socket == daemon.socket
    # An explicit empty path is refused, not taken as "use $VAED_SOCKET".
    with pytest.raises(vaed_client.ValidationError, match="socket must be a path"):
        vaed_client.Client("")


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_without_vaed_socket_the_default_is_used(monkeypatch, tmp_path, value):
    if value is None:
        monkeypatch.delenv("VAED_SOCKET", raising=False)
    else:
        monkeypatch.setenv("VAED_SOCKET", value)
    # The Client looks DEFAULT_SOCKET up when it is made; point it at a path
    # with no daemon so that the error shows which socket it tried (a real
    # daemon may listen on /run/vaed/vaed.sock on this machine).
    default = str(tmp_path / "default.sock")
    monkeypatch.setattr(vaed_client._client, "DEFAULT_SOCKET", default)
    with pytest.raises(vaed_client.DaemonUnavailable) as e:
        vaed_client.Client(connect_timeout=0.5)
    assert f"no control socket at {default} " in str(e.value)


def test_vaed_socket_is_not_expanded_and_a_relative_path_is_from_the_cwd(daemon, monkeypatch):
    monkeypatch.chdir(os.path.dirname(daemon.socket))
    monkeypatch.setenv("VAED_SOCKET", os.path.basename(daemon.socket))
    with vaed_client.Client() as c:
        assert c.socket == os.path.basename(daemon.socket)
        assert c.status()
    monkeypatch.setenv("HOME", os.path.dirname(daemon.socket))
    monkeypatch.setenv("VAED_SOCKET", "~/" + os.path.basename(daemon.socket))
    with pytest.raises(vaed_client.DaemonUnavailable, match="no control socket at ~/"):
        vaed_client.Client(connect_timeout=0.5)


# -- read_safetensors -----------------------------------------

def write_safetensors_file(path: Path, header: dict, data: bytes = b"") -> Path:
    """A safetensors file with this header and data buffer, written by hand
    (so that malformed ones can be made too)."""
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the reference writer pads the header to 8 bytes
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def safetensors_of(path: Path, tensors: dict) -> Path:
    names = {"<f4": "F32", "<f2": "F16", "<f8": "F64", "<i8": "I64", "<i4": "I32", "|i1": "I8",
             "|u1": "U8", "<u2": "U16", "|b1": "BOOL"}
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": names[array.dtype.str], "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return write_safetensors_file(path, header, data)


def test_read_safetensors_gives_every_tensor_with_its_shape_and_dtype(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {"latent": rng.standard_normal((1, 4, 2, 3, 5), dtype=np.float32),
               "half": rng.standard_normal((3, 7)).astype(np.float16),
               "frames_u8": rng.integers(0, 255, (2, 4, 4, 3), dtype=np.uint8),
               "step": np.array(7, np.int64), "mask": np.array([True, False, True]),
               "empty": np.zeros((0, 3), np.float64), "u16": np.arange(5, dtype=np.uint16)}
    path = safetensors_of(tmp_path / "t.safetensors", tensors)
    read = vaed_client.read_safetensors(path)  # a Path works, as a str does
    assert list(read) == list(tensors)  # the file's order; no __metadata__
    for name, expected in tensors.items():
        got = read[name]
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        assert got.flags.c_contiguous, name
        np.testing.assert_array_equal(got, expected)
    assert vaed_client.read_safetensors(str(path)).keys() == read.keys()


def test_read_safetensors_arrays_are_writable_and_never_write_the_file(tmp_path):
    # Like numpy.load: arrays a user can change in place. They view a
    # copy-on-write map, so a write changes neither the file nor another
    # read of it (and costs only the pages written).
    latent = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    path = safetensors_of(tmp_path / "t.safetensors", {"latent": latent, "other": latent + 1})
    before = path.read_bytes()
    first = vaed_client.read_safetensors(path)
    second = vaed_client.read_safetensors(path)
    assert first["latent"].flags.writeable and first["other"].flags.writeable
    first["latent"][...] = -1.0
    first["latent"] *= 2  # in-place arithmetic too
    np.testing.assert_array_equal(first["latent"], np.full_like(latent, -2.0))
    np.testing.assert_array_equal(first["other"], latent + 1)  # its neighbour is untouched
    np.testing.assert_array_equal(second["latent"], latent)
    assert path.read_bytes() == before
    # The arrays outlive the file's name (the map keeps the data).
    path.unlink()
    np.testing.assert_array_equal(second["other"], latent + 1)


def test_read_safetensors_of_a_real_golden_file_is_writable():
    golden = need(H3 / "audio_case_one_second.safetensors")
    latent = vaed_client.read_safetensors(str(golden))["latent"]
    assert latent.dtype == np.float32 and latent.ndim >= 2 and latent.flags.writeable
    latent[...] = 0  # copy-on-write: the shared file stays as it is
    assert vaed_client.read_safetensors(str(golden))["latent"].any()


def bad_safetensors_files():
    good_data = np.zeros(4, np.float32).tobytes()
    f32 = lambda offsets, shape=(4,): {"x": {"dtype": "F32", "shape": list(shape),  # noqa: E731
                                             "data_offsets": offsets}}
    raw_header = lambda text: struct.pack("<Q", len(text)) + text  # noqa: E731
    return [
        ("empty", b"", "0 bytes, too short for a safetensors file"),
        ("short", b"\x01\x02\x03", "3 bytes, too short"),
        ("header past the end", struct.pack("<Q", 1 << 40) + b"{}", "runs past the file end"),
        ("not JSON", raw_header(b"{not json"), "header is not JSON"),
        ("not UTF-8", raw_header(b"\xff\xfe"), "header is not JSON"),
        ("a JSON list", raw_header(b"[1, 2]"), "header is a JSON list, not an object"),
        ("no dtype", {"x": {"shape": [4], "data_offsets": [0, 16]}},
         "tensor 'x': entry .* needs dtype, shape and data_offsets"),
        ("BF16", {"x": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}},
         "tensor 'x' has dtype BF16, not supported"),
        ("negative offsets", f32([-16, 0]), "tensor 'x': data_offsets .* are not \\[begin, end\\]"),
        ("reversed offsets", f32([16, 0]), "are not \\[begin, end\\]"),
        ("bad shape", f32([0, 16], (-4,)), "shape \\[-4\\] is not a list of non-negative"),
        ("size mismatch", f32([0, 12]), "do not match its shape \\[4\\], dtype F32"),
        ("past the data", f32([16, 32]), "do not match its shape"),
    ], good_data


def test_read_safetensors_errors_name_the_file(tmp_path):
    cases, data = bad_safetensors_files()
    for i, (what, content, message) in enumerate(cases):
        path = tmp_path / f"bad{i}.safetensors"
        if isinstance(content, dict):
            write_safetensors_file(path, content, data)
        else:
            path.write_bytes(content)
        with pytest.raises(ValueError) as e:
            vaed_client.read_safetensors(path)
        text = str(e.value)
        assert text.startswith(f"{path}: "), (what, text)
        assert re.search(message, text), (what, text)
    # Files that cannot be opened: OSError naming the file.
    with pytest.raises(FileNotFoundError) as e:
        vaed_client.read_safetensors(tmp_path / "absent.safetensors")
    assert e.value.filename == str(tmp_path / "absent.safetensors")
    with pytest.raises(IsADirectoryError) as e:
        vaed_client.read_safetensors(tmp_path)
    assert e.value.filename == str(tmp_path)
