"""Acceptance: `pip install ./client/python` and `pip wheel ./client/python`
work offline with Debian's Python (a venv with --system-site-packages, as
docs/python-client.md says), install the type stubs, leave the checkout as
they found it (no client/python/build/, no *.egg-info), and
the installed package decodes through a daemon."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import BINARY_DIR, REPO

SOURCE = REPO / "client" / "python"


def make_venv(tmp_path: Path, name: str = "venv") -> Path:
    venv = tmp_path / name
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=300)
    if made.returncode != 0 and "ensurepip" in made.stdout + made.stderr:
        pytest.skip("python3-venv is not installed: " + made.stdout + made.stderr)
    assert made.returncode == 0, made.stdout + made.stderr
    return venv


def offline_env(**extra: str) -> Dict[str, str]:
    """The environment of an offline pip: no index at all, no version check,
    and no PYTHONPATH (ctest's would put the build tree's package first)."""
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    env.pop("PYTHONPATH", None)
    return env


def pip(venv: Path, args: List[str], env: Dict[str, str], cwd: Path,
        timeout: float = 600) -> subprocess.CompletedProcess:
    """`pip ARGS` with the venv's pip (Debian's); asserts it succeeded."""
    run = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run


def tree_state(root: Path) -> Dict[str, Tuple[int, int]]:
    """Every file and directory under `root` with its size and mtime, so that
    a file pip creates or rewrites in place shows (ignored ones included:
    build/ and *.egg-info are in .gitignore, so `git status` alone would miss
    a rewrite of a build/ left by an older pip run). __pycache__ is left out:
    a concurrent pytest may write it."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            state[str(path.relative_to(root))] = (st.st_size if name in filenames else 0,
                                                  st.st_mtime_ns)
    return state


def assert_tree_unchanged(before: Dict[str, Tuple[int, int]], root: Path, what: str) -> None:
    after = tree_state(root)
    new = sorted(set(after) - set(before))
    gone = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    assert not (new or gone or changed), (
        f"{what} changed {root}: new {new[:20]}, removed {gone[:20]}, rewritten {changed[:20]} "
        "(setup.py must keep setuptools' build/ and *.egg-info out of the checkout)")


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


def test_pip_install_offline_into_a_venv_leaves_the_checkout_clean(daemon, tmp_path):
    venv = make_venv(tmp_path)
    # Offline: no index at all. VAED_BUILD_DIR reuses this build's extension
    # (a from-source build runs CMake client-only; see client/python/setup.py).
    env = offline_env(VAED_BUILD_DIR=str(BINARY_DIR))
    before = tree_state(SOURCE)
    install = pip(venv, ["install", "--no-index", SOURCE], env, tmp_path)
    assert "Successfully installed vaed-client" in install.stdout
    # pip builds in place (in-tree builds since pip 21.3); setup.py
    # sends setuptools' build/ and *.egg-info to a temporary directory.
    assert_tree_unchanged(before, SOURCE, "pip install ./client/python")

    check_installed(venv, daemon.socket, env, tmp_path)


def test_pip_wheel_builds_offline_and_installs_into_a_fresh_venv(daemon, tmp_path):
    # An integrator builds a wheel once and installs it where
    # there is no source tree (and no network).
    builder = make_venv(tmp_path, "build-venv")
    env = offline_env(VAED_BUILD_DIR=str(BINARY_DIR))
    wheels = tmp_path / "wheels"
    before = tree_state(SOURCE)
    # --no-deps: `pip wheel` would otherwise want a wheel of numpy too, which
    # offline it cannot get (Debian's python3-numpy is installed, not a wheel;
    # the install below finds it through --system-site-packages).
    # --no-build-isolation: Debian's pip 23.0 builds a project without a
    # pyproject.toml through `setup.py bdist_wheel` in this environment
    # anyway; a newer pip builds every project in an isolated environment
    # that it fills with setuptools from the index, which offline fails.
    # Either way the build then uses the venv's setuptools and Debian's wheel.
    pip(builder, ["wheel", "--no-index", "--no-deps", "--no-build-isolation", "-w", wheels,
                  SOURCE], env, tmp_path)
    assert_tree_unchanged(before, SOURCE, "pip wheel ./client/python")

    built = sorted(wheels.glob("*.whl"))
    assert len(built) == 1, built
    wheel = built[0]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    # A binary wheel for this interpreter (it carries the extension).
    assert wheel.name.startswith(f"vaed_client-0.1.0-{tag}-{tag}-linux_"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read("vaed_client-0.1.0.dist-info/METADATA").decode()
    for expected in ("vaed_client/__init__.py", "vaed_client/safetensors.py",
                     "vaed_client/_core.pyi", "vaed_client/py.typed"):
        assert expected in names, (expected, names)
    assert any(n.startswith("vaed_client/_core") and n.endswith(".so") for n in names), names
    # "numpy>=1.22" or, from older wheel versions, "numpy (>=1.22)".
    assert re.search(r"^Requires-Dist: numpy ?\(?>=1\.22\)?$", metadata, re.M), metadata

    # A fresh venv that has never seen the source tree: the wheel alone.
    fresh = make_venv(tmp_path, "fresh-venv")
    install_env = offline_env()
    install_env.pop("VAED_BUILD_DIR", None)
    install = pip(fresh, ["install", "--no-index", wheel], install_env, tmp_path)
    assert "Successfully installed vaed-client" in install.stdout
    check_installed(fresh, daemon.socket, install_env, tmp_path)


def test_pip_install_builds_the_extension_from_source(daemon, tmp_path):
    # The user's path without a build tree: setup.py runs CMake client-only
    # (no LibTorch) in its temporary build directory; offline.
    venv = make_venv(tmp_path)
    env = offline_env()
    env.pop("VAED_BUILD_DIR", None)
    # A copy of client/python beside a copy of the tree CMake needs, so that
    # this test builds from a tree without the checkout's build outputs.
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
    before = tree_state(tree)
    pip(venv, ["install", "--no-index", source], env, tmp_path, timeout=900)
    # CMake's build directory is temporary too: nothing lands in the tree.
    assert_tree_unchanged(before, tree, "pip install (building the extension)")
    check_installed(venv, daemon.socket, env, tmp_path)


def test_stubs_match_the_extension():
    # Every public name of the extension module is in its stub, and back.
    import vaed_client._core as core
    stub = (SOURCE / "vaed_client" / "_core.pyi").read_text()
    for name in ("Region", "DecodeArgs", "Client", "DEFAULT_SOCKET"):
        assert hasattr(core, name) and name in stub
    for method in ("close", "hello", "register_region", "unregister_region", "plan", "decode",
                   "time_decodes", "status", "release_quarantine"):
        assert hasattr(core.Client, method), method
        assert f"def {method}(" in stub, method
