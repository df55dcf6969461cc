"""Acceptance: `pip install ./client/python` works offline with Debian's
Python (a venv with --system-site-packages, as the README says), installs
the type stubs, and the installed package decodes through a daemon."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import BINARY_DIR, REPO


def make_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=300)
    if made.returncode != 0 and "ensurepip" in made.stdout + made.stderr:
        pytest.skip("python3-venv is not installed: " + made.stdout + made.stderr)
    assert made.returncode == 0, made.stdout + made.stderr
    return venv


def check_installed(venv: Path, socket: str, env: dict, cwd: Path) -> None:
    check = textwrap.dedent(f"""
        import os, sys, numpy as np, vaed_client
        pkg = os.path.dirname(vaed_client.__file__)
        assert pkg.startswith({str(venv)!r}), pkg
        files = set(os.listdir(pkg))
        assert {{"_core.pyi", "py.typed", "errors.py"}} <= files, files
        with vaed_client.Client({socket!r}) as c:
            r = c.decode(np.zeros((1, 32, 8, 8), np.float32), model="demo")
        print("installed ok", r.frames.shape)
    """)
    run = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True,
                         text=True, timeout=120, env=env, cwd=cwd)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "installed ok (1, 64, 64, 3)" in run.stdout


def test_pip_install_offline_into_a_venv(daemon, tmp_path):
    venv = make_venv(tmp_path)
    # Offline: no index at all. VAED_BUILD_DIR reuses this build's extension
    # (a from-source build runs CMake client-only; see client/python/setup.py).
    env = dict(os.environ, VAED_BUILD_DIR=str(BINARY_DIR), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index",
                              str(REPO / "client" / "python")],
                             capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr
    assert "Successfully installed vaed-client" in install.stdout

    check_installed(venv, daemon.socket, env, tmp_path)


def test_pip_install_builds_the_extension_from_source(daemon, tmp_path):
    # The user's path without a build tree: setup.py runs CMake client-only
    # (no LibTorch) in its build directory; offline.
    venv = make_venv(tmp_path)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for name in ("PYTHONPATH", "VAED_BUILD_DIR"):
        env.pop(name, None)
    # A copy of client/python beside a copy of the tree CMake needs, so the
    # build directory pip makes stays out of the checkout.
    tree = tmp_path / "tree"
    tree.mkdir()
    for part in ("CMakeLists.txt", "cmake", "shm", "client"):
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, tree / part, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                              "__pycache__"))
        elif src.exists():
            shutil.copy2(src, tree / part)
    source = tree / "client" / "python"
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", str(source)],
                             capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert install.returncode == 0, install.stdout[-4000:] + install.stderr[-4000:]
    check_installed(venv, daemon.socket, env, tmp_path)


def test_stubs_match_the_extension():
    # Every public name of the extension module is in its stub, and back.
    import vaed_client._core as core
    stub = (REPO / "client" / "python" / "vaed_client" / "_core.pyi").read_text()
    for name in ("Region", "DecodeArgs", "Client", "DEFAULT_SOCKET"):
        assert hasattr(core, name) and name in stub
    for method in ("close", "hello", "register_region", "unregister_region", "plan", "decode",
                   "time_decodes", "status", "release_quarantine"):
        assert hasattr(core.Client, method), method
        assert f"def {method}(" in stub, method
