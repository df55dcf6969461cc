"""pytest fixtures: real vaed daemons on private sockets.

Environment (ctest sets them; defaults suit a checkout built with the
`default` preset):
  VAED_BINARY_DIR  the CMake build dir (default <repo>/build); the daemon is
                   <dir>/daemon/vaed, vaectl <dir>/ops/vaectl/vaectl, and the
                   built package <dir>/python (put on sys.path here).
  VAED_SHARED_DIR  the shared data pack (default <repo>/../shared). Tests
                   that need it skip with a message when it is absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parents[3]
BINARY_DIR = Path(os.environ.get("VAED_BINARY_DIR", REPO / "build"))
SHARED_DIR = Path(os.environ.get("VAED_SHARED_DIR", REPO.parent / "shared"))
VAED = BINARY_DIR / "daemon" / "vaed"
VAECTL = BINARY_DIR / "ops" / "vaectl" / "vaectl"
PYTHON_DIR = BINARY_DIR / "python"

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

H3 = SHARED_DIR / "golden" / "h3"
TAEF2 = SHARED_DIR / "data" / "taef2"


def h3_model_arg(name: str = "h3") -> str:
    return (f"{name}=h3:{H3 / 'video_tiny_weights.safetensors'}:{H3 / 'video_tiny_config.json'}:"
            f"{H3 / 'audio_tiny_weights.safetensors'}:{H3 / 'audio_tiny_config.json'}")


def have_h3() -> bool:
    return (H3 / "video_tiny_weights.safetensors").exists()


def have_taef2() -> bool:
    return (TAEF2 / "taef2_decoder.safetensors").exists()


# The documented tolerance of comparisons with the official decoder's output
# in ../shared/golden/h3 (its README §8; the C++ twin is
# tests/common/golden_tolerance.h). The golden bytes were made on an AMD EPYC
# with OpenBLAS's default kernels; other kernels (LibTorch 2.11's MKL and
# oneDNN, other CPUs) move ~0.001 % of uint8 values by one.
# Comparisons between vaed's own paths (Python vs C++ client, with vs without
# progress) stay byte-exact in the tests that make them.
GOLDEN_U8_MAX_OFF_BY_ONE_FRACTION = 0.001  # README §8: at most 0.1 % off by one
GOLDEN_AUDIO_MAX_ABS = 5e-5  # README §8: weight-norm form 2.6e-5, batch split 2.1e-5


def assert_golden_u8(what: str, ours, golden) -> None:
    """uint8 frames within the golden tolerance: every value within 1 of the
    golden and at most 0.1 % of values off by one. Prints the counts."""
    import numpy as np
    ours, golden = np.asarray(ours), np.asarray(golden)
    assert ours.shape == golden.shape, f"{what}: shape {ours.shape}, golden {golden.shape}"
    diff = np.abs(ours.astype(np.int16) - golden.astype(np.int16))
    differing = int(np.count_nonzero(diff))
    max_diff = int(diff.max()) if diff.size else 0
    fraction = differing / diff.size if diff.size else 0.0
    print(f"[ golden ] {what}: {differing} of {diff.size} uint8 values differ from the golden "
          f"({100 * fraction:.5f} %), max |diff| {max_diff}"
          + (" (bitwise equal)" if differing == 0 else ""))
    assert max_diff <= 1 and fraction <= GOLDEN_U8_MAX_OFF_BY_ONE_FRACTION, (
        f"{what}: {differing} of {diff.size} uint8 values differ from the golden "
        f"({100 * fraction:.5f} %), max |diff| {max_diff}; the golden tolerance (README §8) is "
        f"|diff| <= 1 in at most {100 * GOLDEN_U8_MAX_OFF_BY_ONE_FRACTION} % of values")


def assert_golden_f32(what: str, ours, golden, max_abs: float) -> None:
    """float32 within `max_abs` of the golden (GOLDEN_AUDIO_MAX_ABS for
    waveforms). Prints the max and how many values differ at all."""
    import numpy as np
    ours = np.asarray(ours, dtype=np.float32)
    golden = np.asarray(golden, dtype=np.float32)
    assert ours.shape == golden.shape, f"{what}: shape {ours.shape}, golden {golden.shape}"
    diff = np.abs(ours.astype(np.float64) - golden.astype(np.float64))
    worst = float(diff.max()) if diff.size else 0.0
    differing = int(np.count_nonzero(ours.view(np.uint32) != golden.view(np.uint32)))
    print(f"[ golden ] {what}: {differing} of {diff.size} float32 values differ from the "
          f"golden, max abs {worst:.3g}" + (" (bitwise equal)" if differing == 0 else ""))
    assert worst <= max_abs, (f"{what}: max abs {worst:.3g} vs the golden > the golden "
                              f"tolerance {max_abs:g}")


def need(path: Path) -> Path:
    """Skips the test with a clear message when a shared file is absent."""
    if not path.exists():
        pytest.skip(f"{path} is absent: this test needs the shared data pack (../shared) "
                    "beside the checkout")
    return path


class Daemon:
    """A `vaed` process on a private socket (a 0700 temp dir). Stopped with
    SIGTERM by stop(); the fixture checks it exits 0."""

    def __init__(self, args: List[str], config: Optional[str] = None, timeout: float = 60.0):
        if not VAED.exists():
            pytest.fail(f"{VAED} is not built (build the default preset first)")
        self.dir = tempfile.mkdtemp(prefix="vaed-py-")
        os.chmod(self.dir, 0o700)
        self.socket = os.path.join(self.dir, "vaed.sock")
        self.log_path = os.path.join(self.dir, "vaed.log")
        self.args = list(args)
        if config is not None:
            path = os.path.join(self.dir, "vaed.toml")
            with open(path, "w") as f:
                f.write(config)
            self.args = ["--config", path] + self.args
        self.proc: Optional[subprocess.Popen] = None
        self.start(timeout)

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([str(VAED), "--socket", self.socket, *self.args],
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.socket):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"vaed exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise RuntimeError(f"vaed did not create {self.socket} in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stops the daemon; returns its exit code (negative: killed by a signal)."""
        if self.proc is None:
            return 0
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        # The socket file goes with a clean stop; after SIGKILL it stays.
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        return code

    def close(self) -> None:
        if self.proc is not None:
            self.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)


def model_args() -> List[str]:
    """Models of the session daemon: demo always, plus taef2 and h3 when the
    shared pack has them."""
    args = ["--intra-op-threads", "2"]
    if have_taef2():
        args += ["--model", f"taef2=taef2:{TAEF2 / 'taef2_decoder.safetensors'}"]
    if have_h3():
        args += ["--model", h3_model_arg()]
    return args


@pytest.fixture(scope="session")
def daemon():
    """One daemon for the whole session: models demo, taef2, h3 (when present)."""
    d = Daemon(model_args())
    yield d
    code = d.stop()
    log = d.log()
    d.close()
    assert code == 0, f"vaed exited with {code}:\n{log}"


@pytest.fixture
def make_daemon():
    """Factory for daemons with their own config (quarantine, queue, faults)."""
    made: List[Daemon] = []

    def make(args: List[str], config: Optional[str] = None) -> Daemon:
        d = Daemon(args, config)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


@pytest.fixture
def client(daemon):
    import vaed_client
    with vaed_client.Client(daemon.socket, client_name="pytest") as c:
        yield c
