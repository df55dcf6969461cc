"""Acceptance: the client works with torch absent and with Debian's torch
present (DLPack input), and never imports torch itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import vaed_client
from conftest import PYTHON_DIR


def test_works_with_torch_absent(daemon):
    # A child interpreter where `import torch` fails, as on a node without it.
    script = textwrap.dedent(f"""
        import sys, importlib.abc
        class NoTorch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError("No module named 'torch' (blocked by the test)")
                return None
        sys.meta_path.insert(0, NoTorch())
        sys.path.insert(0, {str(PYTHON_DIR)!r})
        try:
            import torch
            raise SystemExit("torch imported despite the block")
        except ModuleNotFoundError:
            pass
        import numpy as np, vaed_client
        with vaed_client.Client({daemon.socket!r}) as c:
            x = np.random.default_rng(0).standard_normal((1, 32, 8, 8), dtype=np.float32)
            r = c.decode(x, model="demo")
            assert r.frames.shape == (1, 64, 64, 3), r.frames.shape
        assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules)
        print("ok", r.frames.shape)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok (1, 64, 64, 3)" in run.stdout


def test_importing_the_client_does_not_import_torch():
    run = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r}); "
         "import vaed_client; print('torch' in sys.modules)"],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_debian_torch_tensors_via_dlpack(client):
    torch = pytest.importorskip("torch", reason="torch is not importable: scripts/fetch-libtorch.sh installs torch 2.11 in the venv the tests run under")
    x = np.random.default_rng(11).standard_normal((2, 32, 8, 8), dtype=np.float32)
    expected = client.decode(x, model="demo", copy=True)

    # A CPU tensor: read through __dlpack__ (no torch import in the client).
    t = torch.from_numpy(x.copy())
    via_dlpack = client.decode(t, model="demo", copy=True)
    assert via_dlpack.inputs_in_place == {"video_latent": False}
    assert np.array_equal(via_dlpack.frames, expected.frames)

    # A non-contiguous tensor view, and a tensor that shares an allocated
    # region (written by torch, read in place by the daemon).
    wide = torch.from_numpy(np.concatenate([x, x], axis=3))[:, :, :, :8]
    assert not wide.is_contiguous()
    assert np.array_equal(client.decode(wide, model="demo").frames, expected.frames)
    buf = client.alloc_latent((2, 32, 8, 8))
    torch.from_numpy(buf).copy_(torch.from_numpy(x))
    in_place = client.decode(torch.from_numpy(buf), model="demo")
    assert in_place.inputs_in_place == {"video_latent": True}
    assert np.array_equal(in_place.frames, expected.frames)

    # Output frames into torch without a copy.
    frames = torch.from_numpy(in_place.frames)
    assert frames.data_ptr() == in_place.frames.__array_interface__["data"][0]


def test_torch_tensors_the_client_cannot_take(client):
    torch = pytest.importorskip("torch", reason="torch is not importable: scripts/fetch-libtorch.sh installs torch 2.11 in the venv the tests run under")
    with pytest.raises(vaed_client.ValidationError, match="video_latent"):
        client.decode(torch.zeros(1, 32, 8, 8, requires_grad=True), model="demo")
    with pytest.raises(vaed_client.ValidationError, match="video_latent.dtype float64"):
        client.decode(torch.zeros(1, 32, 8, 8, dtype=torch.float64), model="demo")


def test_cuda_inputs_are_refused_with_a_clear_error(client):
    class FakeCudaTensor:  # what CuPy / numba / torch.cuda tensors expose
        # A non-null pointer: the interface is checked before the daemon's
        # CUDA ranks, and a null one is refused as such.
        __cuda_array_interface__ = {"shape": (1, 32, 8, 8), "typestr": "<f4",
                                    "data": (0x7F0000000000, False), "version": 3}

    with pytest.raises(vaed_client.ValidationError, match="this daemon has no CUDA ranks") as e:
        client.decode(FakeCudaTensor(), model="demo")
    assert "video_latent" in str(e.value)
    assert e.value.code_name == "failed_precondition"

    class FakeCudaDLPack:
        def __dlpack__(self, stream=None):
            raise AssertionError("must not be exported")

        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA, device 0

    with pytest.raises(vaed_client.ValidationError,
                       match="CUDA tensor .DLPack kDLCUDA.; this daemon has no CUDA ranks"):
        client.decode(FakeCudaDLPack(), model="demo")
